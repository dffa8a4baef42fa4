#!/usr/bin/env node
// explore-fleet: how many tasks per second one explore master (or two, or three) can feed to remote workers.
//
// (a) capacity. Fake workers in this process speak the real explore wire (dist/ modules): they
//     handshake, ask for tasks, read the task's input from the corpus, stage one real child (the
//     input plus one byte, until it is --length bytes long) under its hash name in the stage
//     directory the master named, and send a real result frame. No target runs, so the machine's
//     spawn rate does not hide the master's own cost. For each worker count (2/8/16) and master
//     count (1/2/3, workers split between them; the masters share one corpus, ownership rendezvous,
//     each serving its share from its own journal):
//       tasks/s        results acknowledged "committed" in the window, per second
//       loop busy      the master's event-loop utilisation in the window (perf_hooks, a preload)
//       CPU/task       the masters' CPU seconds in the window per committed task (all masters' CPU
//                      over all committed tasks: the mean cost of a task to the master that serves it)
//     With --base DIR (a checkout of an older commit, built), every level runs the base and this
//     checkout alternately, so the ratio of the two is taken under the same load.
// (b) real workers (bench/explore-fleet-real.mjs). `fuzzfleet worker --slots 1` processes running a
//     C target built here that burns about --target-ms of CPU per run (0: a trivial one), against
//     one master or two, beside as many direct loops running the target on a file:
//       tasks/s        runs that ended in the window, per second; direct loops likewise
//       own CPU/task   utime + stime of every master and worker (/proc; the target excluded) over
//                      the window, per task
//
// Runs against the compiled CLI: `npm run build && node bench/explore-fleet.mjs [--help]`.
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { realPart } from "./explore-fleet-real.mjs";
import { benchmarkMain, CLI, f1, f2, median, parseOptions, printCpuProfile, printTable, ROOT, sleep, startProcess } from "./common.mjs";

const TOKEN = "explore-fleet-bench-token-0123456789abcdef";
const TARGET_TASKS_PER_SEC = 1000;

const HELP = `usage: node bench/explore-fleet.mjs [options]

  --part P            capacity, real or both                                  default both
  --workers LIST      worker counts                            default 2,8,16 (capacity), 2,4 (real)
  --masters LIST      master counts (workers are split between them)
                                                               default 1,2,3 (capacity), 1,2 (real)
  --rounds R          passes over every level, order alternating              default 1

 (a) capacity: fake workers, no target
  --seeds N           distinct seeds (4 random bytes each)                    default 1000
  --length L          children grow by one byte until they are L bytes long  default 24
  --warmup S          seconds from the first committed result to the window   default 1.5
  --window S          seconds measured                                        default 4
  --base DIR          also run the CLI of DIR (a built checkout), alternating default none

 (b) real workers: fuzzfleet worker processes, a C target built here
  --target-ms LIST    CPU per run of the target, calibrated on this machine;
                      0 = the trivial target (~1 ms of process cost)           default 20,0
  --real-length L     children grow by one byte until they are L bytes long  default 200
  --real-warmup S     seconds from the first run's end to the window          default 3
  --real-window S     seconds measured; the direct loops, as long             default 10

  --cpu-prof DIR      (a) also profile the masters of one extra run at the largest worker count
                      (node --cpu-prof) into DIR, and print the root's top frames; DIR/window.json
                      holds the window and its tasks (bench/cpuprofile-per-task.mjs compares two)
  --prof-masters N    masters in that profiled run                            default 1`;

function options(argv) {
  return parseOptions(
    "explore-fleet",
    argv,
    {
      part: { default: "both", choices: ["capacity", "real", "both"] },
      workers: { number: { min: 1, max: 256, integer: true }, list: true },
      masters: { number: { min: 1, max: 3, integer: true }, list: true },
      seeds: { default: "1000", number: { min: 1, integer: true } },
      length: { default: "24", number: { min: 5, max: 4096, integer: true } },
      warmup: { default: "1.5", number: { min: 0 } },
      window: { default: "4", number: { min: 0.5 } },
      base: { path: true },
      rounds: { default: "1", number: { min: 1, integer: true } },
      "target-ms": { default: "20,0", number: { min: 0, max: 10_000, integer: true }, list: true },
      "real-length": { default: "200", number: { min: 4, max: 4000, integer: true } },
      "real-warmup": { default: "3", number: { min: 0 } },
      "real-window": { default: "10", number: { min: 1 } },
      "cpu-prof": { path: true },
      "prof-masters": { default: "1", number: { min: 1, max: 3, integer: true } },
    },
    HELP,
  );
}

/** A preload in each master: event-loop utilisation and CPU every 0.25 s, written at exit. fuzzfleet is unchanged. */
const PROBE_SOURCE = (path) => `"use strict";
const { writeFileSync } = require("node:fs");
const { performance } = require("node:perf_hooks");
const samples = [];
const sample = () => {
  const u = process.cpuUsage();
  samples.push({ at: performance.timeOrigin + performance.now(), elu: performance.eventLoopUtilization(), cpu: (u.user + u.system) / 1e6 });
};
setInterval(sample, 250).unref();
process.on("exit", () => { sample(); writeFileSync(${JSON.stringify(path)} + "." + process.pid, JSON.stringify(samples)); });
`;

function probeWindow(samples, from, to) {
  const inside = samples.filter((s) => s.at >= from && s.at <= to);
  if (inside.length < 2) return null;
  const a = inside[0];
  const b = inside.at(-1);
  const active = b.elu.active - a.elu.active;
  const idle = b.elu.idle - a.elu.idle;
  return { seconds: (b.at - a.at) / 1000, busy: active / (active + idle), cpuSeconds: b.cpu - a.cpu };
}

async function loadWire(cli) {
  const dist = resolve(cli, "..", "..");
  const url = (p) => new URL(`file://${join(dist, p)}`).href;
  const [{ dial }, { CoordinatorReply }, { handshake }] = await Promise.all([
    import(url("net/connection.js")),
    import(url("net/messages.js")),
    import(url("worker/client.js")),
  ]);
  return { dial, CoordinatorReply, handshake };
}

const sha256 = (b) => createHash("sha256").update(b).digest("hex");

/**
 * One fake worker: the real handshake, then want -> task -> stage a child -> result -> ack, until
 * drained; then empty heartbeats until the tokenised stop, answered exactly.
 */
async function fakeWorker(wire, port, index, o, clock, stats) {
  const conn = await wire.dial("127.0.0.1", port, 10_000);
  const shook = await wire.handshake(conn, { token: TOKEN, jobs: 1, slots: 1, hostname: `fake-${index}` });
  // A build's handshake resolves with the welcome, or (since the no-shared-directory workers) with { welcome, shared, problem }.
  const welcome = shook.type === "welcome" ? shook : shook.welcome;
  const { corpus_dir: corpus, stage_root: stageRoot } = welcome.explore;
  mkdirSync(stageRoot, { recursive: true });
  const request = (frame) => conn.request(frame, wire.CoordinatorReply, 60_000);
  let draining = false;
  try {
    for (;;) {
      let reply = await request(draining ? { type: "heartbeat", ids: [] } : { type: "want", slots: 1 });
      if (reply.type === "task") {
        for (const t of reply.tasks) {
          const input = readFileSync(join(corpus, t.hash));
          const result = { type: "result", task_id: t.task_id, fence: t.fence, input_hash: sha256(input), new_hashes: [], num_generated: 0, staged_bytes: 0, staging_id: "", retcode: 0, elapsed: 0.001, protocol_error: "", budget: null, detail: null, finding: null };
          if (input.length < o.length) {
            const child = Buffer.concat([input, randomBytes(1)]);
            const stageId = randomBytes(16).toString("hex");
            const hash = sha256(child);
            mkdirSync(join(stageRoot, stageId));
            writeFileSync(join(stageRoot, stageId, hash), child);
            Object.assign(result, { new_hashes: [hash], num_generated: 1, staged_bytes: child.length, staging_id: stageId });
          }
          reply = await request(result);
          const at = performance.timeOrigin + performance.now();
          if (reply.type !== "ack") throw new Error(`fake worker ${index}: '${reply.type}' in reply to a result`);
          if (reply.note === "committed") {
            if (stats.committed++ === 0) clock.first(at);
            if (at >= clock.from && at < clock.to) stats.inWindow++;
          } else stats.other[reply.note] = (stats.other[reply.note] ?? 0) + 1;
          if (reply.drain) draining = true;
        }
        continue;
      }
      if (reply.type === "drain") draining = true;
      else if (reply.type === "wait") await sleep(reply.seconds * 1000);
      else if (reply.type === "stop") {
        const bye = await request({ type: "stop_ack", token: reply.token });
        if (bye.type !== "bye") throw new Error(`fake worker ${index}: '${bye.type}' in reply to stop_ack`);
        return;
      } else if (reply.type === "refuse") throw new Error(`fake worker ${index} refused: ${reply.reason}`);
      if (draining) await sleep(100);
    }
  } finally {
    conn.destroy();
  }
}

function writeSeeds(dir, n, bytes) {
  mkdirSync(dir, { recursive: true });
  const seen = new Set();
  while (seen.size < n) {
    const b = randomBytes(bytes);
    const h = sha256(b);
    if (seen.has(h)) continue;
    seen.add(h);
    writeFileSync(join(dir, `seed-${seen.size}`), b);
  }
}

/** Starts `masters` masters on one corpus (a root, and submasters with their own ports); env.rootArgs go to the root only. */
async function startMasters(cli, dir, masters, common, target, env) {
  const argsRoot = ["explore", ...common, ...(env.rootArgs ?? []), "--port", "0", "--bind", "127.0.0.1", "--token", TOKEN];
  if (masters > 1) argsRoot.push("--masters", String(masters));
  const root = startProcess([process.execPath, ...(env.cpuProf ? [`--cpu-prof`, `--cpu-prof-dir=${env.cpuProf}`] : []), cli, ...argsRoot, ...target], { cwd: dir, env: env.vars });
  const port = Number((await root.waitFor(/listening on 127\.0\.0\.1:(\d+)/, 60_000, "the root to listen"))[1]);
  const procs = [{ proc: root, port }];
  // A submaster listens once the roster came, which needs every master: all are started first.
  const subs = [];
  for (let i = 1; i < masters; i++) {
    const args = ["explore", ...common, "--join", `127.0.0.1:${port}`, "--port", "0", "--bind", "127.0.0.1", "--token", TOKEN];
    subs.push(startProcess([process.execPath, ...(env.cpuProf ? [`--cpu-prof`, `--cpu-prof-dir=${join(env.cpuProf, `sub${i}`)}`] : []), cli, ...args, ...target], { cwd: dir, env: env.vars }));
  }
  for (const sub of subs) {
    const subPort = Number((await sub.waitFor(/listening on 127\.0\.0\.1:(\d+)/, 60_000, "the submaster to listen"))[1]);
    procs.push({ proc: sub, port: subPort });
  }
  return procs;
}

async function capacityLevel(o, build, dir, workers, masters, cpuProf = null) {
  mkdirSync(dir, { recursive: true });
  writeSeeds(join(dir, "seeds"), o.seeds, 4);
  const probe = join(dir, "probe.json");
  writeFileSync(`${probe}.cjs`, PROBE_SOURCE(probe));
  const vars = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --require ${probe}.cjs`.trim() };
  const common = ["-i", join(dir, "seeds"), "-o", join(dir, "corpus"), "-j", "0", "--max-idle", "30", "-t", "20"];
  const load = loadavg()[0];
  const procs = await startMasters(build.cli, dir, masters, common, ["--", "/bin/true", "@@"], { vars, cpuProf });
  const wire = await loadWire(build.cli);
  // The window opens --warmup seconds after the first committed result (the seeds are admitted by then).
  let started;
  const firstResult = new Promise((r) => (started = r));
  const clock = {
    from: Infinity,
    to: Infinity,
    first: (at) => {
      Object.assign(clock, { from: at + o.warmup * 1000, to: at + (o.warmup + o.window) * 1000 });
      started();
    },
  };
  const stats = { committed: 0, inWindow: 0, other: {} };
  // The fake workers' own CPU over the window: they share the two cores with the master.
  let benchCpu = null;
  firstResult.then(async () => {
    await sleep(Math.max(0, clock.from - (performance.timeOrigin + performance.now())));
    const c0 = process.cpuUsage();
    await sleep(o.window * 1000);
    const c1 = process.cpuUsage(c0);
    benchCpu = (c1.user + c1.system) / 1e6 / o.window;
  });
  const running = [];
  for (let i = 0; i < workers; i++) running.push(fakeWorker(wire, procs[i % procs.length].port, i, o, clock, stats).catch((err) => ({ error: err })));
  await Promise.race([firstResult, sleep(60_000)]);
  await sleep((o.warmup + o.window) * 1000 + 250);
  for (const { proc } of procs) proc.child.kill("SIGINT");
  const ends = await Promise.all(procs.map(({ proc }) => proc.done));
  const outcomes = await Promise.all(running);
  const errors = outcomes.filter((x) => x?.error).map((x) => x.error.message);
  const windows = procs.map(({ proc }) => {
    try {
      return probeWindow(JSON.parse(readFileSync(`${probe}.${proc.pid}`, "utf8")), clock.from, clock.to);
    } catch {
      return null;
    }
  });
  const tasksPerSec = stats.inWindow / o.window;
  // The window on the monotonic clock (µs) that a .cpuprofile's sample times use, so that a profile
  // can be cut to the window and divided by the tasks committed in it.
  const monoUs = Number(process.hrtime.bigint() / 1000n) - (performance.timeOrigin + performance.now()) * 1000;
  if (cpuProf) writeFileSync(join(cpuProf, "window.json"), JSON.stringify({ fromUs: clock.from * 1000 + monoUs, toUs: clock.to * 1000 + monoUs, tasks: stats.inWindow, masters }));
  const cpu = windows.reduce((a, w) => a + (w?.cpuSeconds ?? 0), 0);
  return {
    build: build.label,
    workers,
    masters,
    loadBefore: load,
    committed: stats.committed,
    tasksPerSec,
    loopBusy: windows.map((w) => w?.busy ?? null),
    cpuMsPerTask: stats.inWindow > 0 ? (cpu * 1000) / stats.inWindow : null,
    cpuShare: windows.map((w) => (w ? w.cpuSeconds / w.seconds : null)),
    benchCpu,
    otherNotes: stats.other,
    exits: ends.map((e) => e.code ?? e.signal),
    errors: errors.slice(0, 3),
    output: errors.length ? procs.map(({ proc }) => proc.output().split("\n").slice(-15).join("\n")) : undefined,
  };
}

async function capacityPart(o, scratch) {
  const builds = [{ label: "this", cli: CLI }];
  if (o.base) builds.unshift({ label: "base", cli: join(o.base, "dist", "cli", "main.js") });
  const levels = o.masters.flatMap((m) => o.workers.map((w) => ({ m, w })));
  const runs = [];
  let n = 0;
  for (let round = 0; round < o.rounds; round++) {
    for (const { m, w } of round % 2 === 0 ? levels : [...levels].reverse()) {
      for (const build of round % 2 === 0 ? builds : [...builds].reverse()) {
        n++;
        const r = { round: round + 1, ...(await capacityLevel(o, build, join(scratch, `cap-${n}`), w, m)) };
        console.log(
          `  ${build.label}: ${m} master(s), ${w} fake workers: ${f1(r.tasksPerSec)} tasks/s, loop busy ${r.loopBusy.map((b) => (b === null ? "?" : f2(b))).join("/")}, ` +
            `CPU ${r.cpuMsPerTask === null ? "?" : f2(r.cpuMsPerTask)} ms/task${r.errors.length ? `; errors: ${r.errors.join("; ")}` : ""}`,
        );
        if (r.errors.length && r.output) console.log(r.output.join("\n---\n"));
        runs.push(r);
        if (!o.keep) rmSync(join(scratch, `cap-${n}`), { recursive: true, force: true });
      }
    }
  }
  let profile = null;
  if (o.cpuProf) {
    const w = Math.max(...o.workers);
    mkdirSync(o.cpuProf, { recursive: true });
    const m = o.profMasters;
    const r = await capacityLevel(o, builds.at(-1), join(scratch, "cap-prof"), w, m, o.cpuProf);
    console.log(`  profiled run: ${m} master(s), ${w} fake workers: ${f1(r.tasksPerSec)} tasks/s (slower than unprofiled), ${r.committed} results committed over the run`);
    profile = printCpuProfile(o.cpuProf, m === 1 ? `CPU profile of one master, ${w} fake workers` : `CPU profile of the root of ${m} masters, ${w} fake workers`);
  }
  console.log("\n(a) capacity: fake workers (stage a real child, send a real result; no target) against real masters");
  printTable([
    ["build", "masters", "workers", "round", "tasks/s", "loop busy", "master CPU", "CPU ms/task", "fake workers' CPU", "load before"],
    ...runs.map((r) => [r.build, r.masters, r.workers, r.round, f1(r.tasksPerSec), r.loopBusy.map((b) => (b === null ? "?" : f2(b))).join("/"), r.cpuShare.map((c) => (c === null ? "?" : f2(c))).join("/"), r.cpuMsPerTask === null ? "?" : f2(r.cpuMsPerTask), r.benchCpu === null ? "?" : f2(r.benchCpu), f2(r.loadBefore)]),
  ]);
  const verdict = {};
  for (const { m, w } of levels) {
    const mine = (label) => median(runs.filter((r) => r.build === label && r.masters === m && r.workers === w).map((r) => r.tasksPerSec));
    const cur = mine("this");
    const line = [`${m} master(s), ${w} workers: ${f1(cur)} tasks/s`];
    if (o.base) line.push(`base ${f1(mine("base"))}, ratio ${f2(cur / mine("base"))}`);
    if (m === 1 && w === 16) {
      verdict.oneMaster16 = cur >= TARGET_TASKS_PER_SEC ? "PASS" : "MISS";
      line.push(`${verdict.oneMaster16} (target ${TARGET_TASKS_PER_SEC})`);
    }
    console.log(line.join("; "));
  }
  return { runs, verdict, profile: profile ? { self: profile.self.slice(0, 15), inclusive: profile.inclusive.slice(0, 15) } : null };
}

const o = options(process.argv.slice(2));
// --workers and --masters name each part's levels; unset, each part takes its own.
o.realWorkers = o.workers ?? [2, 4];
o.realMasters = o.masters ?? [1, 2];
o.workers ??= [2, 8, 16];
o.masters ??= [1, 2, 3];
benchmarkMain("explore-fleet", o, async (scratch) => ({
  root: ROOT,
  capacity: o.part !== "real" ? await capacityPart(o, scratch) : undefined,
  real: o.part !== "capacity" ? await realPart(o, scratch, { startMasters, writeSeeds, token: TOKEN }) : undefined,
}));
