#!/usr/bin/env node
// Benchmark: what background minimization costs the sweep. Two campaigns of the bundled planted
// generator run side by side in turn, the same budget, config and shrink cap: one without
// [generator] minimize, one with it. Reported: seeds swept per second of each and their ratio,
// the share of the session's wall time minimize units ran, and where the finds ended (distinct,
// pending). The ratio is the cost; nothing here is a pass/fail goal. With --rounds N the pair runs
// N times, the order swapped every round (so load that comes and goes weighs on both alike), and
// the median ratio is printed. With --workers N each campaign is `coordinate` with N workers on
// 127.0.0.1 (each -j --jobs, one slot), so minimize units run on the workers within the share of
// the fleet's slots.
//   node bench/minimize.mjs [--seconds 30] [--share 0.25] [--max-shrinks 2] [--cost-ms 1] [--jobs 2] [--rounds 1] [--workers 0]
import { spawn, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { CLI, ROOT } from "./common.mjs";

const { values: o } = parseArgs({
  options: {
    seconds: { type: "string", default: "30" },
    share: { type: "string", default: "0.25" },
    "max-shrinks": { type: "string", default: "2" },
    "cost-ms": { type: "string", default: "1" },
    jobs: { type: "string", default: "2" },
    rounds: { type: "string", default: "1" },
    workers: { type: "string", default: "0" },
  },
});

/** Runs the CLI with `args` in `dir` to its exit; resolves with its exit code and output. */
function cli(dir, args, env, onOutput = () => {}) {
  const child = spawn(process.execPath, [CLI, "--config", join(dir, "fuzzfleet.toml"), ...args], { cwd: dir, env: { ...process.env, ...env } });
  let out = "";
  const take = (d) => {
    out += d;
    onOutput(out);
  };
  child.stdout.setEncoding("utf8").on("data", take);
  child.stderr.setEncoding("utf8").on("data", take);
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, out })));
}

/** `coordinate --for` with `n` workers on 127.0.0.1; resolves with the coordinator's exit. */
async function fleet(dir, n, env) {
  let started = null;
  const listening = new Promise((resolve) => (started = resolve));
  const coordinator = cli(dir, ["coordinate", "--for", `${o.seconds}s`, "--yes"], env, (out) => {
    const m = /listening on 127\.0\.0\.1:(\d+)/.exec(out);
    if (m) started(Number(m[1]));
  });
  const port = await Promise.race([listening, coordinator.then((r) => Promise.reject(new Error(`coordinate exited ${r.code}:\n${r.out}`)))]);
  const workers = Array.from({ length: n }, () => cli(dir, ["worker", "--master", `127.0.0.1:${port}`, "-j", o.jobs], env));
  const [r] = await Promise.all([coordinator, ...workers]);
  return { status: r.code, stderr: r.out };
}

async function campaign(withMinimize) {
  const workers = Number(o.workers);
  const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-bench-minimize-"));
  cpSync(join(ROOT, "examples"), join(dir, "examples"), { recursive: true });
  const planted = "examples/planted/planted.mjs";
  writeFileSync(
    join(dir, "fuzzfleet.toml"),
    `[defaults]
jobs = ${o.jobs}
chunk_minutes = 0.1
max_shrinks = ${o["max-shrinks"]}
[generator]
command = ["node", "${planted}", "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"]
identity = ["examples/planted/*.mjs"]
${withMinimize ? `minimize = ["node", "${planted}", "--minimize", "--seeds", "{seeds}", "--out", "{out}", "--jobs", "{jobs}"]` : ""}
[minimize]
share = ${o.share}
[lanes.small]
args = ["--size", "small"]
${workers > 0 ? `[distributed]\nbind = "127.0.0.1"\nport = 0\n` : ""}`,
  );
  const started = performance.now();
  const env = { PLANTED_COST_MS: o["cost-ms"] };
  const r =
    workers > 0
      ? await fleet(dir, workers, env)
      : spawnSync(process.execPath, [CLI, "--config", join(dir, "fuzzfleet.toml"), "run", "--for", `${o.seconds}s`, "--yes"], {
          cwd: dir,
          env: { ...process.env, ...env },
          encoding: "utf8",
        });
  const wall = (performance.now() - started) / 1000;
  if (r.status !== 0 && r.status !== 1) throw new Error(`run exited ${r.status}:\n${r.stderr}`);
  const status = JSON.parse(spawnSync(process.execPath, [CLI, "--config", join(dir, "fuzzfleet.toml"), "status", "--json"], { cwd: dir, encoding: "utf8" }).stdout);
  rmSync(dir, { recursive: true, force: true });
  const seeds = status.lanes.reduce((n, l) => n + l.covered, 0);
  return { wall, seeds, rate: seeds / wall, totals: status.failure_totals, minimizeSeconds: status.minimize.unit_seconds, units: status.minimize.units };
}

const row = (name, r) =>
  `${name.padEnd(18)} ${r.seeds.toFixed(0).padStart(9)} ${r.rate.toFixed(1).padStart(10)} ${String(r.totals.distinct).padStart(9)} ${String(r.totals.pending_finds).padStart(8)} ${String(r.totals.hits).padStart(7)} ${((100 * r.minimizeSeconds) / r.wall).toFixed(1).padStart(10)}%`;
console.log(`planted, ${o.seconds}s each, ${Number(o.workers) > 0 ? `coordinate with ${o.workers} worker(s)` : "run"}, jobs ${o.jobs}, max_shrinks ${o["max-shrinks"]}, cost ${o["cost-ms"]} ms/seed, minimize share ${o.share}`);
console.log(`${"".padEnd(18)} ${"seeds".padStart(9)} ${"seeds/s".padStart(10)} ${"distinct".padStart(9)} ${"pending".padStart(8)} ${"hits".padStart(7)} ${"minimizing".padStart(11)}`);
const ratios = [];
const shares = [];
for (let round = 0; round < Number(o.rounds); round++) {
  const pair = round % 2 === 0 ? [false, true] : [true, false];
  const runs = {};
  for (const withMinimize of pair) runs[withMinimize] = await campaign(withMinimize);
  const without = runs[false];
  const withMin = runs[true];
  console.log(row(`without minimize`, without));
  console.log(row(`with minimize`, withMin));
  ratios.push(withMin.rate / without.rate);
  shares.push(withMin.minimizeSeconds / withMin.wall);
  console.log(`  round ${round + 1}: sweep rate with / without ${(withMin.rate / without.rate).toFixed(3)}   (${withMin.units} minimize unit(s))`);
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
};
console.log(`median over ${ratios.length} round(s): sweep rate with / without ${median(ratios).toFixed(3)}, minimizing ${(100 * median(shares)).toFixed(1)} % of the wall time`);
