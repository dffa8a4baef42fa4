// Results bound to the target build that produced them, end to end through the CLI with real
// targets: a rebuilt target runs an explored corpus again (and says why in one line), an
// unchanged one skips it; a finding a new build does not reproduce says so in every view
// (statistics, failures --corpus, export --corpus, the dashboard's detail, report --corpus); a
// remote worker that sees another build refuses to serve, naming both, and the master says why.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ExploreDashboardSource } from "../../src/explore/views/dashboard-source.ts";
import { ExploreCampaignFiles } from "../../src/explore/views/campaign-files.ts";
import { CLI } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { sha256 } from "../helpers/scratch.ts";

const IDLE = ["-j", "2", "-t", "5", "--max-idle", "0.5"];

/** A report command run in the campaign's directory; it must succeed. Its stdout. */
function cli(e: ExploreDir, args: string[]): string {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: e.dir, encoding: "utf8", timeout: 60_000 });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  return r.stdout;
}

const BUILD_LINE = /build +([0-9a-f]{12}) {2}\(hashed: /;

test("a rebuilt target runs an explored corpus again and says why in one line; the unchanged target skips it all", () => {
  const e = new ExploreDir();
  try {
    for (const name of ["a", "b", "c", "d"]) e.seed(name, `${name}\n`);
    const t = e.script("t.sh", "exit 0");
    const first = e.run(IDLE, [t, "@@"]);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    assert.deepEqual([e.stats().observations, e.stats().generated], [4, 0]);

    // Rebuilt: every input it did not write itself gets one child.
    e.script("t.sh", `case "$(cat "$1")" in *-v2) ;; *) printf '%s-v2' "$(cat "$1")" > "$SYMCC_OUTPUT_DIR/child" ;; esac`);
    const second = e.run(IDLE, [t, "@@"]);
    assert.equal(second.code, 0, second.stdout + second.stderr);
    const s2 = e.stats();
    assert.deepEqual([s2.observations, s2.generated, s2.interesting, s2.skipped_explored], [8, 4, 4, 0], "every input ran again, and the new build's children");
    const buildA = BUILD_LINE.exec(first.stdout)![1]!;
    const buildB = BUILD_LINE.exec(second.stdout)![1]!;
    assert.notEqual(buildB, buildA);
    assert.equal(e.stats().target.build, buildB);
    const changed = second.stdout.split("\n").filter((l) => l.includes("target changed"));
    assert.deepEqual(changed, [`  target changed since the last campaign: build ${buildA} → ${buildB}, 4 input(s) run again`]);
    assert.equal(s2.rerun_other_build, 4);
    assert.equal(s2.target.executable?.sha256, sha256(readFileSync(t)));
    assert.match(second.stdout, /ended: frontier exhausted/);

    // The same target again: everything was explored under this build.
    const third = e.run(IDLE, [t, "@@"]);
    assert.equal(third.code, 0, third.stdout + third.stderr);
    assert.doesNotMatch(third.stdout, /target changed/);
    const s3 = e.stats();
    assert.deepEqual([s3.observations, s3.generated, s3.skipped_explored, s3.rerun_other_build], [0, 0, 8, 0]);
    assert.match(third.stdout, /already explored: +8 skipped/);
  } finally {
    e.cleanup();
  }
});

test("a --target-file is part of the build: changing it alone runs the corpus again", () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "a\n");
    const t = e.script("t.sh", "exit 0");
    const runtime = join(e.dir, "runtime.conf");
    writeFileSync(runtime, "v1\n");
    const flags = [...IDLE, "--target-file", "runtime.conf"];
    assert.equal(e.run(flags, [t, "@@"]).code, 0);
    assert.deepEqual(e.stats().target.files, [{ path: runtime, sha256: sha256("v1\n") }]);
    assert.equal(e.run(flags, [t, "@@"]).code, 0);
    assert.equal(e.stats().skipped_explored, 1, "unchanged: skipped");
    writeFileSync(runtime, "v2\n");
    const r = e.run(flags, [t, "@@"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /target changed since the last campaign: build [0-9a-f]{12} → [0-9a-f]{12}, 1 input\(s\) run again/);
    assert.deepEqual([e.stats().observations, e.stats().skipped_explored], [1, 0]);
    const missing = e.run([...IDLE, "--target-file", "no-such.conf"], [t, "@@"]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /^fuzzfleet: --target-file no-such\.conf: .*no-such\.conf cannot be resolved \(ENOENT\); name an existing regular file\n$/);
  } finally {
    e.cleanup();
  }
});

test("a finding a rebuilt target does not reproduce says so in the statistics, failures, export, the dashboard and the report; one it reproduces keeps counting", () => {
  const e = new ExploreDir();
  try {
    e.seed("fixed", "fixed\n");
    e.seed("still", "still\n");
    e.seed("ok", "ok\n");
    const t = e.script("t.sh", `case "$(cat "$1")" in fixed|still) echo "boom" >&2; kill -ABRT $$ ;; esac`);
    const first = e.run(IDLE, [t, "@@"]);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    e.script("t.sh", `case "$(cat "$1")" in still) echo "boom" >&2; kill -ABRT $$ ;; esac`);
    const second = e.run(IDLE, [t, "@@"]);
    assert.equal(second.code, 0, second.stdout + second.stderr);
    const fixed = sha256("fixed\n");
    const still = sha256("still\n");
    const seen = Object.fromEntries(e.stats().findings.inputs.map((f) => [f.input_hash, f.times_seen]));
    assert.deepEqual(seen, { [fixed]: 1, [still]: 2 }, "the new build ran both inputs again; only one crashed");
    const buildA = BUILD_LINE.exec(first.stdout)![1]!;
    const buildB = BUILD_LINE.exec(second.stdout)![1]!;
    assert.match(second.stdout, new RegExp(`finding: ${fixed.slice(0, 12)} not reproduced by build ${buildB}`));

    const byHash = Object.fromEntries(e.stats().findings.inputs.map((f) => [f.input_hash, [f.times_seen, f.first_build, f.last_build, f.not_reproduced_by]]));
    assert.deepEqual(byHash, { [fixed]: [1, buildA, buildA, buildB], [still]: [2, buildA, buildB, null] });
    // The signature's example is whichever of the two was first seen: its line names that one's builds.
    const example = /e\.g\. ([0-9a-f]{64})/.exec(second.stdout)?.[1];
    assert.ok(example === fixed || example === still, second.stdout);
    const exampleBuilds = example === fixed ? `build ${buildA}, not reproduced by build ${buildB}` : `builds ${buildA} → ${buildB}`;
    assert.match(second.stdout, new RegExp(`e\\.g\\. ${example}[^\\n]*\\n\\s+${exampleBuilds}\\n`), "the final statistics' example line");

    const failures = cli(e, ["failures", "--corpus", e.corpus]);
    assert.match(failures, /; 1 not reproduced by a later build\n/);
    assert.match(failures, new RegExp(`${fixed.slice(0, 16)}  crash \\(signal 6\\)  seen 1  first \\S+  build ${buildA}, not reproduced by build ${buildB}\n`));
    assert.match(failures, new RegExp(`${still.slice(0, 16)}  crash \\(signal 6\\)  seen 2  first \\S+  builds ${buildA} → ${buildB}\n`));

    const out = join(e.dir, "export.txt");
    cli(e, ["export", "--corpus", e.corpus, "-o", out]);
    const bundle = readFileSync(out, "utf8");
    const section = (h: string) => bundle.slice(bundle.indexOf(`===== FINDING ${h}`)).split("\n=====")[0]!;
    assert.match(section(fixed), new RegExp(`builds      first ${buildA}, last ${buildA}\n {6}status      not reproduced by build ${buildB}\n`));
    assert.match(section(still), new RegExp(`builds      first ${buildA}, last ${buildB}\n`));
    assert.doesNotMatch(section(still), /not reproduced/);

    // The dashboard's detail of the signature (ui --corpus and report --corpus read it the same way).
    const source = new ExploreDashboardSource({ title: "t", live: null, files: new ExploreCampaignFiles(e.corpus) });
    const detail = source.failureDetail(1)!;
    assert.match(detail.report, /target builds \(1 of 2 input\(s\) not reproduced by a later build\):\n/);
    assert.match(detail.report, new RegExp(`  ${fixed.slice(0, 16)}  build ${buildA}, not reproduced by build ${buildB}\n`));

    const reportDir = join(e.dir, "report");
    cli(e, ["report", "--corpus", e.corpus, "-o", reportDir]);
    assert.match(readFileSync(join(reportDir, "index.html"), "utf8"), new RegExp(`${fixed.slice(0, 16)}  build ${buildA}, not reproduced by build ${buildB}`));
  } finally {
    e.cleanup();
  }
});

test("a remote worker that sees another target build is refused at the handshake by the master (exit 3, naming both builds); the master logs why; one that sees the same build serves", async () => {
  const e = new ExploreDir();
  const TOKEN = "identity-test-token-0123456789";
  try {
    e.seed("a", "a\n");
    // The same name, found in PATH, is another build on the worker's "host".
    const masterBin = join(e.dir, "bin-master");
    const otherBin = join(e.dir, "bin-other");
    for (const [dir, body] of [
      [masterBin, "exit 0"],
      [otherBin, "exit 1"],
    ] as const) {
      mkdirSync(dir);
      writeFileSync(join(dir, "tgt"), `#!/bin/sh\n${body}\n`);
      chmodSync(join(dir, "tgt"), 0o755);
    }
    const path = (bin: string) => `${bin}:${process.env.PATH}`;
    const master = e.start(["-j", "0", "--port", "0", "--bind", "127.0.0.1", "--token", TOKEN, "--max-idle", "0.5"], ["tgt", "@@"], { PATH: path(masterBin) });
    const port = await master.port();
    const worker = (bin: string) => {
      const w = spawn(process.execPath, [CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", TOKEN], { cwd: e.dir, env: { ...process.env, PATH: path(bin) }, stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      w.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
      w.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
      return { done: new Promise<number | null>((resolve) => w.on("close", (code) => resolve(code))), out: () => out };
    };
    const other = worker(otherBin);
    assert.equal(await other.done, 3, other.out());
    const buildM = BUILD_LINE.exec(master.output())![1]!;
    const m = /refused this worker:\s+target build differs \(worker build ([0-9a-f]{12}), master build ([0-9a-f]{12})\): the worker resolves the target in the shared directory/.exec(other.out());
    assert.ok(m, other.out());
    assert.equal(m[2], buildM);
    assert.notEqual(m[1], buildM);
    const honest = worker(masterBin);
    const ended = await master.done;
    assert.equal(ended.code, 0, master.output());
    assert.equal(await honest.done, 0, honest.out());
    assert.match(master.output(), new RegExp(`REFUSED 127\\.0\\.0\\.1:\\d+ — target build differs \\(worker build ${m[1]}, master build ${buildM}\\)`));
    assert.equal(e.stats().observations, 1, "the worker that sees the same build ran the input");
  } finally {
    e.cleanup();
  }
});
