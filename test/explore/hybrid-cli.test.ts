// What explore does for a hybrid campaign beside AFL++, through the real CLI: several -i
// directories all admitted (the same, nested or corpus-as-input refused), symlinked inputs counted
// and reported, --follow keeping the campaign alive past --max-idle while inputs still arrive,
// --corpus-mode, --afl-sync exporting new inputs in AFL's naming, and the exit codes of an end
// (5 wall budget, 1 new findings with --fail-on-findings).
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { spawn } from "node:child_process";
import { CLI, waitFor } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { sha256 } from "../helpers/scratch.ts";
import { campaignStateLeft } from "./leftovers.ts";

/** A target that writes "<input>-child" as its one child for an input that has no "-child" yet. */
function childOnce(e: ExploreDir): string[] {
  return [e.script("child.sh", `case "$(cat "$1")" in *-child*) exit 0 ;; esac\nprintf '%s-child' "$(cat "$1")" > "$SYMCC_OUTPUT_DIR/c"`), "@@"];
}

test("-i a -i b: every directory is admitted, none dropped, each named in the banner", () => {
  const e = new ExploreDir();
  try {
    const more = join(e.dir, "queue-s1");
    mkdirSync(more);
    e.seed("a", "from main");
    writeFileSync(join(more, "b"), "from s1");
    writeFileSync(join(more, "c"), "also from s1");
    const r = e.run(["-i", more, "-j", "2", "--max-idle", "0.5"], childOnce(e));
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const s = e.stats();
    assert.equal(s.external_inputs, 3, "inputs of both directories");
    assert.equal(s.observations, 6, "three inputs and their three children");
    assert.match(r.stdout, new RegExp(`^  inputs   ${e.seeds}$`, "m"));
    assert.match(r.stdout, new RegExp(`^  inputs   ${more}$`, "m"));
    assert.ok(e.corpusFiles().includes(sha256("from s1-child")));
  } finally {
    e.cleanup();
  }
});

test("the same directory twice (also by another path), nested directories and the corpus as input are refused before anything runs", () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "a");
    mkdirSync(join(e.seeds, "inner"));
    symlinkSync(e.seeds, join(e.dir, "seeds-again"));
    const target = ["/bin/true"];
    const cases: [string[], RegExp][] = [
      [["-i", e.seeds], /-i .*seeds and -i .*seeds are the same directory: give each input directory once/],
      [["-i", join(e.dir, "seeds-again")], /are the same directory/],
      [["-i", join(e.seeds, "inner")], /-i .*seeds\/inner lies inside -i .*seeds: input directories are read one level deep/],
      [["-i", e.corpus], /is the input directory|lies inside/],
      [["-i", join(e.dir, "missing")], /-i .*missing does not exist: give an existing directory/],
    ];
    mkdirSync(e.corpus);
    for (const [extra, why] of cases) {
      const r = e.run([...extra, "-j", "1", "--max-idle", "0.5"], target);
      assert.equal(r.code, 2, `${extra.join(" ")}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, why);
    }
    const inside = join(e.corpus, "in");
    mkdirSync(inside);
    const r = e.run(["-i", inside], target);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /-i .*corpus\/in lies inside the corpus -o .*corpus: corpus files are never inputs/);
    assert.deepEqual(e.corpusFiles(), [], "nothing was published");
  } finally {
    e.cleanup();
  }
});

test("symlinked inputs are a counted, reported skip; the file behind the link is never read", () => {
  const e = new ExploreDir();
  try {
    e.seed("real", "real");
    const outside = join(e.dir, "outside");
    writeFileSync(outside, "secret");
    symlinkSync(outside, join(e.seeds, "link1"));
    symlinkSync(outside, join(e.seeds, "link2"));
    const r = e.run(["-j", "1", "--max-idle", "0.5"], ["/bin/true"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /^2 symlinked input\(s\) skipped \(never followed/m);
    const s = e.stats();
    assert.deepEqual([s.symlinked_inputs, s.refused_inputs, s.observations], [2, 2, 1]);
    assert.ok(!e.corpusFiles().includes(sha256("secret")));
  } finally {
    e.cleanup();
  }
});

test("temp files a killed publication left in the hidden state are cleared by the next campaign, never in the corpus", () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "a");
    const tmp = join(e.corpus, ".fuzzfleet", "tmp");
    mkdirSync(tmp, { recursive: true });
    writeFileSync(join(tmp, ".tmp-0123456789abcdef0123456789abcdef"), "half a seed");
    const r = e.run(["-j", "1", "--max-idle", "0.5"], ["/bin/true"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(campaignStateLeft(e.corpus), [], "the temp directory went with the rest of the campaign state");
  } finally {
    e.cleanup();
  }
});

test("--follow: an idle frontier does not end the campaign; inputs that arrive later are explored; the wall budget ends it (exit 5)", async () => {
  const e = new ExploreDir();
  try {
    e.seed("first", "first");
    const log = join(e.dir, "runs.log");
    const target = e.script("t.sh", `cat "$1" >> "${log}"; echo >> "${log}"`);
    const run = e.start(["--follow", "-j", "1", "--max-idle", "0.3", "-t", "1", "--wall-timeout", "6"], [target, "@@"]);
    await waitFor("the campaign to catch up", () => (/caught up with the inputs; following them/.test(run.output()) ? true : undefined), 30_000);
    // Well past --max-idle: without --follow the campaign would have ended by now.
    await new Promise((r) => setTimeout(r, 1500));
    assert.ok(!/^ended:/m.test(run.output()), run.output());
    writeFileSync(join(e.seeds, "later"), "later");
    await waitFor("the later input to run", () => (existsSync(log) && readFileSync(log, "utf8").includes("later") ? true : undefined), 30_000);
    const r = await run.done;
    assert.equal(r.code, 5, run.output());
    assert.match(run.output(), /^ended: wall budget reached$/m);
    const s = e.stats();
    assert.equal(s.observations, 2);
    assert.ok(s.elapsed_seconds >= 5, `ended by the 6 s wall budget, not by --max-idle (${s.elapsed_seconds} s)`);
  } finally {
    e.cleanup();
  }
});

test("--corpus-mode 0644: inputs and children are readable by others; a mode with write for others is refused", () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "a");
    const r = e.run(["--corpus-mode", "0644", "-j", "1", "--max-idle", "0.5"], childOnce(e));
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const modes = e.corpusFiles().map((h) => statSync(join(e.corpus, h)).mode & 0o777);
    assert.deepEqual(modes, [0o644, 0o644], "the seed and its child");
    const plain = new ExploreDir();
    try {
      plain.seed("b", "b");
      assert.equal(plain.run(["-j", "1", "--max-idle", "0.5"], childOnce(plain)).code, 0);
      assert.deepEqual(plain.corpusFiles().map((h) => statSync(join(plain.corpus, h)).mode & 0o777), [0o600, 0o600], "0600 by default");
    } finally {
      plain.cleanup();
    }
    const bad = e.run(["--corpus-mode", "0666"], ["/bin/true"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--corpus-mode: 0666 gives write or execute permission beyond the owner's read and write.*\(0640 or 0644\)/);
  } finally {
    e.cleanup();
  }
});

test("--corpus-mode also reaches the children a remote worker staged: the master gives them the mode once it verified them", async () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "a");
    e.seed("b", "b");
    const token = "corpus-mode-test-token-0123456789";
    const master = e.start(["--corpus-mode", "0644", "-j", "0", "--port", "0", "--bind", "127.0.0.1", "--token", token, "--max-idle", "1", "-t", "5"], childOnce(e));
    const port = await master.port();
    const worker = spawn(process.execPath, [CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", token, "-j", "1"], { cwd: e.dir, stdio: "ignore" });
    const workerDone = new Promise((resolve) => worker.on("close", resolve));
    const r = await master.done;
    assert.equal(r.code, 0, master.output());
    await workerDone;
    assert.equal(e.stats().executors.remote_workers, 1);
    const modes = Object.fromEntries(e.corpusFiles().map((h) => [h, statSync(join(e.corpus, h)).mode & 0o777]));
    assert.deepEqual(modes, {
      [sha256("a")]: 0o644,
      [sha256("b")]: 0o644,
      [sha256("a-child")]: 0o644,
      [sha256("b-child")]: 0o644,
    });
  } finally {
    e.cleanup();
  }
});

test("--afl-sync: new inputs (never the input directory's own) are exported once, in AFL's id: naming, ids growing across campaigns", () => {
  const e = new ExploreDir();
  try {
    const sync = join(e.dir, "afl-out");
    e.seed("a", "a");
    const r = e.run(["--afl-sync", sync, "-j", "1", "--max-idle", "0.5"], childOnce(e));
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const queue = join(sync, "fuzzfleet", "queue");
    assert.deepEqual(readdirSync(queue), [`id:000000,src:fuzzfleet,sha256:${sha256("a-child")}`]);
    assert.equal(readFileSync(join(queue, readdirSync(queue)[0]!), "utf8"), "a-child");
    assert.match(r.stdout, /exported 1 new input\(s\) to .*afl-out\/fuzzfleet\/queue/);
    assert.equal((e.stats() as unknown as { afl_exported: number }).afl_exported, 1);
    assert.deepEqual(readdirSync(join(sync, "fuzzfleet", ".incoming")), [], "no half-written file is left");

    e.seed("b", "b");
    const again = e.run(["--afl-sync", sync, "-j", "1", "--max-idle", "0.5"], childOnce(e));
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.deepEqual(readdirSync(queue).sort(), [`id:000000,src:fuzzfleet,sha256:${sha256("a-child")}`, `id:000001,src:fuzzfleet,sha256:${sha256("b-child")}`]);
    assert.deepEqual(campaignStateLeft(e.corpus), []);

    // A sync directory whose fuzzfleet/ is a symlink is refused before anything runs.
    const trap = join(e.dir, "trap");
    mkdirSync(join(trap, "elsewhere"), { recursive: true });
    symlinkSync(join(trap, "elsewhere"), join(trap, "fuzzfleet"));
    const refused = e.run(["--afl-sync", trap, "-j", "1", "--max-idle", "0.5"], childOnce(e));
    assert.equal(refused.code, 2, refused.stdout + refused.stderr);
    assert.match(refused.stderr, /--afl-sync: .*trap\/fuzzfleet is a symbolic link to '.*elsewhere'; nothing is followed through a symlink; give a sync directory whose fuzzfleet\/ is a plain directory/);
    assert.deepEqual(readdirSync(join(trap, "elsewhere")), [], "nothing written through the link");
    assert.deepEqual(campaignStateLeft(e.corpus), [], "no campaign state was opened");
  } finally {
    e.cleanup();
  }
});

test("--fail-on-findings: exit 1 for a crash never recorded before, 0 once it is known", () => {
  const e = new ExploreDir();
  try {
    e.seed("ok", "ok");
    e.seed("boom", "boom");
    const target = [e.script("crash.sh", `grep -q boom "$1" && kill -SEGV $$\nexit 0`), "@@"];
    const r = e.run(["--fail-on-findings", "-j", "1", "--max-idle", "0.5"], target);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /^1 new crash\(es\) or hang\(s\) recorded in this session \(--fail-on-findings: exit 1\)$/m);
    assert.equal((e.stats() as unknown as { new_findings: number }).new_findings, 1);
    const again = e.run(["--fail-on-findings", "--fresh", "-j", "1", "--max-idle", "0.5"], target);
    assert.equal(again.code, 0, "the same crash again is not new\n" + again.stdout + again.stderr);
  } finally {
    e.cleanup();
  }
});
