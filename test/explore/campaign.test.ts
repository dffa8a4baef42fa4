// `fuzzfleet explore` with one master, end to end: real target processes, the real corpus and
// lease table on disk.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { campaignStateLeft } from "./leftovers.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { waitFor } from "../helpers/campaign.ts";
import { sha256 } from "../helpers/scratch.ts";


test("one seed, /bin/true, two slots: one observation, exit 0, nothing hidden left", () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "hello\n");
    const r = e.run(["-j", "2", "--max-idle", "1", "-t", "5"], ["/bin/true"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const s = e.stats();
    assert.deepEqual([s.observations, s.generated, s.external_inputs, s.interesting], [1, 0, 1, 0]);
    assert.deepEqual(s.by_master, { "0": 1 });
    assert.deepEqual(e.corpusFiles(), [sha256("hello\n")]);
    assert.deepEqual(campaignStateLeft(e.corpus), [], "only the corpus object and the ledger: no work state, staging or lock");
    // The window's exactness is tested on a fake clock (idle-window.test.ts); here: it ran, whole.
    const waited = Number(/no more inputs after (\d+\.\d{3})s \(limit 1s\)/.exec(r.stdout)?.[1]);
    assert.ok(waited >= 1, `the idle window ended and was not cut short (waited ${waited}s)\n${r.stdout}`);
    for (const key of ["observations", "generated", "external_inputs", "interesting", "throughput", "by_master", "elapsed_seconds"]) {
      assert.ok(key in s, `--stats-json has ${key}`);
    }
  } finally {
    e.cleanup();
  }
});

for (const sync of ["fence", "all"]) test(`24 distinct seeds: 24 observations and 24 corpus files (--sync ${sync})`, () => {
  const e = new ExploreDir();
  try {
    for (let i = 0; i < 24; i++) e.seed(`s${i}`, `seed ${i}\n`);
    const r = e.run(["-j", "2", "--max-idle", "1", "-t", "5", "--sync", sync], ["/bin/true"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(e.stats().observations, 24);
    assert.equal(e.corpusFiles().length, 24);
    assert.equal(e.corpusFiles().length, 24);
    assert.deepEqual(campaignStateLeft(e.corpus), []);
  } finally {
    e.cleanup();
  }
});

test("12 seeds that all emit the same child: 13 observations, 13 generated, 1 interesting; the child runs once", () => {
  const e = new ExploreDir();
  try {
    for (let i = 0; i < 12; i++) e.seed(`s${i}`, `seed ${i}\n`);
    const log = join(e.dir, "executions.log");
    const target = e.script("t.sh", `cat >> "${log}"; echo >> "${log}"; echo shared-child > "$SYMCC_OUTPUT_DIR/out"`);
    const r = e.run(["-j", "2", "--max-idle", "1", "-t", "5"], [target]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const s = e.stats();
    assert.deepEqual([s.observations, s.generated, s.interesting, e.corpusFiles().length], [13, 13, 1, 13]);
    const runs = readFileSync(log, "utf8").split("\n").filter((l) => l === "shared-child");
    assert.equal(runs.length, 1, "the shared child was executed exactly once");
  } finally {
    e.cleanup();
  }
});

test("a corpus file whose content does not match its name: digest mismatch reported, never executed, exit 70", () => {
  const e = new ExploreDir();
  try {
    e.seed("good", "good seed\n");
    mkdirSync(e.corpus);
    const forged = sha256("what the name promises\n");
    writeFileSync(join(e.corpus, forged), "something else entirely\n");
    const log = join(e.dir, "executions.log");
    const target = e.script("t.sh", `cat >> "${log}"`);
    const r = e.run(["-j", "1", "--max-idle", "1", "-t", "5"], [target]);
    assert.equal(r.code, 70, r.stdout + r.stderr);
    assert.match(r.stdout, new RegExp(`shared corpus digest mismatch: .*${forged}`));
    const s = e.stats();
    assert.equal(s.observations, 1, "the good seed still ran");
    assert.equal(s.integrity_errors, 1);
    assert.equal(readFileSync(log, "utf8"), "good seed\n", "the forged file was never executed");
    assert.ok(existsSync(join(e.corpus, forged)), "the bad file is left for inspection");
  } finally {
    e.cleanup();
  }
});

test("file mode: @@ becomes the input's path and SYMCC_INPUT_FILE names it; stdin mode feeds it on stdin, without SYMCC_INPUT_FILE", () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "abc");
    const fileMode = e.script("f.sh", `test "$1" = "$SYMCC_INPUT_FILE" || exit 9; tr a-z A-Z < "$1" > "$SYMCC_OUTPUT_DIR/up"`);
    const r = e.run(["-j", "1", "--max-idle", "0.5", "-t", "5"], [fileMode, "@@"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.ok(e.corpusFiles().includes(sha256("ABC")));
    const e2 = new ExploreDir();
    try {
      e2.seed("a", "xyz");
      // A SYMCC_INPUT_FILE left in fuzzfleet's own environment must not reach a stdin-mode target.
      const stdinMode = e2.script("s.sh", `test -z "\${SYMCC_INPUT_FILE+set}" || exit 9; tr a-z A-Z > "$SYMCC_OUTPUT_DIR/up"`);
      const r2 = e2.run(["-j", "1", "--max-idle", "0.5", "-t", "5"], [stdinMode], { SYMCC_INPUT_FILE: "/nonexistent" });
      assert.equal(r2.code, 0, r2.stdout + r2.stderr);
      assert.ok(e2.corpusFiles().includes(sha256("XYZ")));
    } finally {
      e2.cleanup();
    }
  } finally {
    e.cleanup();
  }
});

test("a file-mode target that replaces its input with a symlink or a directory does not disturb the next run in its slot", () => {
  const e = new ExploreDir();
  try {
    for (const name of ["a", "b", "c", "d"]) e.seed(name, `seed ${name}\n`);
    const log = join(e.dir, "executions.log");
    const outside = join(e.dir, "outside");
    writeFileSync(outside, "untouched\n");
    // Odd runs leave a symlink where their input was, even runs a directory.
    const target = e.script(
      "vandal.sh",
      `cat "$1" >> "${log}"; rm -f "$1"; if [ $(wc -l < "${log}") -eq 1 ] || [ $(wc -l < "${log}") -eq 3 ]; then ln -s "${outside}" "$1"; else mkdir "$1"; fi`,
    );
    const r = e.run(["-j", "1", "--max-idle", "0.5", "-t", "5"], [target, "@@"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(e.stats().observations, 4);
    assert.deepEqual(readFileSync(log, "utf8").trim().split("\n").sort(), ["seed a", "seed b", "seed c", "seed d"]);
    assert.equal(readFileSync(outside, "utf8"), "untouched\n");
  } finally {
    e.cleanup();
  }
});

test("--simulate synthesises five seeded mutants when a run produced nothing", () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "0123456789");
    // Every mutant has mutants of its own: the frontier never ends, so the wall budget does.
    const r = e.run(["-j", "1", "--max-idle", "0.5", "-t", "1", "--wall-timeout", "3", "--simulate"], ["/bin/true"]);
    assert.equal(r.code, 5, "wall budget reached: exit 5\n" + r.stdout + r.stderr);
    const s = e.stats();
    assert.ok(s.observations >= 2 && s.generated === 5 * s.observations, `5 mutants per run (${s.generated} for ${s.observations})`);
    assert.match(r.stdout, /the frontier is not exhausted \(wall budget\); continue with: --resume [0-9a-f]{64}/);
    assert.ok(s.elapsed_seconds < 3.5, `the wall budget holds (${s.elapsed_seconds}s)`);
  } finally {
    e.cleanup();
  }
});

test("bad flags are usage errors that name the flag", () => {
  const e = new ExploreDir();
  try {
    const noTarget = e.run(["-j", "1"], []);
    assert.equal(noTarget.code, 2);
    assert.match(noTarget.stderr, /no target command: put it after --/);
    const badTimeout = e.run(["-t", "soon"], ["/bin/true"]);
    assert.equal(badTimeout.code, 2);
    assert.match(badTimeout.stderr, /^fuzzfleet: -t wants seconds >= 0\.001 or a duration such as 45s, 2m or 1h30m \(got .soon.\)$/m);
    const missingInput = e.run(["-i", join(e.dir, "nope")], ["/bin/true"]);
    assert.equal(missingInput.code, 2);
    const badResume = e.run(["--resume", "XYZ"], ["/bin/true"]);
    assert.equal(badResume.code, 2);
    assert.match(badResume.stderr, /--resume wants the 64 lowercase hex/);
    assert.deepEqual(readdirSync(e.dir).filter((n) => n === "corpus").length <= 1, true);
  } finally {
    e.cleanup();
  }
});

test("SIGINT ends cleanly: running executions are stopped and requeued, the state is kept, --resume finishes the rest", async () => {
  const e = new ExploreDir();
  try {
    for (let i = 0; i < 8; i++) e.seed(`s${i}`, `seed ${i}\n`);
    const log = join(e.dir, "executions.log");
    const target = e.script("t.sh", `read line; sleep 1; echo "$line" >> "${log}"`);
    const first = e.start(["-j", "2", "--max-idle", "1", "-t", "10"], [target]);
    await waitFor("two executions done", () => (existsSync(log) && readFileSync(log, "utf8").split("\n").length > 2 ? true : undefined), 60_000);
    first.child.kill("SIGINT");
    const r = await first.done;
    assert.equal(r.code, 6, "interrupted: exit 6\n" + first.output());
    const epoch = /continue with: --resume ([0-9a-f]{64})/.exec(first.output())?.[1];
    assert.ok(epoch, first.output());
    assert.ok(e.stats().observations >= 2 && e.stats().observations < 8);
    const again = e.run(["-j", "2", "--max-idle", "1", "-t", "10", "--resume", epoch!], [target]);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.equal(e.stats().observations, 8, "every seed committed once over both runs");
    assert.deepEqual(campaignStateLeft(e.corpus), []);
  } finally {
    e.cleanup();
  }
});

test("the input directory is rescanned: a file dropped in later is explored; one over the budget is skipped until it changes", async () => {
  const e = new ExploreDir();
  try {
    e.seed("first", "first\n");
    const log = join(e.dir, "executions.log");
    const target = e.script("t.sh", `read line; echo "$line" >> "${log}"`);
    const run = e.start(["-j", "1", "--max-idle", "4", "-t", "5", "--max-input-bytes", "100", "--max-result-bytes", "100"], [target]);
    await waitFor("the first seed to run", () => (existsSync(log) && readFileSync(log, "utf8").includes("first") ? true : undefined), 60_000);
    // An external producer (an AFL++ queue, say) adds inputs while the campaign runs.
    writeFileSync(join(e.seeds, "second"), "second\n");
    writeFileSync(join(e.seeds, "big"), "x".repeat(200) + "\n");
    await waitFor("the oversized input to be skipped", () => (/input big is larger than the input budget \(201 > 100 bytes\): skipped/.test(run.output()) ? true : undefined), 60_000);
    writeFileSync(join(e.seeds, "big"), "now small\n");
    const r = await run.done;
    assert.equal(r.code, 0, run.output());
    assert.deepEqual(readFileSync(log, "utf8").trim().split("\n").sort(), ["first", "now small", "second"]);
    assert.equal(e.stats().observations, 3);
    assert.deepEqual(e.corpusFiles().sort(), [sha256("first\n"), sha256("now small\n"), sha256("second\n")].sort(), "the oversized content was never published");
  } finally {
    e.cleanup();
  }
});
