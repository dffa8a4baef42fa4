// The bundled example generator, exercised exactly as fuzzfleet runs it: the real script in a
// child process, judged by its exit code, its stdout and the files it leaves behind.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
const SCRIPT = join(REPO, "examples/planted/planted.mjs");
const BUCKETS = ["crash", "hang-detected", "wrong-result"] as const;

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

interface Meta {
  seed: number;
  bucket: string;
  shrunk: boolean;
  msg: string;
  repro: string;
  key_file: string;
}

interface Verdict {
  seed: number;
  bucket: string;
  msg: string;
}

/** The caller's environment without any PLANTED_* switch, plus `env`. */
function childEnv(env: Record<string, string> = {}): NodeJS.ProcessEnv {
  const clean: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("PLANTED_")) clean[k] = v;
  return { ...clean, ...env };
}

function planted(args: string[], opts: { env?: Record<string, string>; cwd?: string; timeout?: number } = {}): Run {
  const r = spawnSync(process.execPath, [SCRIPT, ...args], {
    cwd: opts.cwd ?? REPO,
    env: childEnv(opts.env),
    encoding: "utf8",
    timeout: opts.timeout ?? 120_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const scratch = mkdtempSync(join(tmpdir(), "planted-test-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
let dirCount = 0;
function freshDir(): string {
  return join(scratch, `out-${dirCount++}`);
}

/** Sweeps seeds from..from+count-1 into a fresh dir (at --cost-ms 0 unless `extra` says otherwise). */
function sweep(from: number, count: number, extra: string[] = [], env?: Record<string, string>): { dir: string; run: Run } {
  const dir = freshDir();
  const cost = extra.includes("--cost-ms") ? [] : ["--cost-ms", "0"];
  const run = planted(["--from", String(from), "--count", String(count), "--out", dir, ...cost, ...extra], { env });
  return { dir, run };
}

/** Every file under dir, as relative path -> bytes. */
function tree(dir: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  const walk = (rel: string): void => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const path = join(rel, name);
      if (statSync(join(dir, path)).isDirectory()) walk(path);
      else files.set(path, readFileSync(join(dir, path)));
    }
  };
  walk("");
  return files;
}

function failureSeeds(dir: string): number[] {
  return readdirSync(join(dir, "failures"))
    .map(Number)
    .sort((a, b) => a - b);
}

function readMeta(dir: string, seed: number): Meta {
  return JSON.parse(readFileSync(join(dir, "failures", String(seed), "meta.json"), "utf8")) as Meta;
}

function readText(dir: string, seed: number, file: string): string {
  return readFileSync(join(dir, "failures", String(seed), file), "utf8");
}

function parseVerdicts(stdout: string): Verdict[] {
  return stdout
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Verdict);
}

describe("planted sweep output", () => {
  test("the same range twice gives byte-identical output, and --jobs 3 gives the same bytes as --jobs 1", () => {
    const a = sweep(0, 5000);
    const b = sweep(0, 5000);
    const c = sweep(0, 5000, ["--jobs", "3"]);
    for (const r of [a, b, c]) assert.equal(r.run.status, 1, r.run.stderr);
    const ta = tree(a.dir);
    // The comparison only means something if both kinds of artifact are present.
    assert.ok([...ta.keys()].some((p) => p.startsWith("failures/")));
    assert.ok([...ta.keys()].some((p) => p.startsWith("quarantine/")));
    assert.deepEqual(tree(b.dir), ta);
    assert.deepEqual(tree(c.dir), ta);
  });

  test("the size changes the generated tests", () => {
    const small = sweep(0, 1000, ["--size", "small"]);
    const large = sweep(0, 1000, ["--size", "large"]);
    assert.notDeepEqual(failureSeeds(small.dir), failureSeeds(large.dir));
    const meanLines = (dir: string): number => {
      const seeds = failureSeeds(dir);
      const total = seeds.reduce((n, seed) => n + readText(dir, seed, "input.txt").split("\n").length - 1, 0);
      return total / seeds.length;
    };
    const [smallMean, largeMean] = [meanLines(small.dir), meanLines(large.dir)];
    assert.ok(smallMean < 40 && largeMean > 80, `mean program lengths ${smallMean} (small) and ${largeMean} (large)`);
  });

  test("exit code is 0 for a clean range, and a quarantined seed alone is not a find", () => {
    const clean = sweep(0, 90);
    assert.equal(clean.run.status, 0, clean.run.stderr);
    assert.deepEqual(readdirSync(join(clean.dir, "failures")), []);
    assert.deepEqual(readdirSync(join(clean.dir, "quarantine")), []);

    // Seeds 300..319 hold one quarantined seed (307) and no failure.
    const quarantined = sweep(300, 20);
    assert.equal(quarantined.run.status, 0, quarantined.run.stderr);
    assert.deepEqual(readdirSync(join(quarantined.dir, "failures")), []);
    assert.deepEqual(readdirSync(join(quarantined.dir, "quarantine")), ["307.txt", "why"]);
    // The reason starts "planted:", so reports count the slip without the "invalid test" warning.
    assert.equal(
      readFileSync(join(quarantined.dir, "quarantine", "why", "307.txt"), "utf8"),
      "planted: stack underflow, 1 test in 1,000, to show the quarantine (examples/planted/README.md)\n",
    );
    const summary = JSON.parse(readFileSync(join(quarantined.dir, "summary.json"), "utf8"));
    assert.equal(summary.finds, 0);
    assert.equal(summary.quarantine, 1);
    assert.equal(summary.ok, 19);
  });

  test("exit code is 1 when the range holds a find", () => {
    const r = sweep(90, 10);
    assert.equal(r.run.status, 1, r.run.stderr);
    assert.deepEqual(failureSeeds(r.dir), [92, 97]);
  });

  test("usage errors exit 2, name the flag on stderr and write nothing", () => {
    const cases: [string[], string][] = [
      [["--from", "1", "--count", "5"], "--out"],
      [["--from", "x", "--count", "5", "--out", "OUT"], "--from"],
      [["--from", "1", "--count", "-5", "--out", "OUT"], "--count"],
      [["--from", "1", "--count", "5", "--out", "OUT", "--size", "huge"], "--size"],
      [["--from", "1", "--count", "5", "--out", "OUT", "--jobs", "0"], "--jobs"],
      [["--from", "1", "--count", "5", "--out", "OUT", "--max-shrinks", "some"], "--max-shrinks"],
      [["--from", "1", "--count", "5", "--out", "OUT", "--cost-ms", "fast"], "--cost-ms"],
      [["--from", "1", "--count", "5", "--out", "OUT", "--bogus"], "--bogus"],
      [["--check", "--json"], "--seeds"],
      [["--check", "--seeds", "5,x"], "--seeds"],
      [["--seed", "5", "--out", "OUT"], "--out"],
    ];
    for (const [args, flag] of cases) {
      const out = freshDir();
      const r = planted(args.map((a) => (a === "OUT" ? out : a)));
      assert.equal(r.status, 2, `${args.join(" ")}: ${r.stderr}`);
      assert.ok(r.stderr.includes(flag), `${args.join(" ")}: stderr should name ${flag}: ${r.stderr}`);
      assert.equal(r.stdout, "");
      assert.ok(!existsSync(out), `${args.join(" ")} must not create the out dir`);
    }
    const badEnv = planted(["--seed", "1"], { env: { PLANTED_FIX: "bogus" } });
    assert.equal(badEnv.status, 2);
    assert.match(badEnv.stderr, /PLANTED_FIX/);
  });

  test("--max-shrinks shrinks only the lowest seeds and flags the rest unshrunk", () => {
    const { dir, run } = sweep(0, 1000, ["--max-shrinks", "3"]);
    assert.equal(run.status, 1, run.stderr);
    const seeds = failureSeeds(dir);
    assert.ok(seeds.length > 5);
    for (const [i, seed] of seeds.entries()) {
      const meta = readMeta(dir, seed);
      const input = readText(dir, seed, "input.txt");
      const min = readText(dir, seed, "input.min.txt");
      const report = readText(dir, seed, "report.txt");
      if (i < 3) {
        assert.equal(meta.shrunk, true, `seed ${seed}`);
        assert.ok(min.length < input.length, `seed ${seed} is minimized`);
        assert.match(report, /^minimized: yes/m);
      } else {
        assert.equal(meta.shrunk, false, `seed ${seed}`);
        assert.equal(min, input, `seed ${seed}: an unshrunk failure keys on its full test`);
        assert.match(report, /^minimized: NO/m);
      }
    }
    const summary = JSON.parse(readFileSync(join(dir, "summary.json"), "utf8"));
    assert.equal(summary.shrunk, 3);
    assert.equal(summary.unshrunk, seeds.length - 3);
  });

  test("cost does not change results, and --cost-ms burns at least that long per seed", () => {
    const free = sweep(0, 200);
    const started = Date.now();
    const costly = sweep(0, 200, ["--cost-ms", "5"]);
    const elapsed = Date.now() - started;
    assert.deepEqual(tree(costly.dir), tree(free.dir));
    // A lower bound only: a busy machine makes the run slower, never faster.
    assert.ok(elapsed >= 200 * 5, `200 seeds at 5 ms took ${elapsed} ms`);
  });

  test("PLANTED_COST_MS sets the default cost and --cost-ms overrides it", () => {
    const dir = freshDir();
    const started = Date.now();
    const byEnv = planted(["--from", "0", "--count", "90", "--out", dir], { env: { PLANTED_COST_MS: "5" } });
    assert.equal(byEnv.status, 0, byEnv.stderr);
    assert.ok(Date.now() - started >= 90 * 5);
    // With the env value winning this would spin for 200 s; the timeout turns that into a failure.
    const overridden = planted(["--from", "0", "--count", "2", "--out", freshDir(), "--cost-ms", "0"], {
      env: { PLANTED_COST_MS: "100000" },
      timeout: 60_000,
    });
    assert.equal(overridden.status, 0, overridden.stderr);
  });
});

describe("planted bugs over 20,000 seeds of each size", () => {
  // Measured for seeds 0..19999 at the time of writing:
  //   small: crash 402, wrong-result 28, hang-detected 2, quarantine 28
  //   large: crash 386, wrong-result 44, hang-detected 3, quarantine 23
  const COUNT = 20_000;
  const runs = new Map<string, { dir: string; run: Run }>();
  before(() => {
    for (const size of ["small", "large"]) runs.set(size, sweep(0, COUNT, ["--size", size, "--jobs", "2"]));
  });

  function findsByBucket(dir: string): Map<string, number[]> {
    const by = new Map<string, number[]>(BUCKETS.map((b) => [b, []]));
    for (const seed of failureSeeds(dir)) by.get(readMeta(dir, seed).bucket)!.push(seed);
    return by;
  }

  for (const size of ["small", "large"]) {
    test(`${size}: each bucket's rate is within a factor of 1.5 of its target`, () => {
      const { dir, run } = runs.get(size)!;
      assert.equal(run.status, 1, run.stderr);
      const by = findsByBucket(dir);
      assert.deepEqual([...by.keys()].sort(), [...BUCKETS].sort(), "no bucket outside the planted ones");
      const within = (what: string, got: number, target: number): void => {
        const expected = COUNT / target;
        assert.ok(got >= expected / 1.5 && got <= expected * 1.5, `${what}: ${got} hits, expected about ${expected}`);
      };
      within("crash", by.get("crash")!.length, 50);
      within("wrong-result", by.get("wrong-result")!.length, 500);
      within("quarantine", readdirSync(join(dir, "quarantine")).length, 1000);
      // 1 in 5,000 is too rare to measure over 20,000 seeds; this range is known to hold some.
      assert.ok(by.get("hang-detected")!.length >= 1, "hang-detected occurs in seeds 0..19999");
      const summary = JSON.parse(readFileSync(join(dir, "summary.json"), "utf8"));
      assert.equal(summary.finds, failureSeeds(dir).length);
      assert.deepEqual(summary.buckets, Object.fromEntries(BUCKETS.map((b) => [b, by.get(b)!.length])));
    });

    test(`${size}: findings shrink to a handful of distinct minimal tests per bucket`, () => {
      const { dir } = runs.get(size)!;
      const distinct = new Map<string, Set<string>>(BUCKETS.map((b) => [b, new Set()]));
      for (const seed of failureSeeds(dir)) distinct.get(readMeta(dir, seed).bucket)!.add(readText(dir, seed, "input.min.txt"));
      assert.deepEqual([...distinct.get("crash")!].sort(), [
        "push 0\ndup\ndrop\n",
        "push 0\ndup\nswap\nswap\n",
        "push 0\npush 0\nswap\nswap\n",
      ]);
      assert.deepEqual([...distinct.get("wrong-result")!].sort(), ["push 0\npush -1\nsub\n", "push 1\npush -1\nmul\n"]);
      assert.deepEqual([...distinct.get("hang-detected")!], ["push 0\npush -1\npow\n"]);
      // Dedup is meaningful: far more finds than distinct failures.
      assert.ok(findsByBucket(dir).get("crash")!.length >= 100 * distinct.get("crash")!.size);
    });

    test(`${size}: every failure dir follows the generator contract`, () => {
      const { dir } = runs.get(size)!;
      for (const seed of failureSeeds(dir)) {
        const meta = readMeta(dir, seed);
        assert.deepEqual(Object.keys(meta).sort(), ["bucket", "key_file", "msg", "repro", "seed", "shrunk", "signature"]);
        assert.equal(meta.seed, seed);
        assert.ok((BUCKETS as readonly string[]).includes(meta.bucket));
        assert.equal(meta.shrunk, true);
        assert.ok(meta.msg.length > 0 && !meta.msg.includes("\n"));
        assert.equal(meta.repro, `node ${SCRIPT} --seed ${seed} --size ${size}`, "the script by its absolute path");
        assert.equal(meta.key_file, "input.min.txt");
        assert.deepEqual(readdirSync(join(dir, "failures", String(seed))).sort(), [
          "input.min.txt",
          "input.txt",
          "meta.json",
          "report.txt",
        ]);
        const report = readText(dir, seed, "report.txt");
        for (const line of [`bucket:    ${meta.bucket}`, `seed:      ${seed}`, `message:   ${meta.msg}`, `repro:     ${meta.repro}`]) {
          assert.ok(report.includes(line), `seed ${seed} report lacks '${line}'`);
        }
        assert.match(report, /^minimized: yes/m);
      }
    });
  }

  test("the repro command replays the seed verbosely from any directory, writes nothing and exits 1 (0 for an ok seed)", () => {
    const { dir } = runs.get("small")!;
    const seed = findsByBucket(dir).get("hang-detected")![0];
    const meta = readMeta(dir, seed);
    // As a user runs it: through a shell, from a campaign directory rather than the repository.
    const elsewhere = mkdtempSync(join(scratch, "campaign-"));
    const r = spawnSync("sh", ["-c", meta.repro], { cwd: elsewhere, env: childEnv(), encoding: "utf8" });
    assert.equal(r.status, 1, r.stderr);
    assert.ok(r.stdout.includes(`verdict:   ${meta.bucket}`), r.stdout);
    assert.ok(r.stdout.includes(`message:   ${meta.msg}`), r.stdout);
    assert.ok(r.stdout.includes(readText(dir, seed, "input.txt").split("\n")[0]), "the program is listed");
    assert.ok(r.stdout.includes("minimized (3 instructions):"), r.stdout);

    const cwd = mkdtempSync(join(scratch, "replay-cwd-"));
    assert.equal(planted(meta.repro.split(" ").slice(2), { cwd }).stdout, r.stdout);
    assert.deepEqual(readdirSync(cwd), [], "a replay writes nothing");
    assert.deepEqual(readdirSync(elsewhere), []);

    const ok = planted(["--seed", "0"]);
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stdout, /^verdict: {3}ok$/m);
  });

  test("check mode re-checks exactly the listed seeds, agrees with the sweep and writes nothing", () => {
    const { dir } = runs.get("small")!;
    const failing = failureSeeds(dir).slice(0, 40);
    const hang = findsByBucket(dir).get("hang-detected")!;
    const seeds = [5, ...failing, ...hang, 307, 6];
    const cwd = mkdtempSync(join(scratch, "check-cwd-"));
    const r = planted(["--check", "--seeds", seeds.join(","), "--json", "--jobs", "3"], { cwd });
    assert.equal(r.status, 1, r.stderr);
    const verdicts = parseVerdicts(r.stdout);
    assert.deepEqual(
      verdicts.map((v) => v.seed),
      seeds,
    );
    for (const v of verdicts) {
      assert.deepEqual(Object.keys(v).sort(), ["bucket", "msg", "seed"]);
      if (v.seed === 5 || v.seed === 6) assert.equal(v.bucket, "ok");
      else if (v.seed === 307) assert.equal(v.bucket, "quarantine");
      else assert.deepEqual(v, { seed: v.seed, bucket: readMeta(dir, v.seed).bucket, msg: readMeta(dir, v.seed).msg });
    }
    assert.deepEqual(readdirSync(cwd), [], "check mode leaves no artifacts");

    const allOk = planted(["--check", "--seeds", "5,6,7", "--json"]);
    assert.equal(allOk.status, 0, allOk.stderr);
    assert.deepEqual(
      parseVerdicts(allOk.stdout).map((v) => v.bucket),
      ["ok", "ok", "ok"],
    );
  });

  for (const fixed of BUCKETS) {
    test(`PLANTED_FIX=${fixed} removes exactly that bucket in check mode`, () => {
      const { dir } = runs.get("small")!;
      const by = findsByBucket(dir);
      const seeds = [...by.get("crash")!.slice(0, 60), ...by.get("wrong-result")!, ...by.get("hang-detected")!, 0, 1];
      const before = parseVerdicts(planted(["--check", "--seeds", seeds.join(","), "--json"]).stdout);
      const r = planted(["--check", "--seeds", seeds.join(","), "--json"], { env: { PLANTED_FIX: fixed } });
      const afterFix = parseVerdicts(r.stdout);
      assert.equal(afterFix.length, seeds.length);
      for (const [i, v] of afterFix.entries()) {
        if (before[i].bucket === fixed) assert.notEqual(v.bucket, fixed, `seed ${v.seed} still fails as ${fixed}`);
        else assert.deepEqual(v, before[i], `seed ${v.seed} must not change`);
      }
      assert.ok(before.some((v) => v.bucket === fixed), "the check covers the fixed bucket");
    });
  }

  test("PLANTED_FIX takes several buckets and applies to sweeps too", () => {
    // Seeds 7000..7999 hold hang-detected seed 7429 besides crashes and a wrong result.
    const { dir, run } = sweep(7000, 1000, [], { PLANTED_FIX: "crash,wrong-result" });
    assert.equal(run.status, 1, run.stderr);
    const buckets = new Set(failureSeeds(dir).map((s) => readMeta(dir, s).bucket));
    assert.deepEqual([...buckets], ["hang-detected"]);
    const summary = JSON.parse(readFileSync(join(dir, "summary.json"), "utf8"));
    assert.deepEqual(summary.fixed, ["crash", "wrong-result"]);
  });
});

describe("planted test hooks", () => {
  test("PLANTED_EXIT makes the invocation exit with that code before doing anything", () => {
    for (const code of [7, 0]) {
      const out = freshDir();
      const r = planted(["--from", "0", "--count", "1000", "--out", out], { env: { PLANTED_EXIT: String(code) } });
      assert.equal(r.status, code);
      assert.equal(r.stdout, "");
      assert.ok(!existsSync(out), "nothing was written");
    }
  });

  for (const jobs of ["1", "2"]) {
    test(`PLANTED_HANG_SEED makes a sweep with --jobs ${jobs} hang at that seed`, async () => {
      const out = freshDir();
      const child = spawn(process.execPath, [SCRIPT, "--from", "0", "--count", "100", "--out", out, "--jobs", jobs, "--cost-ms", "0"], {
        cwd: REPO,
        env: childEnv({ PLANTED_HANG_SEED: "50" }),
        stdio: ["ignore", "pipe", "pipe"],
      });
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.on("close", (code, signal) => resolve({ code, signal })),
      );
      let stderr = "";
      child.stderr.setEncoding("utf8");
      // Wait until the hook reports it was reached, so "still running" cannot be mere slowness.
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`hang seed not reached; stderr: ${stderr}`)), 60_000);
        child.stderr.on("data", (chunk: string) => {
          stderr += chunk;
          if (stderr.includes("PLANTED_HANG_SEED=50 reached")) {
            clearTimeout(timer);
            resolve();
          }
        });
        child.on("close", () => {
          clearTimeout(timer);
          reject(new Error(`exited before hanging; stderr: ${stderr}`));
        });
      });
      await new Promise((resolve) => setTimeout(resolve, 1000));
      assert.equal(child.exitCode, null, "still running a second after reaching the hang seed");
      assert.equal(child.signalCode, null);
      child.kill("SIGKILL");
      assert.deepEqual(await exited, { code: null, signal: "SIGKILL" });
      assert.ok(!existsSync(join(out, "summary.json")), "a hung sweep never completes");
    });
  }
});
