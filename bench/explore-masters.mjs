#!/usr/bin/env node
// explore-masters: how much work several explore masters repeat, with each content owned by one
// master (--ownership rendezvous) against every master running everything (--ownership broadcast).
//
// Each configuration runs the bundled maze target (examples/maze) from its two seeds to the end of
// its frontier, with 1, 2 or 4 masters on this machine sharing one corpus directory: a root
// (--masters N --port 0) and N-1 submasters (--join) started with the same command line.
//   redundancy = observations / unique contents - 1
// where observations come from the root's --stats-json (the sum over masters, from the
// statistics exchange) and unique contents are the corpus files at the end, checked against the
// maze's closure computed in-process (examples/maze/maze-core.mjs). 0 means no content ran twice.
// Configurations are run side by side in one invocation, the order alternating between rounds.
//
// Runs against the compiled CLI: `npm run build && node bench/explore-masters.mjs [--help]`.
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { benchmarkMain, CLI, f2, f3, median, parseOptions, printTable, ROOT, startProcess } from "./common.mjs";

const MAZE_DIR = join(ROOT, "examples", "maze");
const MAZE = join(MAZE_DIR, "maze.mjs");
const TARGET_REDUNDANCY = 0;
const TOKEN = "explore-masters-bench-token-0123456789";
const OWNERSHIPS = ["rendezvous", "broadcast"];

const HELP = `usage: node bench/explore-masters.mjs [options]

  --masters LIST      master counts                                           default 1,2,4
  --depth D           MAZE_DEPTH (the frontier's size, see examples/maze)     default 7
  --jobs J            local slots per master (-j)                             default 1
  --rounds R          passes over every configuration, order alternating      default 1
  --max-idle S        every master's --max-idle                               default 1`;

function options(argv) {
  return parseOptions(
    "explore-masters",
    argv,
    {
      masters: { default: "1,2,4", number: { min: 1, max: 64, integer: true }, list: true },
      depth: { default: "7", number: { min: 1, max: 16, integer: true } },
      jobs: { default: "1", number: { min: 1, integer: true } },
      rounds: { default: "1", number: { min: 1, integer: true } },
      "max-idle": { default: "1", number: { min: 0 } },
    },
    HELP,
  );
}

/** The number of unique inputs reachable from the bundled seeds at this depth, seeds included. */
async function closureSize(depth) {
  const { closure } = await import(pathToFileURL(join(MAZE_DIR, "maze-core.mjs")).href);
  const seedDir = join(MAZE_DIR, "seeds");
  const seeds = readdirSync(seedDir).map((f) => readFileSync(join(seedDir, f)));
  return closure(seeds, { depth }).size;
}

/** One campaign: a root and masters-1 submasters, same command line; resolves once all exited. */
async function runFleet(o, dir, masters, ownership) {
  const seeds = join(dir, "seeds");
  cpSync(join(MAZE_DIR, "seeds"), seeds, { recursive: true });
  const corpus = join(dir, "corpus");
  const statsPath = join(dir, "stats.json");
  const env = { ...process.env, MAZE_DEPTH: String(o.depth), MAZE_COST_MS: "0" };
  const common = ["-j", String(o.jobs), "--max-idle", String(o.maxIdle), "-t", "20", "--ownership", ownership];
  const target = ["--", process.execPath, MAZE, "@@"];
  const load = loadavg()[0];
  const rootArgs = ["explore", "-i", seeds, "-o", corpus, "--stats-json", statsPath, ...common];
  if (masters > 1) rootArgs.push("--port", "0", "--bind", "127.0.0.1", "--masters", String(masters), "--token", TOKEN);
  const root = startProcess([process.execPath, CLI, ...rootArgs, ...target], { cwd: dir, env });
  const subs = [];
  if (masters > 1) {
    const port = Number((await root.waitFor(/listening on 127\.0\.0\.1:(\d+)/, 60_000, "the root to listen"))[1]);
    for (let i = 1; i < masters; i++) {
      // Submasters write no stats file of their own; the root collects every master's counts.
      const args = ["explore", "-i", seeds, "-o", corpus, ...common, "--join", `127.0.0.1:${port}`, "--token", TOKEN];
      subs.push(startProcess([process.execPath, CLI, ...args, ...target], { cwd: dir, env }));
    }
  }
  const ends = await Promise.all([root.done, ...subs.map((s) => s.done)]);
  const wallSeconds = (Math.max(...ends.map((e) => e.exitedAtMs)) - root.startedAtMs) / 1000;
  for (const [i, e] of ends.entries()) {
    if (e.code !== 0) throw new Error(`${i === 0 ? "root" : `submaster ${i}`} exited ${e.code ?? e.signal}:\n${(i === 0 ? root : subs[i - 1]).output()}`);
  }
  const stats = JSON.parse(readFileSync(statsPath, "utf8"));
  const corpusFiles = readdirSync(corpus).filter((n) => /^[0-9a-f]{64}$/.test(n)).length;
  const hidden = readdirSync(corpus).filter((n) => !/^[0-9a-f]{64}$/.test(n));
  return {
    masters,
    ownership,
    loadBefore: load,
    wallSeconds,
    statsElapsedSeconds: stats.elapsed_seconds,
    observations: stats.observations,
    generated: stats.generated,
    byMaster: stats.by_master,
    corpusFiles,
    leftovers: hidden,
    redundancy: stats.observations / corpusFiles - 1,
  };
}

function report(result) {
  const { runs, closure } = result;
  console.log(`\nredundancy = observations / unique contents - 1 (maze, MAZE_DEPTH=${result.depth}, closure ${closure} inputs; -j ${result.jobs} per master)`);
  printTable([
    ["masters", "ownership", "round", "wall s", "observations", "corpus files", "= closure", "redundancy", "by master", "generated"],
    ...runs.map((r) => [
      r.masters,
      r.ownership,
      r.round,
      f2(r.wallSeconds),
      r.observations,
      r.corpusFiles,
      r.corpusFiles === closure ? "yes" : "NO",
      f3(r.redundancy),
      Object.entries(r.byMaster)
        .sort(([a], [b]) => Number(a) - Number(b))
        .map(([k, v]) => `${k}=${v}`)
        .join(" "),
      r.generated,
    ]),
  ]);
  const verdict = {};
  console.log("");
  for (const m of result.masters) {
    const mine = runs.filter((r) => r.masters === m);
    const rv = mine.filter((r) => r.ownership === "rendezvous");
    const bc = mine.filter((r) => r.ownership === "broadcast");
    const worst = Math.max(...rv.map((r) => r.redundancy));
    const ok = worst <= TARGET_REDUNDANCY && rv.every((r) => r.corpusFiles === closure);
    verdict[m] = ok ? "PASS" : "MISS";
    console.log(
      `${m} master(s): rendezvous redundancy ${f3(worst)} ${verdict[m]} (target ${f3(TARGET_REDUNDANCY)}), median wall ${f2(median(rv.map((r) => r.wallSeconds)))} s; ` +
        `broadcast ${f3(Math.max(...bc.map((r) => r.redundancy)))}, median wall ${f2(median(bc.map((r) => r.wallSeconds)))} s`,
    );
  }
  return verdict;
}

const o = options(process.argv.slice(2));
benchmarkMain("explore-masters", o, async (scratch) => {
  const closure = await closureSize(o.depth);
  console.log(`maze closure at MAZE_DEPTH=${o.depth}: ${closure} unique inputs from the bundled seeds`);
  const runs = [];
  const configs = o.masters.flatMap((m) => OWNERSHIPS.map((ownership) => ({ masters: m, ownership })));
  let n = 0;
  for (let round = 1; round <= o.rounds; round++) {
    for (const c of round % 2 === 1 ? configs : [...configs].reverse()) {
      n++;
      const dir = join(scratch, `run-${n}`);
      mkdirSync(dir);
      console.log(`round ${round}, ${c.masters} master(s), ${c.ownership} ...`);
      const r = { round, ...(await runFleet(o, dir, c.masters, c.ownership)) };
      console.log(`  ${r.observations} observations, ${r.corpusFiles} corpus files, redundancy ${f3(r.redundancy)}, wall ${f2(r.wallSeconds)} s`);
      if (r.leftovers.length) console.log(`  note: left in the corpus directory: ${r.leftovers.join(", ")}`);
      runs.push(r);
      if (!o.keep) rmSync(dir, { recursive: true, force: true });
    }
  }
  const result = {
    depth: o.depth,
    jobs: o.jobs,
    masters: o.masters,
    closure,
    runs,
    target: TARGET_REDUNDANCY,
  };
  result.verdict = report(result);
  return result;
});
