#!/usr/bin/env node
// explore: how close `fuzzfleet explore` gets to the machine's process-spawn limit, and how long
// the smallest campaign takes from start to exit.
//
// (a) throughput. `fuzzfleet explore -j 2` over N distinct seeds with /bin/true as the target
//     (stdin mode: each input arrives on stdin), against the raw spawn rate of /bin/true measured
//     in the same run by a fresh Node process with the same concurrency (2) and the same stdin
//     redirection from a file. Rounds alternate the two.
//       explore tasks/s = observations / (elapsed_seconds from --stats-json - the idle window)
//     The idle window (--max-idle) is a deliberate wait at the end, not work, so it is taken out.
//       ratio = explore tasks/s / raw spawns/s
// (b) latency. Wall time from process start to exit of the one-seed /bin/true campaign with
//     `-j 2 --max-idle 1`, median of several runs, with bare `node -e 0` and `fuzzfleet --version`
//     measured alongside (interleaved), and a timeline of one extra run taken with a probe.
//
// Runs against the compiled CLI: `npm run build && node bench/explore.mjs [--help]`.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import {
  benchmarkMain,
  CLI,
  f0,
  f1,
  f2,
  f3,
  median,
  ms,
  parseOptions,
  printCpuProfile,
  printTable,
  SPAWN_ADDON,
  spawnProbeSource,
  startProcess,
  sum,
  timedCallsSource,
  timedRun,
  wallOfSync,
} from "./common.mjs";

const TARGET_RATIO = 0.85;
const TARGET_LATENCY_SECONDS = 1.25;
const TRUE = "/bin/true";

const HELP = `usage: node bench/explore.mjs [options]

  --part P            throughput, latency or both                             default both

 (a) throughput: explore -j 2 over N seeds vs raw spawns of /bin/true at concurrency 2
  --seeds N           distinct seed files                                     default 300
  --rounds R          explore/raw pairs, run ABAB                             default 5
  --max-idle S        explore's idle window (subtracted from elapsed)         default 1

 (b) latency: the one-seed campaign, -j 2 --max-idle 1
  --runs R            timed runs of each command (interleaved)                default 7

  --cpu-prof DIR      also profile one extra explore run of each part (node --cpu-prof) into DIR`;

function options(argv) {
  return parseOptions(
    "explore",
    argv,
    {
      part: { default: "both", choices: ["throughput", "latency", "both"] },
      seeds: { default: "300", number: { min: 1, integer: true } },
      rounds: { default: "5", number: { min: 1, integer: true } },
      "max-idle": { default: "1", number: { min: 0 } },
      runs: { default: "7", number: { min: 1, integer: true } },
      "cpu-prof": { path: true },
    },
    HELP,
  );
}

// ---------------------------------------------------------------------------------------------
// The probe: a preload in the explore process that records, on the process's own clock
// (performance.now(), 0 = process start): when user code starts, each stdout line, each target
// spawn and exit, the time spent in synchronous file-system calls and flock (each a blocking
// wait of the event loop), event-loop utilisation and its own CPU at exit. fuzzfleet is unchanged.

const SYNC_FS = [
  "openSync",
  "closeSync",
  "readSync",
  "writeSync",
  "readFileSync",
  "writeFileSync",
  "fsyncSync",
  "renameSync",
  "unlinkSync",
  "rmSync",
  "mkdirSync",
  "readdirSync",
  "statSync",
  "lstatSync",
  "fstatSync",
  "futimesSync",
  "copyFileSync",
  "rmdirSync",
  "existsSync",
];

const PROBE_SOURCE = (probePath) => `"use strict";
const childProcess = require("node:child_process");
const fs = require("node:fs");
const { syncBuiltinESMExports, createRequire } = require("node:module");
const { performance } = require("node:perf_hooks");
const preloadAtMs = performance.now();
const spawns = [];
const lines = [];
${timedCallsSource("fsTotals")}
${spawnProbeSource()}
for (const name of ${JSON.stringify(SYNC_FS)}) fs[name] = timed(name, fs[name]);
syncBuiltinESMExports();
try {
  const fsExt = createRequire(${JSON.stringify(CLI)})("fs-ext");
  fsExt.flockSync = timed("flockSync", fsExt.flockSync);
} catch {
  // no flock figures
}
const write = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, ...rest) => {
  lines.push([performance.now(), String(chunk).slice(0, 200)]);
  return write(chunk, ...rest);
};
process.on("exit", () => {
  const u = process.cpuUsage();
  fs.writeFileSync(${JSON.stringify(probePath)}, JSON.stringify({
    cpuSeconds: (u.user + u.system) / 1e6,
    preloadAtMs,
    exitAtMs: performance.now(),
    eventLoop: performance.eventLoopUtilization(),
    rssBytes: process.memoryUsage().rss,
    spawns,
    lines,
    fsTotals,
  }));
});
`;

function probedArgv(dir, name) {
  const probePath = join(dir, `${name}.probe.json`);
  writeFileSync(`${probePath}.cjs`, PROBE_SOURCE(probePath));
  return { probePath, argv: [process.execPath, "--require", `${probePath}.cjs`, CLI] };
}

/** The probe's record as a timeline (seconds on the process's clock) and totals. */
function readProbe(probePath) {
  const p = JSON.parse(readFileSync(probePath, "utf8"));
  const targets = p.spawns.filter((s) => s.argv0 === TRUE);
  const lineAt = (re) => {
    const l = p.lines.find(([, text]) => re.test(text));
    return l ? l[0] / 1000 : null;
  };
  const busy = targets.length ? (Math.max(...targets.map((s) => s.exitAt ?? s.at)) - targets[0].at) / 1000 : null;
  const childSeconds = sum(targets.map((s) => ((s.exitAt ?? s.at) - s.at) / 1000));
  const fsTotal = sum(Object.values(p.fsTotals).map(([, t]) => t)) / 1000;
  return {
    cpuSeconds: p.cpuSeconds,
    eventLoopUtilization: p.eventLoop.utilization,
    tasks: targets.length,
    userCodeAt: p.preloadAtMs / 1000,
    bannerAt: lineAt(/^fuzzfleet explore: epoch/),
    queuedAt: lineAt(/initial input\(s\) seen/),
    firstSpawnAt: targets.length ? targets[0].at / 1000 : null,
    lastExitAt: targets.length ? Math.max(...targets.map((s) => s.exitAt ?? s.at)) / 1000 : null,
    idleStartAt: lineAt(/no more work in sight/),
    idleEndAt: lineAt(/no more inputs after/),
    statsAt: lineAt(/=== Final statistics ===/),
    exitAt: p.exitAtMs / 1000,
    busySeconds: busy,
    // Mean time a target process lives, spawn to exit as Node sees it.
    childMeanMs: targets.length ? (childSeconds * 1000) / targets.length : null,
    // Mean time the event loop is blocked inside the starter's spawn call (the native addon's
    // posix_spawn, or child_process.spawn's fork + exec handshake with FUZZFLEET_SPAWN=node).
    spawnCallMs: targets.length ? sum(targets.map((s) => s.callMs)) / targets.length : null,
    rssMiB: p.rssBytes / 2 ** 20,
    fsSeconds: fsTotal,
    fsTotals: Object.fromEntries(Object.entries(p.fsTotals).map(([k, [n, t]]) => [k, { calls: n, ms: t }])),
  };
}

// ---------------------------------------------------------------------------------------------
// Raw spawns: a fresh Node process spawning /bin/true with stdin from a file, `concurrency` at a time,
// through child_process.spawn (mode "attached" or "detached") or through fuzzfleet's own starter
// (mode "native": the addon called directly, nothing of fuzzfleet around it).

const RAW_SOURCE = `"use strict";
const { spawn: nodeSpawn } = require("node:child_process");
const { EventEmitter } = require("node:events");
const fs = require("node:fs");
const { performance } = require("node:perf_hooks");
const [files, concurrency, mode] = [JSON.parse(process.argv[2]), Number(process.argv[3]), process.argv[4]];
const detached = mode === "detached";
const addon = mode === "native" ? require(${JSON.stringify(SPAWN_ADDON)}) : null;
const envp = Object.entries(process.env).map(([k, v]) => k + "=" + v);
// Both return an object with once("exit", cb) and once("error", cb).
function spawn(file, args, options) {
  if (!addon) return nodeSpawn(file, args, options);
  const child = new EventEmitter();
  const [input, out] = options.stdio;
  addon.spawn(file, [file, ...args], envp, null, input, out, out, (code) => child.emit("exit", code));
  return child;
}
let next = 0;
let lives = 0;
let calls = 0;
const t0 = performance.now();
function one() {
  if (next >= files.length) return Promise.resolve();
  const file = files[next++];
  // The input on stdin, /dev/null for the output: what explore's runner gives each target.
  const input = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  const out = fs.openSync("/dev/null", "a");
  const at = performance.now();
  const child = spawn(${JSON.stringify(TRUE)}, [], { stdio: [input, out, out], detached });
  calls += performance.now() - at;
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) => {
      lives += performance.now() - at;
      fs.closeSync(input);
      fs.closeSync(out);
      if (code !== 0) return reject(new Error("exit " + code));
      resolve();
    });
  }).then(one);
}
Promise.all(Array.from({ length: concurrency }, one)).then(() => {
  const seconds = (performance.now() - t0) / 1000;
  process.stdout.write(JSON.stringify({ spawns: files.length, seconds, childMeanMs: lives / files.length, spawnCallMs: calls / files.length, rssMiB: process.memoryUsage().rss / 2 ** 20 }) + "\\n");
});
`;

async function rawSpawns(dir, files, mode) {
  const script = join(dir, "raw-spawn.cjs");
  writeFileSync(script, RAW_SOURCE);
  const filesPath = JSON.stringify(files);
  const p = startProcess([process.execPath, script, filesPath, "2", mode], { cwd: dir, env: process.env });
  const end = await p.done;
  if (end.code !== 0) throw new Error(`raw spawn loop exited ${end.code ?? end.signal}:\n${p.output()}`);
  const r = JSON.parse(p.output().trim().split("\n").at(-1));
  return { ...r, spawnsPerSec: r.spawns / r.seconds, processSeconds: end.seconds };
}

// ---------------------------------------------------------------------------------------------
// (a) throughput

function makeSeeds(dir, n) {
  const seeds = join(dir, "seeds");
  mkdirSync(seeds, { recursive: true });
  const files = [];
  for (let i = 0; i < n; i++) {
    const f = join(seeds, `s${String(i).padStart(5, "0")}`);
    writeFileSync(f, `seed ${i}\n`);
    files.push(f);
  }
  return { seeds, files };
}

function exploreArgs(seeds, corpus, statsPath, maxIdle) {
  return ["explore", "-i", seeds, "-o", corpus, "-j", "2", "--max-idle", String(maxIdle), "-t", "5", "--stats-json", statsPath, "--", TRUE];
}

async function runExplore(o, dir, seeds, name, { probe = false, cpuProf = null, env = process.env } = {}) {
  const corpus = join(dir, `corpus-${name}`);
  const statsPath = join(dir, `${name}.stats.json`);
  const logPath = join(dir, `${name}.log`);
  const p = probe ? probedArgv(dir, name) : { probePath: null, argv: [process.execPath, CLI] };
  const prof = cpuProf ? ["--cpu-prof", "--cpu-prof-dir", cpuProf] : [];
  const argv = [p.argv[0], ...prof, ...p.argv.slice(1), ...exploreArgs(seeds, corpus, statsPath, o.maxIdle)];
  const load = loadavg()[0];
  const r = await timedRun(argv, { cwd: dir, env, logPath });
  if (r.code !== 0) throw new Error(`explore exited ${r.code ?? r.signal}:\n${readFileSync(logPath, "utf8")}`);
  const stats = JSON.parse(readFileSync(statsPath, "utf8"));
  rmSync(corpus, { recursive: true, force: true });
  return {
    loadBefore: load,
    wallSeconds: r.seconds,
    observations: stats.observations,
    elapsedSeconds: stats.elapsed_seconds,
    tasksPerSec: stats.observations / (stats.elapsed_seconds - o.maxIdle),
    probe: p.probePath ? readProbe(p.probePath) : null,
  };
}

async function throughputPart(o, scratch) {
  const dir = join(scratch, "throughput");
  mkdirSync(dir, { recursive: true });
  const { seeds, files } = makeSeeds(dir, o.seeds);
  const rounds = [];
  for (let i = 0; i < o.rounds; i++) {
    const ex = await runExplore(o, dir, seeds, `round-${i + 1}`, { probe: true });
    if (ex.observations !== o.seeds) throw new Error(`explore made ${ex.observations} observations of ${o.seeds} distinct seeds`);
    const exNode = await runExplore(o, dir, seeds, `round-${i + 1}-node`, { probe: true, env: { ...process.env, FUZZFLEET_SPAWN: "node" } });
    if (exNode.observations !== o.seeds) throw new Error(`explore (node starter) made ${exNode.observations} observations of ${o.seeds} distinct seeds`);
    const raw = await rawSpawns(dir, files, "attached");
    const rawDetached = await rawSpawns(dir, files, "detached");
    const rawNative = await rawSpawns(dir, files, "native");
    const round = {
      round: i + 1,
      explore: ex,
      exploreNodeStarter: exNode,
      raw,
      rawDetached,
      rawNative,
      ratio: ex.tasksPerSec / raw.spawnsPerSec,
      ratioDetached: ex.tasksPerSec / rawDetached.spawnsPerSec,
      ratioNative: ex.tasksPerSec / rawNative.spawnsPerSec,
      ratioNodeStarter: exNode.tasksPerSec / raw.spawnsPerSec,
    };
    console.log(
      `round ${i + 1}/${o.rounds}: explore ${f1(ex.tasksPerSec)} tasks/s (${ex.observations} in ${f3(ex.elapsedSeconds)} s - ${o.maxIdle} s idle), ` +
        `${f1(exNode.tasksPerSec)} with FUZZFLEET_SPAWN=node; raw child_process ${f1(raw.spawnsPerSec)} spawns/s, detached ${f1(rawDetached.spawnsPerSec)}/s, ` +
        `native starter ${f1(rawNative.spawnsPerSec)}/s -> ratio ${f3(round.ratio)}, like for like ${f3(round.ratioNative)}`,
    );
    rounds.push(round);
  }
  const profile = await profiledRun(o, "throughput", o, dir, seeds);
  const total = {
    exploreTasksPerSec: median(rounds.map((r) => r.explore.tasksPerSec)),
    rawSpawnsPerSec: median(rounds.map((r) => r.raw.spawnsPerSec)),
    rawDetachedSpawnsPerSec: median(rounds.map((r) => r.rawDetached.spawnsPerSec)),
    rawNativeSpawnsPerSec: median(rounds.map((r) => r.rawNative.spawnsPerSec)),
    exploreNodeStarterTasksPerSec: median(rounds.map((r) => r.exploreNodeStarter.tasksPerSec)),
    ratio: median(rounds.map((r) => r.ratio)),
    ratioDetached: median(rounds.map((r) => r.ratioDetached)),
    ratioNative: median(rounds.map((r) => r.ratioNative)),
    ratioNodeStarter: median(rounds.map((r) => r.ratioNodeStarter)),
  };
  const result = { seeds: o.seeds, maxIdle: o.maxIdle, rounds, total, target: TARGET_RATIO, profile };
  result.verdict = reportThroughput(result);
  if (!o.keep) rmSync(dir, { recursive: true, force: true });
  return result;
}

function reportThroughput(result) {
  const { rounds, total } = result;
  console.log(`\n(a) throughput: explore -j 2 over ${result.seeds} distinct seeds, /bin/true on stdin, vs raw spawns at concurrency 2`);
  printTable([
    ["round", "explore wall s", "elapsed s", "explore tasks/s", "busy tasks/s", "explore, node starter", "raw spawns/s", "raw detached/s", "raw native/s", "ratio", "ratio vs detached", "ratio vs native", "node starter ratio"],
    ...rounds.map((r) => [
      r.round,
      f2(r.explore.wallSeconds),
      f3(r.explore.elapsedSeconds),
      f1(r.explore.tasksPerSec),
      r.explore.probe?.busySeconds ? f1(r.explore.probe.tasks / r.explore.probe.busySeconds) : "?",
      f1(r.exploreNodeStarter.tasksPerSec),
      f1(r.raw.spawnsPerSec),
      f1(r.rawDetached.spawnsPerSec),
      f1(r.rawNative.spawnsPerSec),
      f3(r.ratio),
      f3(r.ratioDetached),
      f3(r.ratioNative),
      f3(r.ratioNodeStarter),
    ]),
    [
      "median",
      "",
      "",
      f1(total.exploreTasksPerSec),
      "",
      f1(total.exploreNodeStarterTasksPerSec),
      f1(total.rawSpawnsPerSec),
      f1(total.rawDetachedSpawnsPerSec),
      f1(total.rawNativeSpawnsPerSec),
      f3(total.ratio),
      f3(total.ratioDetached),
      f3(total.ratioNative),
      f3(total.ratioNodeStarter),
    ],
  ]);
  // Where the explore process's time goes, per task (medians over rounds).
  const probes = rounds.map((r) => r.explore.probe).filter(Boolean);
  if (probes.length) {
    const per = (f) => median(probes.map((p) => f(p) / p.tasks)) * 1000;
    const mid = (f) => median(probes.map(f));
    console.log("\nwhere explore's time goes (medians over rounds):");
    console.log(`  process start -> user code            ${ms(mid((p) => p.userCodeAt))}`);
    console.log(`  -> banner (CLI loaded, lock, epoch)    ${ms(mid((p) => p.bannerAt))}`);
    console.log(`  -> first target spawn                  ${ms(mid((p) => p.firstSpawnAt))}`);
    console.log(`  first spawn -> last exit (busy)        ${ms(mid((p) => p.busySeconds))} = ${f1(mid((p) => p.tasks / p.busySeconds))} tasks/s`);
    console.log(`  last exit -> idle window starts        ${ms(mid((p) => p.idleStartAt - p.lastExitAt))}`);
    console.log(`  idle window                            ${ms(mid((p) => p.idleEndAt - p.idleStartAt))}`);
    console.log(`  idle end -> process exit (stats, cleanup) ${ms(mid((p) => p.exitAt - p.idleEndAt))}`);
    console.log(`  target process life, spawn -> exit     ${f2(mid((p) => p.childMeanMs))} ms mean (raw loop: ${f2(median(rounds.map((r) => r.raw.childMeanMs)))} ms)`);
    console.log(
      `  event loop blocked in spawn()          ${f2(mid((p) => p.spawnCallMs))} ms per task at ${f0(mid((p) => p.rssMiB))} MiB RSS ` +
        `(raw loop: ${f2(median(rounds.map((r) => r.raw.spawnCallMs)))} ms at ${f0(median(rounds.map((r) => r.raw.rssMiB)))} MiB)`,
    );
    console.log(`  per task: own CPU ${f2(per((p) => p.cpuSeconds))} ms, event loop busy ${f0pct(mid((p) => p.eventLoopUtilization))}, synchronous fs + flock ${f2(per((p) => p.fsSeconds))} ms`);
    const names = Object.keys(probes[0].fsTotals).sort((a, b) => probes[0].fsTotals[b].ms - probes[0].fsTotals[a].ms);
    console.log(
      `    of which: ${names
        .slice(0, 10)
        .map((n) => `${n} ${f1(median(probes.map((p) => (p.fsTotals[n]?.calls ?? 0) / p.tasks)))}x ${f2(median(probes.map((p) => (p.fsTotals[n]?.ms ?? 0) / p.tasks)))} ms`)
        .join(", ")}`,
    );
  }
  const v = total.ratio >= TARGET_RATIO ? "PASS" : "MISS";
  const vNative = total.ratioNative >= TARGET_RATIO ? "PASS" : "MISS";
  console.log(
    `verdict (target ${TARGET_RATIO}): against raw child_process spawns ${f3(total.ratio)} ${v} (${f3(total.ratioDetached)} against detached ones); ` +
      `against raw spawns through the same native starter ${f3(total.ratioNative)} ${vNative}`,
  );
  return { childProcess: v, native: vNative };
}

const f0pct = (x) => `${Math.round(x * 100)}%`;

/** With --cpu-prof: one more explore run of `part` under node --cpu-prof, summarised. Else null. */
async function profiledRun(o, part, runOptions, dir, seeds) {
  if (!o.cpuProf) return null;
  const profDir = join(o.cpuProf, part);
  await runExplore(runOptions, dir, seeds, "profiled", { cpuProf: profDir });
  return printCpuProfile(profDir, "profile of one more run");
}

// ---------------------------------------------------------------------------------------------
// (b) latency

async function latencyPart(o, scratch) {
  const dir = join(scratch, "latency");
  mkdirSync(dir, { recursive: true });
  const { seeds } = makeSeeds(dir, 1);
  const one = { maxIdle: 1 };
  const node = [];
  const version = [];
  const campaign = [];
  for (let i = 0; i < o.runs; i++) {
    node.push(wallOfSync([process.execPath, "-e", "0"]));
    version.push(wallOfSync([process.execPath, CLI, "--version"]));
    const r = await runExplore(one, dir, seeds, `one-${i + 1}`);
    if (r.observations !== 1) throw new Error(`the one-seed campaign made ${r.observations} observations`);
    campaign.push(r.wallSeconds);
    console.log(`run ${i + 1}/${o.runs}: node -e 0 ${ms(node.at(-1))}, fuzzfleet --version ${ms(version.at(-1))}, one-seed campaign ${ms(campaign.at(-1))}`);
  }
  // Timelines of extra runs taken with the probe (it costs about a millisecond).
  const timelines = [];
  for (let i = 0; i < 3; i++) {
    const r = await runExplore(one, dir, seeds, `timeline-${i + 1}`, { probe: true });
    timelines.push({ wallSeconds: r.wallSeconds, elapsedSeconds: r.elapsedSeconds, ...r.probe });
  }
  const profile = await profiledRun(o, "latency", one, dir, seeds);
  const result = {
    runs: o.runs,
    nodeSeconds: node,
    versionSeconds: version,
    campaignSeconds: campaign,
    median: { node: median(node), version: median(version), campaign: median(campaign) },
    timelines,
    target: TARGET_LATENCY_SECONDS,
    profile,
  };
  result.verdict = reportLatency(result);
  if (!o.keep) rmSync(dir, { recursive: true, force: true });
  return result;
}

function reportLatency(result) {
  const { median: m, timelines } = result;
  console.log(`\n(b) latency: one seed, /bin/true, -j 2 --max-idle 1, process start to exit (${result.runs} runs each, interleaved)`);
  printTable([
    ["command", "median s", "min s", "max s"],
    ["node -e 0", f3(m.node), f3(Math.min(...result.nodeSeconds)), f3(Math.max(...result.nodeSeconds))],
    ["fuzzfleet --version", f3(m.version), f3(Math.min(...result.versionSeconds)), f3(Math.max(...result.versionSeconds))],
    ["one-seed campaign", f3(m.campaign), f3(Math.min(...result.campaignSeconds)), f3(Math.max(...result.campaignSeconds))],
  ]);
  const mid = (f) => median(timelines.map(f));
  console.log(`\ntimeline of the campaign (median of ${timelines.length} probed runs, on the process's clock):`);
  printTable([
    ["phase", "from", "to", "ms"],
    ["Node start-up", "process start", "user code", f1(mid((t) => t.userCodeAt) * 1000)],
    ["CLI load, lock, epoch", "user code", "banner", f1(mid((t) => t.bannerAt - t.userCodeAt) * 1000)],
    ["input scan, claim, copy, spawn", "banner", "target spawned", f1(mid((t) => t.firstSpawnAt - t.bannerAt) * 1000)],
    ["the target runs", "spawned", "exited", f1(mid((t) => t.lastExitAt - t.firstSpawnAt) * 1000)],
    ["commit, then idle detected", "target exited", "idle window starts", f1(mid((t) => t.idleStartAt - t.lastExitAt) * 1000)],
    ["idle window (--max-idle 1)", "idle starts", "idle ends", f1(mid((t) => t.idleEndAt - t.idleStartAt) * 1000)],
    ["stats, cleanup", "idle ends", "'exit' event", f1(mid((t) => t.exitAt - t.idleEndAt) * 1000)],
    ["teardown (outside Node's clock)", "'exit' event", "process gone", f1(mid((t) => t.wallSeconds - t.exitAt) * 1000)],
    ["total", "", "", f1(mid((t) => t.wallSeconds) * 1000)],
  ]);
  const v = m.campaign <= TARGET_LATENCY_SECONDS ? "PASS" : "MISS";
  console.log(`verdict (target <= ${TARGET_LATENCY_SECONDS} s): median ${f3(m.campaign)} s ${v}`);
  return v;
}

// ---------------------------------------------------------------------------------------------

const o = options(process.argv.slice(2));
benchmarkMain("explore", o, async (scratch) => ({
  throughput: o.part !== "latency" ? await throughputPart(o, scratch) : undefined,
  latency: o.part !== "throughput" ? await latencyPart(o, scratch) : undefined,
}));
