#!/usr/bin/env node
// sweep-overhead: what `fuzzfleet run` costs on top of running the same generator chunks by hand.
//
// Each round runs the bundled planted generator twice over the very same seed ranges:
//   A. `fuzzfleet run` in a fresh campaign (one lane; nice 0 and no ionice unless asked), timed from process start
//      to exit, so CLI start-up, session open, per-chunk bookkeeping, ingest and the summary all
//      count against fuzzfleet;
//   B. a bash loop that runs the chunks fuzzfleet recorded in its store, with the same argv, the
//      same environment and one fresh output directory per chunk.
// Rounds alternate A and B (ABAB...) so that a slow drift of the machine's load hits both.
// Result: seeds/s ratio (B's wall / A's wall) and the overhead per chunk in ms, with and without
// start-up, plus a timeline of where fuzzfleet's extra time goes.
//
// Runs against the compiled CLI: `npm run build && node bench/sweep-overhead.mjs [--help]`.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { benchmarkMain, CLI, f1, f2, f3, f4, median, ms, parseOptions, printTable, spawnProbeSource, sum, timedRun, wallOfSync } from "./common.mjs";
import { budgetSeconds, calibrate, campaignToml, PLANTED, readChunks, runDirectScript } from "./planted.mjs";

const TARGET_RATIO = 0.98;
const STARTUP_SAMPLES = 5;

const HELP = `usage: node bench/sweep-overhead.mjs [options]

  --chunk-seconds S   target chunk length (chunk_minutes = S/60)            default 10
  --chunks N          chunks per fuzzfleet run                               default 6
  --jobs J            generator worker threads ({jobs})                      default 2
  --cost-ms M         PLANTED_COST_MS: ms of busy work per seed              default 10
  --rounds R          fuzzfleet/direct pairs, run ABAB                       default 2
  --nice N            the campaign's nice (the direct loop runs unniced)    default 0
  --idle-io           the campaign's idle_io = true (ionice -c3 wrapper)    default off`;

function options(argv) {
  return parseOptions(
    "sweep-overhead",
    argv,
    {
      "chunk-seconds": { default: "10", number: { min: 1 } },
      chunks: { default: "6", number: { min: 1, integer: true } },
      jobs: { default: "2", number: { min: 1, integer: true } },
      "cost-ms": { default: "10", number: { min: 0.01 } },
      rounds: { default: "2", number: { min: 1, integer: true } },
      nice: { default: "0", number: { min: 0, max: 19, integer: true } },
      "idle-io": { type: "boolean", default: false },
    },
    HELP,
  );
}

// ---------------------------------------------------------------------------------------------
// The probe: a preload in the fuzzfleet process that records, on the process's own clock
// (performance.now(), 0 = process start): when user code starts, when each generator child was
// spawned and exited, how long each fs.rmSync / fs.copyFileSync call (scratch removal, artifact
// copies) and each SQLite statement execution (COMMIT and its fsyncs included) took, and at exit
// its own CPU time (children excluded). It writes `probePath` when the process exits. This is how
// the benchmark tells fuzzfleet's work from the generator's on a shared machine. It costs about a
// millisecond; fuzzfleet is unchanged otherwise.

const PROBE_SOURCE = (probePath) => `"use strict";
const childProcess = require("node:child_process");
const fs = require("node:fs");
const { syncBuiltinESMExports } = require("node:module");
const { performance } = require("node:perf_hooks");
const preloadAtMs = performance.now();
const spawns = [];
const timed = [];
${spawnProbeSource()}
for (const name of ["rmSync", "copyFileSync"]) {
  const original = fs[name];
  fs[name] = function (...args) {
    const at = performance.now();
    try {
      return original.apply(this, args);
    } finally {
      timed.push({ fn: name, at, ms: performance.now() - at });
    }
  };
}
syncBuiltinESMExports();
// better-sqlite3 as the CLI resolves it (one module instance per process): time every statement
// execution; BEGIN/COMMIT are statements too. Loading it here moves its load time from the CLI's
// module graph to the preload; the start-up total is unchanged.
try {
  const Database = require("node:module").createRequire(${JSON.stringify(CLI)})("better-sqlite3");
  const db = new Database(":memory:");
  const proto = Object.getPrototypeOf(db.prepare("SELECT 1"));
  db.close();
  for (const name of ["run", "get", "all"]) {
    const original = proto[name];
    proto[name] = function (...args) {
      const at = performance.now();
      try {
        return original.apply(this, args);
      } finally {
        timed.push({ fn: "sql", at, ms: performance.now() - at });
      }
    };
  }
} catch {
  // No SQL timing then; everything else still works.
}
process.on("exit", () => {
  const u = process.cpuUsage();
  const exitAtMs = performance.now();
  fs.writeFileSync(${JSON.stringify(probePath)},
    JSON.stringify({ cpuSeconds: (u.user + u.system) / 1e6, preloadAtMs, exitAtMs, spawns, timed }));
});
`;

function fuzzfleetArgv(probePath, args) {
  const preload = `${probePath}.cjs`;
  writeFileSync(preload, PROBE_SOURCE(probePath));
  return [process.execPath, "--require", preload, CLI, ...args];
}

/** The probe's record as a timeline in seconds; only the generator's spawns count. */
function readProbe(probePath) {
  const p = JSON.parse(readFileSync(probePath, "utf8"));
  const gens = p.spawns.filter((s) => s.argv.includes(PLANTED));
  const base = { cpuSeconds: p.cpuSeconds, preloadAtSeconds: p.preloadAtMs / 1000, exitAtSeconds: p.exitAtMs / 1000 };
  if (gens.length === 0 || gens.some((s) => s.exitAt === null)) return { ...base, timeline: null };
  // Time spent in `fn` calls while no generator runs, after generator k exited (k = 0..n-1).
  const timedAfter = (fn, k) =>
    sum(p.timed.filter((c) => c.fn === fn && c.at >= gens[k].exitAt && (k + 1 === gens.length || c.at < gens[k + 1].at)).map((c) => c.ms)) / 1000;
  return {
    ...base,
    timeline: {
      // process start -> first generator spawn: start-up, config, identity hash, lock, store, session rows
      toFirstSpawnSeconds: gens[0].at / 1000,
      // generator exit -> next generator spawn: ingest, artifact copy, scratch removal, store writes
      gapsSeconds: gens.slice(1).map((s, i) => (s.at - gens[i].exitAt) / 1000),
      gapsRmSeconds: gens.slice(1).map((_, i) => timedAfter("rmSync", i)),
      gapsCopySeconds: gens.slice(1).map((_, i) => timedAfter("copyFileSync", i)),
      gapsSqlSeconds: gens.slice(1).map((_, i) => timedAfter("sql", i)),
      // last generator exit -> process exit: the last chunk's bookkeeping, summary, store close, lock release
      afterLastExitSeconds: (p.exitAtMs - gens[gens.length - 1].exitAt) / 1000,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Campaign set-up

/** `fuzzfleet --version` (Node start-up plus loading the CLI): wall and own CPU; and bare `node -e 0`. */
function startupCost(dir) {
  const wall = [];
  const cpu = [];
  const node = [];
  const userCodeAt = [];
  const exitAt = [];
  const probe = join(dir, "version.probe.json");
  for (let i = 0; i < STARTUP_SAMPLES; i++) {
    node.push(wallOfSync([process.execPath, "-e", "0"]));
    wall.push(wallOfSync(fuzzfleetArgv(probe, ["--version"])));
    const p = readProbe(probe);
    cpu.push(p.cpuSeconds);
    userCodeAt.push(p.preloadAtSeconds);
    exitAt.push(p.exitAtSeconds);
  }
  return {
    fuzzfleetVersionSeconds: median(wall),
    fuzzfleetVersionCpuSeconds: median(cpu),
    nodeBareSeconds: median(node),
    // On the process's clock: Node's own bootstrap until the first user code (the probe) runs,
    // then loading and running the CLI's module graph until `--version` exits.
    nodeBootstrapSeconds: median(userCodeAt),
    moduleLoadSeconds: median(exitAt.map((t, i) => t - userCodeAt[i])),
  };
}

// ---------------------------------------------------------------------------------------------
// A: fuzzfleet run

async function runFuzzfleet(o, env, dir, bootstrapSeeds) {
  const campaign = join(dir, "campaign");
  mkdirSync(campaign, { recursive: true });
  const config = join(campaign, "fuzzfleet.toml");
  writeFileSync(config, campaignToml({ title: "sweep-overhead", jobs: o.jobs, nice: o.nice, idleIo: o.idleIo, chunkSeconds: o.chunkSeconds, bootstrapSeeds }));
  const logPath = join(dir, "fuzzfleet.log");
  const probe = join(dir, "fuzzfleet.probe.json");
  const argv = fuzzfleetArgv(probe, ["--config", config, "run", "--for", `${budgetSeconds(o)}s`, "--yes"]);
  const load = loadavg()[0];
  const r = await timedRun(argv, { cwd: campaign, env, logPath });
  if (r.code !== 0 && r.code !== 1) {
    throw new Error(`fuzzfleet run exited ${r.code ?? r.signal}:\n${readFileSync(logPath, "utf8")}`);
  }
  const chunks = readChunks(join(campaign, "fuzzfleet.db"));
  const p = readProbe(probe);
  const timeline = p.timeline && { ...p.timeline, exitAtSeconds: p.exitAtSeconds };
  return { wallSeconds: r.seconds, ownCpuSeconds: p.cpuSeconds, timeline, exitCode: r.code, loadBefore: load, chunks };
}

// ---------------------------------------------------------------------------------------------
// B: the same chunks from a bash loop

async function runDirect(o, env, dir, chunks) {
  const outRoot = join(dir, "direct");
  mkdirSync(outRoot, { recursive: true });
  const load = loadavg()[0];
  const { run: r, chunkSeconds } = await runDirectScript({
    jobs: o.jobs,
    chunks,
    outRoot,
    scriptPath: join(dir, "direct.sh"),
    timesPath: join(dir, "direct.times"),
    env,
    what: "direct loop",
  });
  return { wallSeconds: r.seconds, loadBefore: load, chunkSeconds };
}

// ---------------------------------------------------------------------------------------------
// Results

/**
 * Two views of the same runs:
 * - raw: whole wall clocks, as a user sees them. On a machine shared with other work this also
 *   carries whatever load happened to land on one side's generator runs.
 * - around the generator: the time each side spends outside its generator runs (wall minus the
 *   sum of the per-chunk run times), so load noise inside the generator runs cancels. fuzzfleet
 *   is idle while its child runs (its own CPU is all start-up and between-chunk work), so this
 *   is what fuzzfleet adds.
 * `startup` is the `--version` run, per fuzzfleet process.
 */
function summarise(runs, startup) {
  const n = runs.length;
  const chunks = sum(runs.map((r) => r.ff.chunks.length));
  const seeds = sum(runs.map((r) => sum(r.ff.chunks.map((c) => c.seeds))));
  const ffWall = sum(runs.map((r) => r.ff.wallSeconds));
  const directWall = sum(runs.map((r) => r.direct.wallSeconds));
  const ffChild = sum(runs.map((r) => sum(r.ff.chunks.map((c) => c.childSeconds))));
  const directChild = sum(runs.map((r) => sum(r.direct.chunkSeconds)));
  const added = ffWall - ffChild - (directWall - directChild);
  const perChunkMs = (seconds) => (seconds * 1000) / chunks;
  const timelines = runs.map((r) => r.ff.timeline);
  const complete = timelines.every((t) => t !== null);
  const gaps = complete ? timelines.flatMap((t) => t.gapsSeconds) : [];
  const gapMean = (key) => (gaps.length ? sum(timelines.flatMap((t) => t[key])) / gaps.length : null);
  return {
    chunks,
    seeds,
    finds: sum(runs.map((r) => sum(r.ff.chunks.map((c) => c.finds)))),
    fuzzfleetWallSeconds: ffWall,
    directWallSeconds: directWall,
    fuzzfleetSeedsPerSec: seeds / ffWall,
    directSeedsPerSec: seeds / directWall,
    ratio: directWall / ffWall,
    overheadMsPerChunk: perChunkMs(ffWall - directWall),
    overheadMsPerChunkExclStartup: perChunkMs(ffWall - directWall - n * startup.fuzzfleetVersionSeconds),
    fuzzfleetOutsideGeneratorSeconds: ffWall - ffChild,
    directOutsideGeneratorSeconds: directWall - directChild,
    addedSeconds: added,
    aroundRatio: directWall / (directWall + added),
    aroundOverheadMsPerChunk: perChunkMs(added),
    aroundOverheadMsPerChunkExclStartup: perChunkMs(added - n * startup.fuzzfleetVersionSeconds),
    generatorSlowerMsPerChunk: perChunkMs(ffChild - directChild),
    ownCpuSeconds: sum(runs.map((r) => r.ff.ownCpuSeconds)),
    // Means per fuzzfleet run (first spawn, after last exit) or per gap between two chunks.
    timeline: complete
      ? {
          toFirstSpawnSeconds: sum(timelines.map((t) => t.toFirstSpawnSeconds)) / n,
          gapMeanSeconds: gapMean("gapsSeconds"),
          gapMedianSeconds: gaps.length ? median(gaps) : null,
          gapRmMeanSeconds: gapMean("gapsRmSeconds"),
          gapCopyMeanSeconds: gapMean("gapsCopySeconds"),
          gapSqlMeanSeconds: gapMean("gapsSqlSeconds"),
          afterLastExitSeconds: sum(timelines.map((t) => t.afterLastExitSeconds)) / n,
          // Process creation before Node's clock starts and teardown after the 'exit' event.
          outsideNodeClockSeconds: sum(runs.map((r) => r.ff.wallSeconds - r.ff.timeline.exitAtSeconds)) / n,
        }
      : null,
  };
}

function roundResult(index, ff, direct, startup) {
  return {
    round: index + 1,
    chunkSeeds: ff.chunks.map((c) => c.seeds),
    chunkFinds: ff.chunks.map((c) => c.finds),
    fuzzfleet: {
      wallSeconds: ff.wallSeconds,
      ownCpuSeconds: ff.ownCpuSeconds,
      chunkSeconds: ff.chunks.map((c) => c.childSeconds),
      timeline: ff.timeline,
      loadBefore: ff.loadBefore,
      exitCode: ff.exitCode,
    },
    direct: { wallSeconds: direct.wallSeconds, chunkSeconds: direct.chunkSeconds, loadBefore: direct.loadBefore },
    ...summarise([{ ff, direct }], startup),
  };
}

function report(result) {
  const { options: o, startup, calibration, rounds, total } = result;
  const rows = [...rounds.map((r) => [`round ${r.round}`, r]), ["all rounds", total]];
  console.log("\nraw: whole wall clocks");
  printTable([
    ["run", "chunks", "seeds", "fuzzfleet s", "direct s", "ff seeds/s", "direct seeds/s", "ratio", "overhead ms/chunk", "excl. start-up"],
    ...rows.map(([label, r]) => [
      label,
      r.chunks,
      r.seeds,
      f2(r.fuzzfleetWallSeconds),
      f2(r.directWallSeconds),
      f1(r.fuzzfleetSeedsPerSec),
      f1(r.directSeedsPerSec),
      f4(r.ratio),
      f1(r.overheadMsPerChunk),
      f1(r.overheadMsPerChunkExclStartup),
    ]),
  ]);
  console.log("\naround the generator: wall minus the generator runs (load noise inside them cancels)");
  printTable([
    ["run", "ff outside s", "direct outside s", "added s", "ratio", "overhead ms/chunk", "excl. start-up", "generator slower under ff, ms/chunk"],
    ...rows.map(([label, r]) => [
      label,
      f3(r.fuzzfleetOutsideGeneratorSeconds),
      f3(r.directOutsideGeneratorSeconds),
      f3(r.addedSeconds),
      f4(r.aroundRatio),
      f1(r.aroundOverheadMsPerChunk),
      f1(r.aroundOverheadMsPerChunkExclStartup),
      f1(r.generatorSlowerMsPerChunk),
    ]),
  ]);
  console.log("\nwhere fuzzfleet's time outside the generator goes (mean per run unless noted):");
  console.log(
    `  start-up alone, \`fuzzfleet --version\`        ${ms(startup.fuzzfleetVersionSeconds)} wall, ${ms(startup.fuzzfleetVersionCpuSeconds)} CPU` +
      ` (bare \`node -e 0\`: ${ms(startup.nodeBareSeconds)})`,
  );
  console.log(`    Node bootstrap to first user code        ${ms(startup.nodeBootstrapSeconds)}`);
  console.log(`    loading the CLI's modules                ${ms(startup.moduleLoadSeconds)}`);
  const t = total.timeline;
  if (t) {
    console.log(`  process start -> first generator spawn     ${ms(t.toFirstSpawnSeconds)} (start-up + config, identity hash, lock, store, session)`);
    console.log(`  between two chunks                         ${ms(t.gapMeanSeconds ?? 0)} mean, ${ms(t.gapMedianSeconds ?? 0)} median per gap (ingest, store writes, spawn), of which`);
    console.log(`    removing the chunk's scratch dir         ${ms(t.gapRmMeanSeconds ?? 0)} mean (rmSync)`);
    console.log(`    copying new failures' artifacts          ${ms(t.gapCopyMeanSeconds ?? 0)} mean (copyFileSync)`);
    console.log(`    SQLite statements, commits and fsyncs    ${ms(t.gapSqlMeanSeconds ?? 0)} mean`);
    const rest = (t.gapMeanSeconds ?? 0) - (t.gapRmMeanSeconds ?? 0) - (t.gapCopyMeanSeconds ?? 0) - (t.gapSqlMeanSeconds ?? 0);
    console.log(`    the rest (reading/validating/hashing the results, spawn, logging) ${ms(rest)} mean`);
    console.log(`  last generator exit -> process exit        ${ms(t.afterLastExitSeconds)} (last chunk's bookkeeping + summary + close)`);
    console.log(`  outside Node's clock (exec, teardown)      ${ms(t.outsideNodeClockSeconds)}`);
  } else {
    console.log("  (no spawn timeline: the probe did not see the generator's spawns)");
  }
  console.log(`  fuzzfleet's own CPU                        ${ms(total.ownCpuSeconds / rounds.length)} per run, of which start-up ~${ms(startup.fuzzfleetVersionCpuSeconds)}`);
  console.log(`\ncalibration: ${f1(calibration.seedsPerSec)} seeds/s -> bootstrap_seeds ${calibration.bootstrapSeeds}; ${total.finds} finds in ${total.seeds} seeds`);
  console.log(`chunk seconds under fuzzfleet: ${rounds.map((r) => r.fuzzfleet.chunkSeconds.map(f2).join(" ")).join(" | ")}`);
  console.log(`chunk seconds from bash:       ${rounds.map((r) => r.direct.chunkSeconds.map(f2).join(" ")).join(" | ")}`);
  console.log(
    `settings: --chunk-seconds ${o.chunkSeconds} --chunks ${o.chunks} --jobs ${o.jobs} --cost-ms ${o.costMs} --rounds ${o.rounds}` +
      ` --nice ${o.nice}${o.idleIo ? " --idle-io" : ""}`,
  );
  const raw = total.ratio >= TARGET_RATIO ? "PASS" : "MISS";
  const around = total.aroundRatio >= TARGET_RATIO ? "PASS" : "MISS";
  console.log(`verdict (target ${TARGET_RATIO}): raw ratio ${f4(total.ratio)} ${raw}; around the generator ${f4(total.aroundRatio)} ${around}`);
  return { raw, aroundGenerator: around };
}

// ---------------------------------------------------------------------------------------------

const o = options(process.argv.slice(2));
benchmarkMain("sweep-overhead", o, async (scratch) => {
  const env = { ...process.env, PLANTED_COST_MS: String(o.costMs) };
  const runs = [];
  const rounds = [];
  const calibration = await calibrate(o, env, scratch);
  const { bootstrapSeeds } = calibration;
  console.log(`calibration: ${calibration.count} seeds in ${f2(calibration.seconds)} s = ${f1(calibration.seedsPerSec)} seeds/s -> bootstrap_seeds ${bootstrapSeeds}`);

  const startup = startupCost(scratch);
  console.log(
    `start-up: fuzzfleet --version ${ms(startup.fuzzfleetVersionSeconds)} (${ms(startup.fuzzfleetVersionCpuSeconds)} CPU), ` +
      `node -e 0 ${ms(startup.nodeBareSeconds)} (medians of ${STARTUP_SAMPLES})`,
  );

  for (let i = 0; i < o.rounds; i++) {
    const dir = join(scratch, `round-${i + 1}`);
    mkdirSync(dir);
    console.log(`round ${i + 1}/${o.rounds}: fuzzfleet run --for ${budgetSeconds(o)}s ...`);
    const ff = await runFuzzfleet(o, env, dir, bootstrapSeeds);
    console.log(`  fuzzfleet: ${ff.chunks.length} chunks, ${sum(ff.chunks.map((c) => c.seeds))} seeds in ${f2(ff.wallSeconds)} s; direct loop ...`);
    const direct = await runDirect(o, env, dir, ff.chunks);
    console.log(`  direct:    ${f2(direct.wallSeconds)} s`);
    runs.push({ ff, direct });
    rounds.push(roundResult(i, ff, direct, startup));
    if (!o.keep) rmSync(dir, { recursive: true, force: true });
  }

  const result = {
    options: { chunkSeconds: o.chunkSeconds, chunks: o.chunks, jobs: o.jobs, costMs: o.costMs, rounds: o.rounds, nice: o.nice, idleIo: o.idleIo },
    calibration,
    startup,
    rounds,
    total: summarise(runs, startup),
    target: TARGET_RATIO,
  };
  result.verdict = report(result);
  return result;
});
