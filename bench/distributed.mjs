#!/usr/bin/env node
// distributed: what a distributed sweep costs, in two parts reported separately.
//
// (a) efficiency. A `fuzzfleet coordinate` and two real `fuzzfleet worker -j 1` on 127.0.0.1 sweep
//     the bundled planted generator in ~10 s chunks. Then the very chunks each worker ran are run
//     again by two bash loops at the same time, one per worker, with the same argv and
//     environment: that pair is the "single-host" rate of each worker's configuration on this
//     machine. efficiency = distributed seeds/s / (rate1 + rate2). Rounds alternate the two.
// (b) capacity. Many fake workers in this process speak the real wire through dist/ modules
//     (dial, hello/challenge/prove/welcome, then want -> assign -> done at once, the exact
//     stop_ack at the end) against a real `fuzzfleet coordinate`. The generator never runs; the
//     coordinator ingests empty scratch directories. Sustained completions/s and the done -> ack
//     latency over a fixed window, at several worker counts.
//
// Runs against the compiled CLI: `npm run build && node bench/distributed.mjs [--help]`.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import {
  benchmarkMain,
  CLI,
  epochMs,
  f0,
  f1,
  f2,
  f4,
  int,
  median,
  ms,
  parseOptions,
  percentile,
  printCpuProfile,
  printTable,
  peakRssMb,
  processCpuSeconds,
  sleep,
  startProcess,
  sum,
  timedCallsSource,
} from "./common.mjs";
import { budgetSeconds, calibrate, readChunks, runDirectScript } from "./planted.mjs";
import { fakeSweepWorker, loadSweepWire, newCampaign, startLoggedCoordinator, waitForLog } from "./sweep-fakes.mjs";

const TARGET_EFFICIENCY = 0.97;
const TARGET_COMPLETIONS = 2000;
const TARGET_ACK_P99_MS = 20;
const TARGET_RSS_MB = 100;
const TOKEN = "distributed-bench-token-0123456789abcdef";
/** Fake workers report each chunk as if it ran at this many seeds/s, so chunk sizes stay put. */
const FAKE_SEEDS_PER_SEC = 1000;
/** How often a drained fake worker polls for its stop (a real worker polls about once a second). */
const FAKE_IDLE_POLL_MS = 250;

const HELP = `usage: node bench/distributed.mjs [options]

  --part P            efficiency, capacity or both                            default both

 (a) efficiency: coordinator + 2 loopback workers vs the same chunks from 2 concurrent bash loops
  --chunk-seconds S   target chunk length                                     default 10
  --chunks N          chunks per worker per session                           default 6
  --jobs J            each worker's -j                                        default 1
  --cost-ms M         PLANTED_COST_MS: ms of busy work per seed               default 10
  --rounds R          distributed/direct pairs, run ABAB                      default 2
  --isolated          also run each worker's chunks alone (the other core idle), for context

 (b) capacity: fake workers against a real coordinator
  --fake-workers LIST worker counts                                           default 8,32,64
  --warmup S          seconds before the window                               default 5
  --window S          measured seconds                                        default 20
  --capacity-rounds R passes over LIST, alternating ascending and descending  default 1
  --skip-scratch      fake workers create no scratch directory (the coordinator then ingests a missing one)
  --cpu-prof DIR      profile the coordinator (node --cpu-prof) into DIR and print where its time went
  --node-flags FLAGS  node options for the coordinator only, e.g. "--max-semi-space-size=2"`;

function options(argv) {
  return parseOptions(
    "distributed",
    argv,
    {
      part: { default: "both", choices: ["efficiency", "capacity", "both"] },
      "chunk-seconds": { default: "10", number: { min: 1 } },
      chunks: { default: "6", number: { min: 1, integer: true } },
      jobs: { default: "1", number: { min: 1, integer: true } },
      "cost-ms": { default: "10", number: { min: 0.01 } },
      rounds: { default: "2", number: { min: 1, integer: true } },
      isolated: { type: "boolean", default: false },
      "fake-workers": { default: "8,32,64", number: { min: 1, max: 4096, integer: true }, list: true },
      warmup: { default: "5", number: { min: 0 } },
      window: { default: "20", number: { min: 1 } },
      "capacity-rounds": { default: "1", number: { min: 1, integer: true } },
      "cpu-prof": { path: true },
      "skip-scratch": { type: "boolean", default: false },
      "node-flags": { default: "" },
    },
    HELP,
  );
}

// ---------------------------------------------------------------------------------------------
// (a) efficiency: the distributed session

async function runDistributed(o, env, dir, bootstrapSeeds) {
  const c = newCampaign(dir, { title: "distributed", jobs: o.jobs, chunkSeconds: o.chunkSeconds, bootstrapSeeds });
  const base = [process.execPath, CLI, "--config", c.config];
  const load = loadavg()[0];
  const coord = startProcess([...base, "coordinate", "--for", `${budgetSeconds(o)}s`, "--yes", "--token", TOKEN], { cwd: c.campaign, env });
  const port = Number((await coord.waitFor(/listening on 127\.0\.0\.1:(\d+)/, 60_000, "the coordinator to listen"))[1]);
  const workers = [0, 1].map(() =>
    startProcess([...base, "worker", "--master", `127.0.0.1:${port}`, "-j", String(o.jobs), "--token", TOKEN], { cwd: c.campaign, env }),
  );
  const ends = await Promise.all([coord.done, ...workers.map((w) => w.done)]);
  const [coordEnd, ...workerEnds] = ends;
  if (coordEnd.code !== 0 && coordEnd.code !== 1) throw new Error(`coordinate exited ${coordEnd.code ?? coordEnd.signal}:\n${coord.output()}`);
  for (const [i, e] of workerEnds.entries()) {
    if (e.code !== 0) throw new Error(`worker ${i + 1} exited ${e.code ?? e.signal}:\n${workers[i].output()}`);
  }
  if (!/all 2 worker\(s\) acknowledged the stop/.test(coord.output())) throw new Error(`the coordinator did not report two exact stop ACKs:\n${coord.output()}`);
  const chunks = readChunks(c.db);
  const out = workers.map((w, i) => {
    const id = Number(/attached to \S+ as #(\d+)/.exec(w.output())?.[1]);
    const mine = chunks.filter((ch) => ch.workerId === id);
    // One line per chunk, written once its report was acknowledged: "chunk N: … — complete (rc 0) in 1.2s (recorded)".
    const finished = w.lines.filter((l) => /^\s+chunk \d+: .* — complete .*\(recorded\)$/.test(l.line));
    if (finished.length !== mine.length) throw new Error(`worker ${i + 1} logged ${finished.length} recorded chunks, the store has ${mine.length}`);
    const attached = w.lines.find((l) => /attached to/.test(l.line));
    const lineAt = (re) => w.lines.find((l) => re.test(l.line))?.at ?? null;
    // Per chunk: when the coordinator assigned it (the store's started_at; same host, same wall
    // clock as the bench's) and the worker's line for it (just after the coordinator's ack of the done).
    let previousReport = null;
    const timeline = mine.map((ch) => {
      const startedAt = ch.startedAtMs;
      const reportedAt = lineAt(new RegExp(`^\\s+chunk ${ch.id}: .* — complete `));
      const t = {
        chunkId: ch.id,
        startedSeconds: (startedAt - w.startedAtMs) / 1000,
        // the previous chunk's ack -> want -> assign
        beforeStartMs: previousReport === null ? null : startedAt - previousReport,
        // assign -> spawn, and generator exit -> done -> coordinator's ingest and commit -> ack
        afterExitMs: reportedAt - startedAt - ch.childSeconds * 1000,
      };
      previousReport = reportedAt;
      return t;
    });
    return {
      workerId: id,
      chunks: mine,
      seeds: sum(mine.map((ch) => ch.seeds)),
      childSeconds: sum(mine.map((ch) => ch.childSeconds)),
      // From the worker's process start (its own start-up counts) to the ack of its last chunk.
      spanSeconds: (finished.at(-1).at - w.startedAtMs) / 1000,
      timeline,
      attachSeconds: (attached.at - w.startedAtMs) / 1000,
      // Process start -> first chunk assigned: Node, the CLI, dial, handshake, first want.
      firstChunkSeconds: (Math.min(...mine.map((ch) => ch.startedAtMs)) - w.startedAtMs) / 1000,
      exitSeconds: (workerEnds[i].exitedAtMs - w.startedAtMs) / 1000,
    };
  });
  const sessionEnd = Math.max(...ends.map((e) => e.exitedAtMs));
  return { loadBefore: load, port, sessionSeconds: (sessionEnd - coord.startedAtMs) / 1000, coordinatorExit: coordEnd.code, workers: out };
}

// ---------------------------------------------------------------------------------------------
// (a) efficiency: the same chunks from bash loops

async function runLoop(o, env, dir, name, chunks) {
  const outRoot = join(dir, name);
  mkdirSync(outRoot, { recursive: true });
  const { run: r, chunkSeconds } = await runDirectScript({
    jobs: o.jobs,
    chunks,
    outRoot,
    scriptPath: join(dir, `${name}.sh`),
    timesPath: join(dir, `${name}.times`),
    env,
    what: `direct loop ${name}`,
  });
  rmSync(outRoot, { recursive: true, force: true });
  return { wallSeconds: r.seconds, startedAtMs: r.startedAtMs, chunkSeconds };
}

/** Both workers' chunks at the same time, one loop each: two -j J "hosts" sharing this machine. */
async function runDirectPair(o, env, dir, dist) {
  const load = loadavg()[0];
  const t0 = epochMs();
  const loops = await Promise.all(dist.workers.map((w, i) => runLoop(o, env, dir, `direct-${i + 1}`, w.chunks)));
  return { loadBefore: load, pairSeconds: (epochMs() - t0) / 1000, loops };
}

async function runIsolated(o, env, dir, dist) {
  const loops = [];
  for (const [i, w] of dist.workers.entries()) loops.push(await runLoop(o, env, dir, `alone-${i + 1}`, w.chunks));
  return { loops };
}

// ---------------------------------------------------------------------------------------------
// (a) efficiency: results

const STALL_MS = 1000;

/** Time beyond the median done -> ack delay spent by this worker's stalled chunks. */
function stallSeconds(w) {
  const typical = median(w.timeline.map((t) => t.afterExitMs));
  return sum(w.timeline.filter((t) => t.afterExitMs > STALL_MS).map((t) => t.afterExitMs - typical)) / 1000;
}

/**
 * Three views of one or more rounds:
 * - per worker: each worker's seeds / its span (process start -> ack of its last chunk), summed
 *   over workers, against each loop's seeds / its wall, summed. This is the efficiency verdict.
 * - around the generator: the time each side spends outside its generator runs (load noise inside
 *   those runs cancels); the distributed side's per-worker extra, added to the direct wall.
 * - whole session: all seeds / (coordinator start -> last process exit) against all seeds / the
 *   pair's wall. Carries the coordinator's start-up and the drain tail, a fixed cost per session.
 */
function summarise(rounds) {
  const pairs = rounds.flatMap((r) => r.dist.workers.map((w, i) => ({ w, d: r.direct.loops[i], iso: r.isolated?.loops[i] ?? null })));
  const seeds = sum(pairs.map((p) => p.w.seeds));
  const distRate = sum(pairs.map((p) => p.w.seeds / p.w.spanSeconds)) / rounds.length;
  const directRate = sum(pairs.map((p) => p.w.seeds / p.d.wallSeconds)) / rounds.length;
  const added = pairs.map((p) => p.w.spanSeconds - p.w.childSeconds - (p.d.wallSeconds - sum(p.d.chunkSeconds)));
  const aroundRate = sum(pairs.map((p, i) => p.w.seeds / (p.d.wallSeconds + added[i]))) / rounds.length;
  const chunks = sum(pairs.map((p) => p.w.chunks.length));
  const sessionSeconds = sum(rounds.map((r) => r.dist.sessionSeconds));
  const pairSeconds = sum(rounds.map((r) => r.direct.pairSeconds));
  const isolatedRate = pairs.every((p) => p.iso) ? sum(pairs.map((p) => p.w.seeds / p.iso.wallSeconds)) / rounds.length : null;
  return {
    chunks,
    seeds,
    distributedSeedsPerSec: distRate,
    directSeedsPerSec: directRate,
    efficiency: distRate / directRate,
    aroundEfficiency: aroundRate / directRate,
    addedMsPerChunk: (sum(added) * 1000) / chunks,
    workerStartupSeconds: median(pairs.map((p) => p.w.firstChunkSeconds)),
    // Per chunk, what the worker's slot spends outside the generator once it runs: spawn, the
    // done -> ack round trip (the coordinator's ingest and group commit), want -> assign.
    betweenChunksMs: (sum(pairs.map((p) => p.w.spanSeconds - p.w.firstChunkSeconds - p.w.childSeconds)) * 1000) / chunks,
    directBetweenChunksMs: (sum(pairs.map((p) => p.d.wallSeconds - sum(p.d.chunkSeconds))) * 1000) / chunks,
    generatorSlowerMsPerChunk: ((sum(pairs.map((p) => p.w.childSeconds)) - sum(pairs.map((p) => sum(p.d.chunkSeconds)))) * 1000) / chunks,
    sessionSeconds,
    pairSeconds,
    sessionEfficiency: seeds / sessionSeconds / (seeds / pairSeconds),
    // Chunks whose done left the worker more than a second after the generator exited (the
    // median is about 20 ms), and what the session would have made without that wait.
    stalls: sum(pairs.map((p) => p.w.timeline.filter((t) => t.afterExitMs > STALL_MS).length)),
    stallSeconds: sum(pairs.map((p) => stallSeconds(p.w))),
    efficiencyWithoutStalls: sum(pairs.map((p) => p.w.seeds / (p.w.spanSeconds - stallSeconds(p.w)))) / rounds.length / directRate,
    isolatedSeedsPerSec: isolatedRate,
    efficiencyVsIsolated: isolatedRate ? distRate / isolatedRate : null,
  };
}

function reportEfficiency(result) {
  const { rounds, total, options: o } = result;
  const rows = [...rounds.map((r) => [`round ${r.round}`, r.summary]), ["all rounds", total]];
  console.log("\n(a) efficiency: coordinator + 2 workers vs the same chunks from 2 concurrent bash loops");
  printTable([
    ["run", "chunks", "seeds", "distributed seeds/s", "direct pair seeds/s", "efficiency", "around the generator", "added ms/chunk", "session s", "pair s", "whole session"],
    ...rows.map(([label, s]) => [
      label,
      s.chunks,
      int(s.seeds),
      f1(s.distributedSeedsPerSec),
      f1(s.directSeedsPerSec),
      f4(s.efficiency),
      f4(s.aroundEfficiency),
      f1(s.addedMsPerChunk),
      f2(s.sessionSeconds),
      f2(s.pairSeconds),
      f4(s.sessionEfficiency),
    ]),
  ]);
  console.log("\nper worker (span = worker process start -> ack of its last chunk):");
  printTable([
    ["round", "worker", "chunks", "seeds", "span s", "generator s", "direct wall s", "direct generator s", "attached s", "first chunk s", ...(rounds[0].isolated ? ["alone wall s"] : [])],
    ...rounds.flatMap((r) =>
      r.dist.workers.map((w, i) => [
        r.round,
        `#${w.workerId}`,
        w.chunks.length,
        int(w.seeds),
        f2(w.spanSeconds),
        f2(w.childSeconds),
        f2(r.direct.loops[i].wallSeconds),
        f2(sum(r.direct.loops[i].chunkSeconds)),
        f2(w.attachSeconds),
        f2(w.firstChunkSeconds),
        ...(r.isolated ? [f2(r.isolated.loops[i].wallSeconds)] : []),
      ]),
    ),
  ]);
  const slow = rounds.flatMap((r) => r.dist.workers.flatMap((w) => w.timeline.filter((t) => t.afterExitMs > STALL_MS || (t.beforeStartMs ?? 0) > STALL_MS).map((t) => ({ r, w, t }))));
  for (const { r, w, t } of slow) {
    console.log(
      `  round ${r.round}, worker #${w.workerId}, chunk ${t.chunkId}: ${f0(t.afterExitMs)} ms from generator exit to the ack of its done, ` +
        `${t.beforeStartMs === null ? "-" : f0(t.beforeStartMs)} ms from the previous ack to its start`,
    );
  }
  const all = rounds.flatMap((r) => r.dist.workers.flatMap((w) => w.timeline));
  console.log(
    `per chunk, median: assigned -> ack, less the generator run ${f1(median(all.map((t) => t.afterExitMs)))} ms; previous ack -> next chunk assigned (negative: assigned while the previous ran) ` +
      `${f1(median(all.filter((t) => t.beforeStartMs !== null).map((t) => t.beforeStartMs)))} ms`,
  );
  if (total.stalls > 0) {
    console.log(
      `${total.stalls} stalled chunk(s), ${f2(total.stallSeconds)} s in all; without those waits the efficiency would be ${f4(total.efficiencyWithoutStalls)}`,
    );
  }
  if (total.isolatedSeedsPerSec) {
    console.log(`each worker's chunks alone (other core idle): ${f1(total.isolatedSeedsPerSec)} seeds/s summed -> efficiency vs that ${f4(total.efficiencyVsIsolated)}`);
  }
  console.log(
    `worker start-up (process start -> first chunk assigned): ${ms(total.workerStartupSeconds)} median; ` +
      `per chunk outside the generator: worker ${f1(total.betweenChunksMs)} ms, bash loop ${f1(total.directBetweenChunksMs)} ms`,
  );
  console.log(`generator slower under the worker than in bash: ${f1(total.generatorSlowerMsPerChunk)} ms/chunk (load noise when it changes sign)`);
  console.log(`settings: --chunk-seconds ${o.chunkSeconds} --chunks ${o.chunks} --jobs ${o.jobs} --cost-ms ${o.costMs} --rounds ${o.rounds}; --for ${budgetSeconds(o)}s`);
  const v = total.efficiency >= TARGET_EFFICIENCY ? "PASS" : "MISS";
  const va = total.aroundEfficiency >= TARGET_EFFICIENCY ? "PASS" : "MISS";
  console.log(`verdict (target ${TARGET_EFFICIENCY}): efficiency ${f4(total.efficiency)} ${v}; around the generator ${f4(total.aroundEfficiency)} ${va}`);
  return { efficiency: v, aroundGenerator: va };
}

async function efficiencyPart(o, scratch) {
  const env = { ...process.env, PLANTED_COST_MS: String(o.costMs) };
  const cal = await calibrate(o, env, scratch);
  const { bootstrapSeeds } = cal;
  console.log(`calibration: ${cal.count} seeds in ${f2(cal.seconds)} s = ${f1(cal.seedsPerSec)} seeds/s at -j ${o.jobs} -> bootstrap_seeds ${bootstrapSeeds}`);
  const rounds = [];
  for (let i = 0; i < o.rounds; i++) {
    const dir = join(scratch, `efficiency-${i + 1}`);
    mkdirSync(dir);
    console.log(`round ${i + 1}/${o.rounds}: coordinate --for ${budgetSeconds(o)}s + 2 workers -j ${o.jobs} ...`);
    const dist = await runDistributed(o, env, dir, bootstrapSeeds);
    console.log(
      `  distributed: ${dist.workers.map((w) => `#${w.workerId} ${w.chunks.length} chunks ${w.seeds} seeds in ${f2(w.spanSeconds)} s`).join("; ")}; session ${f2(dist.sessionSeconds)} s`,
    );
    const direct = await runDirectPair(o, env, dir, dist);
    console.log(`  direct pair: ${direct.loops.map((l) => `${f2(l.wallSeconds)} s`).join(", ")}`);
    let isolated = null;
    if (o.isolated) {
      isolated = await runIsolated(o, env, dir, dist);
      console.log(`  alone:       ${isolated.loops.map((l) => `${f2(l.wallSeconds)} s`).join(", ")}`);
    }
    const round = { round: i + 1, dist, direct, isolated };
    round.summary = summarise([round]);
    rounds.push(round);
    if (!o.keep) rmSync(dir, { recursive: true, force: true });
  }
  const result = { calibration: { ...cal, bootstrapSeeds }, rounds, total: summarise(rounds), target: TARGET_EFFICIENCY, options: o };
  result.verdict = reportEfficiency(result);
  return result;
}

// ---------------------------------------------------------------------------------------------
// (b) capacity: fake workers

/**
 * A preload in the coordinator. It keeps running totals (count and milliseconds on the event
 * loop) of what the coordinator's loop does, and samples them with event-loop utilisation and
 * CPU every 0.5 s; the bench takes the window's differences. Written at exit. Measured:
 * - group commits: top-level better-sqlite3 transactions (WriteBatch.flush); "commit" is their
 *   time outside the handlers, i.e. BEGIN and COMMIT with its fsyncs; "handlers" the nested
 *   per-handler transactions (savepoints) with everything the handlers do inside them;
 * - SQL statements (run/get/all), and inside the handlers the synchronous file-system calls
 *   lstatSync, rmSync, readdirSync, and the console lines (writeSync to the log file).
 * fuzzfleet's code is not changed; the wrappers cost about a microsecond per call.
 */
const PROBE_SOURCE = (probePath) => `"use strict";
const fs = require("node:fs");
const { syncBuiltinESMExports } = require("node:module");
const { performance } = require("node:perf_hooks");
const epoch = () => performance.timeOrigin + performance.now();
${timedCallsSource("totals")}
for (const name of ["lstatSync", "rmSync", "readdirSync", "writeSync"]) fs[name] = timed(name, fs[name]);
syncBuiltinESMExports();
let depth = 0;
let handlerMs = 0;
try {
  const Database = require("node:module").createRequire(${JSON.stringify(CLI)})("better-sqlite3");
  const db = new Database(":memory:");
  const proto = Object.getPrototypeOf(db.prepare("SELECT 1"));
  db.close();
  for (const name of ["run", "get", "all"]) proto[name] = timed("sql", proto[name]);
  const original = Database.prototype.transaction;
  Database.prototype.transaction = function (fn) {
    const tx = original.call(this, fn);
    const wrapped = function (...args) {
      const level = depth;
      const at = performance.now();
      depth++;
      try {
        return tx.apply(this, args);
      } finally {
        depth--;
        const spent = performance.now() - at;
        if (level === 1) {
          add("handler", spent);
          handlerMs += spent;
        } else if (level === 0) {
          add("transaction", spent);
          add("commit", spent - handlerMs);
          handlerMs = 0;
        }
      }
    };
    // .deferred/.immediate/.exclusive stay the originals (used by migrations, not by the batch).
    for (const name of ["default", "deferred", "immediate", "exclusive"]) {
      if (name in tx) Object.defineProperty(wrapped, name, { value: tx[name] });
    }
    return wrapped;
  };
} catch {
  // No SQLite figures then.
}
const samples = [];
const sample = () => {
  const next = performance.eventLoopUtilization();
  const u = process.cpuUsage();
  samples.push({ at: epoch(), elu: next, cpuSeconds: (u.user + u.system) / 1e6, totals: JSON.parse(JSON.stringify(totals)) });
};
const timer = setInterval(sample, 500);
timer.unref();
process.on("exit", () => {
  sample();
  fs.writeFileSync(${JSON.stringify(probePath)}, JSON.stringify({ samples }));
});
`;

function probeSeries(probe, zeroEpoch) {
  const out = [];
  for (let i = 2; i < probe.samples.length; i += 2) {
    const a = probe.samples[i - 2];
    const b = probe.samples[i];
    const seconds = (b.at - a.at) / 1000;
    const h = (x) => x.totals.handler?.[0] ?? 0;
    const l = (x) => x.totals.lstatSync ?? [0, 0];
    const dl = [l(b)[0] - l(a)[0], l(b)[1] - l(a)[1]];
    out.push({ t: Math.round((b.at - zeroEpoch) / 100) / 10, completionsPerSec: Math.round((h(b) - h(a)) / 2 / seconds), lstatUs: dl[0] ? Math.round((dl[1] / dl[0]) * 1000) : null });
  }
  return out;
}

/** The probe's figures between the first sample in the window and the last one. */
function probeWindow(probe, fromEpoch, toEpoch) {
  const inside = probe.samples.filter((x) => x.at >= fromEpoch && x.at <= toEpoch);
  if (inside.length < 2) return null;
  const a = inside[0];
  const b = inside.at(-1);
  const seconds = (b.at - a.at) / 1000;
  const delta = (name) => {
    const x = a.totals[name] ?? [0, 0];
    const y = b.totals[name] ?? [0, 0];
    return { perSec: (y[0] - x[0]) / seconds, msPerSec: (y[1] - x[1]) / seconds, meanMs: y[0] > x[0] ? (y[1] - x[1]) / (y[0] - x[0]) : null };
  };
  const idle = b.elu.idle - a.elu.idle;
  const active = b.elu.active - a.elu.active;
  const names = ["transaction", "commit", "handler", "sql", "lstatSync", "rmSync", "readdirSync", "writeSync"];
  return {
    seconds,
    eventLoop: active / (idle + active),
    cpu: (b.cpuSeconds - a.cpuSeconds) / seconds,
    ...Object.fromEntries(names.map((n) => [n, delta(n)])),
  };
}

/**
 * One fake worker (bench/sweep-fakes.mjs) that reports each chunk done at once (rc 0, an elapsed
 * that keeps the chunk size steady) and times its want -> assign and done -> ack inside the window.
 */
function fakeWorker(wire, port, index, clock, stats, skipScratch) {
  const inWindow = (t) => t >= clock.windowStart && t < clock.windowEnd;
  return fakeSweepWorker(wire, port, {
    token: TOKEN,
    index,
    idlePollMs: FAKE_IDLE_POLL_MS,
    stats,
    onAssign: (tWant, tAssign) => {
      if (inWindow(tWant)) stats.assignMs.push(tAssign - tWant);
    },
    runChunk: async (ch, done) => {
      if (!skipScratch) mkdirSync(ch.scratch_dir, { recursive: true });
      const n = ch.seed_to - ch.seed_from + 1;
      const tDone = performance.now();
      const ack = await done(n / FAKE_SEEDS_PER_SEC);
      const tAck = performance.now();
      if (ack.note === "recorded") {
        stats.completions++;
        if (inWindow(tAck)) stats.windowCompletions++;
      } else {
        stats.notRecorded++;
      }
      if (inWindow(tDone)) stats.ackMs.push(tAck - tDone);
    },
  });
}

async function capacityLevel(o, wire, dir, workers) {
  mkdirSync(dir, { recursive: true });
  const c = newCampaign(dir, { title: "distributed", jobs: 1, chunkSeconds: 1, bootstrapSeeds: FAKE_SEEDS_PER_SEC });
  const probePath = join(dir, "coordinator.probe.json");
  writeFileSync(`${probePath}.cjs`, PROBE_SOURCE(probePath));
  const load = loadavg()[0];
  // Console lines (two per chunk) go to a file the bench never reads back while measuring.
  const logPath = join(dir, "coordinator.log");
  const prof = o.cpuProf ? ["--cpu-prof", "--cpu-prof-dir", join(o.cpuProf, `coordinator-${workers}-workers`)] : [];
  const coordArgv = [process.execPath, ...o.nodeFlags.split(/\s+/).filter(Boolean), ...prof, "--require", `${probePath}.cjs`, CLI, "--config", c.config, "coordinate", "--for", "5m", "--yes", "--token", TOKEN];
  const coord = startLoggedCoordinator(logPath, coordArgv, { cwd: c.campaign, env: process.env });
  const port = Number((await waitForLog(logPath, coord, /listening on 127\.0\.0\.1:(\d+)/))[1]);
  const clock = { windowStart: Infinity, windowEnd: Infinity };
  const stats = { completions: 0, windowCompletions: 0, notRecorded: 0, stopped: 0, ackMs: [], assignMs: [] };
  const running = [];
  const attachT0 = performance.now();
  // Attach in small groups: a handshake hashes the identity files, and a burst of 64 at once
  // would only measure the handshake.
  for (let i = 0; i < workers; i++) {
    running.push(fakeWorker(wire, port, i, clock, stats, o.skipScratch).catch((err) => ({ error: err })));
    if (i % 8 === 7) await sleep(20);
  }
  const attachSeconds = (performance.now() - attachT0) / 1000;
  await sleep(o.warmup * 1000);
  const cpu0 = { coord: processCpuSeconds(coord.pid), bench: process.cpuUsage(), at: performance.now() };
  clock.windowStart = performance.now();
  clock.windowEnd = clock.windowStart + o.window * 1000;
  const windowStartEpoch = epochMs();
  await sleep(o.window * 1000);
  const cpu1 = { coord: processCpuSeconds(coord.pid), bench: process.cpuUsage(), at: performance.now() };
  const windowEndEpoch = epochMs();
  const coordinatorPeakRssMb = peakRssMb(coord.pid);
  const stopT0 = performance.now();
  coord.child.kill("SIGINT");
  const end = await coord.done;
  const stopSeconds = (performance.now() - stopT0) / 1000;
  const outcomes = await Promise.all(running);
  const failed = outcomes.filter((r) => r && r.error);
  const log = readFileSync(logPath, "utf8");
  const summaryAcked = new RegExp(`all ${workers} worker\\(s\\) acknowledged the stop`).test(log);
  const probe = JSON.parse(readFileSync(probePath, "utf8"));
  const seconds = (cpu1.at - cpu0.at) / 1000;
  const benchCpu = (cpu1.bench.user - cpu0.bench.user + cpu1.bench.system - cpu0.bench.system) / 1e6;
  const inside = probeWindow(probe, windowStartEpoch, windowEndEpoch);
  const level = {
    workers,
    loadBefore: load,
    attachSeconds,
    windowSeconds: seconds,
    completions: stats.windowCompletions,
    completionsPerSec: stats.windowCompletions / seconds,
    ackP50Ms: percentile(stats.ackMs, 50),
    ackP99Ms: percentile(stats.ackMs, 99),
    ackMaxMs: Math.max(...stats.ackMs),
    assignP50Ms: percentile(stats.assignMs, 50),
    assignP99Ms: percentile(stats.assignMs, 99),
    coordinatorCpu: (cpu1.coord - cpu0.coord) / seconds,
    benchCpu: benchCpu / seconds,
    coordinatorPeakRssMb,
    coordinatorEventLoop: inside?.eventLoop ?? null,
    commitsPerSec: inside?.transaction.perSec ?? null,
    handlersPerCommit: inside ? inside.handler.perSec / inside.transaction.perSec : null,
    commitMsMean: inside?.commit.meanMs ?? null,
    // Milliseconds per second of the coordinator's event loop (1000 = all of it).
    loopMsPerSec: inside && {
      commit: inside.commit.msPerSec,
      handlers: inside.handler.msPerSec,
      sql: inside.sql.msPerSec,
      lstatSync: inside.lstatSync.msPerSec,
      rmSync: inside.rmSync.msPerSec,
      readdirSync: inside.readdirSync.msPerSec,
      consoleWrites: inside.writeSync.msPerSec,
      outsideTransactions: inside.eventLoop * 1000 - inside.transaction.msPerSec,
    },
    probe: inside,
    // Completions per second (half the handlers: a want and a done each) in each second of the
    // whole run, from the coordinator's own samples: shows whether the rate drifts.
    series: probeSeries(probe, windowStartEpoch),
    totalCompletions: stats.completions,
    notRecorded: stats.notRecorded,
    stopSeconds,
    coordinatorExit: end.code,
    stopped: stats.stopped,
    exactAcks: summaryAcked,
    workerErrors: failed.map((f) => f.error.message),
    logBytes: log.length,
  };
  if (o.cpuProf) level.profile = printCpuProfile(join(o.cpuProf, `coordinator-${workers}-workers`), "coordinator profile", 30);
  if (end.code !== 0 || !summaryAcked || failed.length > 0 || stats.stopped !== workers) {
    const problem = `coordinator exit ${end.code ?? end.signal}, ${stats.stopped}/${workers} fake workers stopped, summary ${summaryAcked ? "names all ACKs" : "does not name all ACKs"}` +
      (failed.length ? `; first worker error: ${failed[0].error.message}` : "");
    level.problem = problem;
    console.log(`  PROBLEM: ${problem}\n${log.split("\n").slice(-25).join("\n")}`);
  }
  return level;
}

function reportCapacity(result) {
  const { levels } = result;
  console.log("\n(b) capacity: fake workers (want -> assign -> done at once) against a real coordinator");
  printTable([
    ["workers", "pass", "window s", "completions", "per s", "ack p50 ms", "ack p99 ms", "assign p50 ms", "assign p99 ms", "coord CPU", "coord loop", "coord peak RSS MB", "bench CPU", "commits/s", "handlers/commit", "commit ms", "stop s", "exit", "exact ACKs"],
    ...levels.map((l) => [
      l.workers,
      l.pass,
      f1(l.windowSeconds),
      int(l.completions),
      int(l.completionsPerSec),
      f2(l.ackP50Ms),
      f2(l.ackP99Ms),
      f2(l.assignP50Ms),
      f2(l.assignP99Ms),
      `${Math.round(l.coordinatorCpu * 100)}%`,
      l.coordinatorEventLoop === null ? "?" : `${Math.round(l.coordinatorEventLoop * 100)}%`,
      l.coordinatorPeakRssMb === null ? "?" : f0(l.coordinatorPeakRssMb),
      `${Math.round(l.benchCpu * 100)}%`,
      int(l.commitsPerSec),
      l.handlersPerCommit === null ? "?" : f1(l.handlersPerCommit),
      l.commitMsMean === null ? "?" : f2(l.commitMsMean),
      f2(l.stopSeconds),
      l.coordinatorExit,
      l.exactAcks ? "all" : "NO",
    ]),
  ]);
  console.log("\nwhere the coordinator's event loop goes in the window, ms per second (1000 = the whole loop):");
  const m = (x) => (x === undefined || x === null ? "?" : f0(x));
  printTable([
    ["workers", "pass", "busy", "in transactions", "commit (BEGIN+COMMIT, fsync)", "handlers", "SQL statements", "lstatSync", "rmSync", "readdirSync", "console writes", "outside transactions"],
    ...levels.map((l) => {
      const t = l.loopMsPerSec ?? {};
      const busy = l.coordinatorEventLoop === null ? null : l.coordinatorEventLoop * 1000;
      return [l.workers, l.pass, m(busy), m(t.commit + t.handlers), m(t.commit), m(t.handlers), m(t.sql), m(t.lstatSync), m(t.rmSync), m(t.readdirSync), m(t.consoleWrites), m(t.outsideTransactions)];
    }),
  ]);
  console.log("(SQL, lstatSync, rmSync, readdirSync and console writes inside the handlers are part of 'handlers'; console writes also happen outside)");
  for (const l of levels) {
    if (!l.probe) continue;
    const calls = ["transaction", "handler", "sql", "lstatSync", "rmSync", "readdirSync", "writeSync"]
      .map((n) => `${n} ${int(l.probe[n].perSec)}/s x ${l.probe[n].meanMs === null ? "?" : f0(l.probe[n].meanMs * 1000)} us`)
      .join(", ");
    console.log(`  ${l.workers} workers, pass ${l.pass}: ${calls}`);
  }
  const byWorkers = new Map();
  for (const l of levels) byWorkers.set(l.workers, [...(byWorkers.get(l.workers) ?? []), l]);
  const verdict = {};
  for (const [n, ls] of byWorkers) {
    const rate = median(ls.map((l) => l.completionsPerSec));
    const p99 = median(ls.map((l) => l.ackP99Ms));
    const rss = Math.max(...ls.map((l) => l.coordinatorPeakRssMb ?? Infinity));
    const clean = ls.every((l) => !l.problem);
    const pass = (ok) => (ok ? "PASS" : "MISS");
    verdict[n] = {
      completionsPerSec: rate,
      verdict: pass(rate >= TARGET_COMPLETIONS),
      ackP99Ms: p99,
      ackVerdict: pass(p99 < TARGET_ACK_P99_MS),
      peakRssMb: rss,
      rssVerdict: pass(rss <= TARGET_RSS_MB),
      shutdown: clean ? "clean" : "PROBLEM",
    };
    console.log(
      `verdict at ${n} workers: ${int(rate)} completions/s ${verdict[n].verdict} (target ${int(TARGET_COMPLETIONS)}), ack p99 ${f2(p99)} ms ${verdict[n].ackVerdict} (< ${TARGET_ACK_P99_MS}), ` +
        `coordinator peak RSS ${f0(rss)} MB ${verdict[n].rssVerdict} (<= ${TARGET_RSS_MB}); drain + stop ${verdict[n].shutdown}`,
    );
  }
  return verdict;
}

async function capacityPart(o, scratch) {
  const wire = await loadSweepWire();
  const order = [];
  for (let r = 0; r < o.capacityRounds; r++) order.push(...(r % 2 === 0 ? o.fakeWorkers : [...o.fakeWorkers].reverse()).map((n) => ({ n, pass: r + 1 })));
  const levels = [];
  for (const [i, { n, pass }] of order.entries()) {
    console.log(`capacity ${i + 1}/${order.length}: ${n} fake workers, ${o.warmup} s warm-up, ${o.window} s window ...`);
    const dir = join(scratch, `capacity-${i + 1}`);
    const level = { pass, ...(await capacityLevel(o, wire, dir, n)) };
    console.log(
      `  ${int(level.completionsPerSec)} completions/s, ack p50 ${f2(level.ackP50Ms)} ms p99 ${f2(level.ackP99Ms)} ms; coordinator CPU ${Math.round(level.coordinatorCpu * 100)}%, bench CPU ${Math.round(level.benchCpu * 100)}%; stop in ${f2(level.stopSeconds)} s, exit ${level.coordinatorExit}`,
    );
    levels.push(level);
    if (!o.keep) rmSync(dir, { recursive: true, force: true });
  }
  const result = { levels, target: TARGET_COMPLETIONS, fakeSeedsPerSec: FAKE_SEEDS_PER_SEC };
  result.verdict = reportCapacity(result);
  return result;
}

// ---------------------------------------------------------------------------------------------

const o = options(process.argv.slice(2));
benchmarkMain("distributed", o, async (scratch) => ({
  efficiency: o.part !== "capacity" ? await efficiencyPart(o, scratch) : undefined,
  capacity: o.part !== "efficiency" ? await capacityPart(o, scratch) : undefined,
}));
