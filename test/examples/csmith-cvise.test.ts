// The Csmith recipe end to end, with the real tools: csmith programs built by gcc -O0 and by a
// deliberately broken compiler wrapper (examples/csmith/bad-cc.sh: an internal compiler error on
// programs with three or more for loops, the first initialized global miscompiled otherwise),
// swept by fuzzfleet, and the wrong-code finds reduced by C-Vise in the background with an
// interestingness test built from the same differential check. The finds converge to the
// wrapper's two distinct bugs. Kept small: a few seeds, tiny programs, C-Vise's cheaper passes.
// The compiler is named as the docs' sample names it, relative to the config directory
// (TEST_CC="sh bad-cc.sh"), which C-Vise's scratch directory must not change. A find C-Vise did
// not reduce, or whose check does not hold on the original, is filed as not minimized, with why.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, finished, ROOT, start, waitFor } from "../helpers/campaign.ts";

const EX = join(ROOT, "examples/csmith");
const SWEEP = join(EX, "csmith-sweep.sh");
/** As the docs write it: the broken compiler beside fuzzfleet.toml, named relative to it. */
const BAD_CC = "sh bad-cc.sh";
/** Small programs: seeds 10 and 11 are wrong-code under bad-cc.sh, seed 12 has three for loops. */
const CSMITH_ARGS = ["--max-funcs", "2", "--max-block-depth", "2", "--max-expr-complexity", "2", "--no-arrays", "--no-structs", "--no-unions", "--no-pointers", "--max-block-size", "2"];

const GENERATOR = `[generator]
command = ["sh", ${JSON.stringify(SWEEP)}, "{seed_from}", "{count}", "{out}", "{jobs}"]
identity = [${JSON.stringify(SWEEP)}]
check = ["sh", ${JSON.stringify(SWEEP)}, "--check", "{seeds}", "{jobs}"]
minimize = ["env", ${JSON.stringify(`TEST_CC=${BAD_CC}`)}, "REF_CC=gcc -O0", "sh", ${JSON.stringify(SWEEP)}, "--minimize", "{seed}", "{out}", "{jobs}"]
`;

const scratch = mkdtempSync(join(tmpdir(), "fuzzfleet-csmith-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** A C-Vise pass-group file with no pass: C-Vise runs, exits 0, and leaves the program as it was. */
const NO_PASSES = join(scratch, "no-passes.json");
writeFileSync(NO_PASSES, JSON.stringify({ first: [], main: [], last: [] }));

/** A campaign of the recipe, with bad-cc.sh copied beside its config. */
function csmithCampaign(cvisePasses: string): Campaign {
  const c = new Campaign({
    defaults: { jobs: 2, chunk_minutes: 0.05, bootstrap_seeds: 3, max_shrinks: 0 },
    generator: GENERATOR,
    lanes: { small: `base_seed = 10\nargs = ${JSON.stringify(CSMITH_ARGS)}` },
    extra: "[minimize]\nshare = 1\ntimeout_minutes = 3\n",
  });
  copyFileSync(join(EX, "bad-cc.sh"), join(c.dir, "bad-cc.sh"));
  c.env.REF_CC = "gcc -O0";
  c.env.RUN_TIMEOUT = "5";
  c.env.CVISE_PASSES = cvisePasses;
  // gcc, C-Vise and Python leave temporary files behind when a timeout kills them: they go into
  // the campaign's directory, removed with it, not into the suite's TMPDIR.
  c.env.TMPDIR = join(c.dir, "tool-tmp");
  mkdirSync(c.env.TMPDIR);
  return c;
}

interface FailuresJson {
  failures: { id: number; bucket: string; hits: number; signature: string; artifact_dir: string }[];
  pending: { signature: string; finds: number; hits: number }[];
  totals: { distinct: number; distinct_hits: number; pending_finds: number; pending_hits: number; hits: number };
}

test("a Csmith sweep against a broken compiler converges, after C-Vise, to the wrapper's two distinct bugs", { timeout: 480_000 }, async () => {
  const c = csmithCampaign(join(EX, "quick-passes.json"));
  try {
    // A chunk of seeds 10..12 against the broken compiler (on a fast machine a second one,
    // 13..22, adds three compiler crashes and one wrong-code find; no third fits in 4 s).
    const first = c.cli(["run", "--for", "4s"], { env: { TEST_CC: BAD_CC } });
    assert.equal(first.code, exitOwed(c, first.stdout), first.stdout + first.stderr);
    const mid = JSON.parse(c.cli(["failures", "--json"]).stdout) as FailuresJson;
    assert.deepEqual(
      mid.failures.map((f) => f.bucket),
      ["compiler-error"],
      `the compiler crash is distinct at once, keyed by its signature: ${JSON.stringify(mid.failures)}`,
    );
    const wrongFinds = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE bucket = 'wrong-code'").n;
    assert.ok(wrongFinds >= 2 && wrongFinds <= 3, `wrong-code finds: ${wrongFinds}`);
    const allFinds = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure_seed").n;
    for (const p of mid.pending) assert.match(p.signature, /checksum differs from the reference/);

    // The sweep goes on against a sound compiler (no new finds); C-Vise reduces the queue.
    const second = start(c, ["run", "--for", "400s"], { TEST_CC: "gcc -O0" });
    await waitFor(
      "C-Vise to reduce every wrong-code find",
      () => (c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE minimize_state IN ('pending', 'running')").n === 0 ? true : undefined),
      // About 40 s a reduction at a load of 9 on two cores; a heavier load stretches it.
      330_000,
      500,
    );
    second.child.kill("SIGINT");
    const r = await finished(second, 60_000);
    assert.equal(r.code, exitOwed(c, r.stdout), r.stdout + r.stderr);

    const end = JSON.parse(c.cli(["failures", "--json"]).stdout) as FailuresJson;
    const notes = c.query<{ id: number; minimize_note: string }>("SELECT id, minimize_note FROM failure WHERE minimize_state = 'failed'");
    assert.equal(end.totals.pending_finds, 0, `${JSON.stringify(end.pending)}\nwhy: ${JSON.stringify(notes)}`);
    assert.deepEqual(end.failures.map((f) => f.bucket).sort(), ["compiler-error", "wrong-code"], JSON.stringify(end.failures));
    const wrong = end.failures.find((f) => f.bucket === "wrong-code")!;
    assert.equal(wrong.hits, wrongFinds, "every wrong-code seed reduced to one distinct failure");
    assert.equal(end.totals.hits, allFinds, "the sound compiler added no find");
    const full = statSync(join(wrong.artifact_dir, "input.c")).size;
    const reduced = readFileSync(join(wrong.artifact_dir, "input.min.c"), "utf8");
    assert.ok(reduced.length * 4 < full, `C-Vise reduced the program (${full} -> ${reduced.length} bytes):\n${reduced}`);
    assert.match(reduced, /transparent_crc/);
  } finally {
    c.cleanup();
  }
});

test("a find C-Vise did not make smaller is filed as not minimized, and fuzzfleet books it so with the wrapper's reason", { timeout: 300_000 }, async () => {
  const c = csmithCampaign(NO_PASSES);
  try {
    const first = c.cli(["run", "--for", "4s"], { env: { TEST_CC: BAD_CC } });
    assert.equal(first.code, exitOwed(c, first.stdout), first.stdout + first.stderr);
    const wrongFinds = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE bucket = 'wrong-code'").n;
    assert.ok(wrongFinds >= 2, `wrong-code finds: ${wrongFinds}`);
    const second = start(c, ["run", "--for", "200s"], { TEST_CC: "gcc -O0" });
    await waitFor(
      "every wrong-code find to be booked",
      () => (c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE minimize_state IN ('pending', 'running')").n === 0 ? true : undefined),
      180_000,
      500,
    );
    second.child.kill("SIGINT");
    const r = await finished(second, 60_000);
    assert.equal(r.code, exitOwed(c, r.stdout), r.stdout + r.stderr);

    const booked = c.query<{ minimize_state: string; minimize_note: string }>("SELECT minimize_state, minimize_note FROM failure WHERE bucket = 'wrong-code' ORDER BY id");
    assert.equal(booked.length, wrongFinds);
    for (const f of booked) {
      assert.equal(f.minimize_state, "failed");
      assert.match(f.minimize_note, /^the minimizer wrote it as not minimized \(shrunk: false\): C-Vise did not make the program smaller \(\d+ bytes\)$/);
    }
    const end = JSON.parse(c.cli(["failures", "--json"]).stdout) as FailuresJson;
    assert.deepEqual(end.failures.map((f) => f.bucket), ["compiler-error"], "no whole program passes for a reduced one");
    assert.deepEqual(
      end.pending.map((p) => [p.signature, p.finds]),
      [["wrong-code: checksum differs from the reference", wrongFinds]],
      "the finds stay pending under their signature",
    );
  } finally {
    c.cleanup();
  }
});

test("a find whose check does not hold on the original program is filed as not minimized, and C-Vise is not asked", () => {
  const dir = mkdtempSync(join(scratch, "flaky-"));
  // A compiler that miscompiles the first program it builds and none after: the find is real once.
  writeFileSync(
    join(dir, "flaky-cc.sh"),
    `if [ -e ${JSON.stringify(join(dir, "used"))} ]; then exec gcc -O1 "$@"; fi\n: > ${JSON.stringify(join(dir, "used"))}\nexec sh ${JSON.stringify(join(EX, "bad-cc.sh"))} "$@"\n`,
  );
  const out = join(dir, "out");
  const r = spawnSync("sh", [SWEEP, "--minimize", "10", out, "1", ...CSMITH_ARGS], {
    cwd: dir,
    encoding: "utf8",
    env: { ...process.env, TEST_CC: "sh flaky-cc.sh", REF_CC: "gcc -O0", RUN_TIMEOUT: "5", CVISE_PASSES: join(EX, "quick-passes.json"), TMPDIR: mkdirSync(join(dir, "tool-tmp"), { recursive: true })! },
    timeout: 120_000,
  });
  assert.equal(r.status, 1, r.stderr);
  const why = "the interestingness test fails on the original program (the check gives 'ok', not 'wrong-code')";
  assert.equal(r.stderr, `csmith-sweep.sh: seed 10 not minimized: ${why}\n`);
  const entry = join(out, "failures", "10");
  assert.deepEqual(readdirSync(entry).sort(), ["input.c", "meta.json", "report.txt"], "no input.min.c");
  const meta = JSON.parse(readFileSync(join(entry, "meta.json"), "utf8")) as Record<string, unknown>;
  assert.deepEqual([meta.bucket, meta.shrunk, meta.msg, meta.key_file], ["wrong-code", false, why, "input.c"]);
  assert.equal(readFileSync(join(entry, "report.txt"), "utf8"), `seed 10: wrong-code, not minimized: ${why}\n`, "C-Vise never ran: no log to quote");
  assert.ok(!existsSync(join(out, "work")), "its scratch directory is gone");
});
