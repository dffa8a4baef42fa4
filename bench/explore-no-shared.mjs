#!/usr/bin/env node
// explore-no-shared: what an explore worker without the shared directory costs, against one that
// shares it, side by side in one run (issue 31's target: tasks/s without >= 0.9 x with).
//
// (a) fake workers. Workers in this process speak the real explore wire (dist/ modules) to a real
//     master (`explore -j 0 --port 0`, target /bin/true, never run): "shared" ones read the task's
//     input from the corpus and stage one real child (the input plus one byte, until it is
//     --length bytes long) in the stage directory the master named; "no-shared" ones say in the
//     handshake that they do not see the shared directory, take the input from the task frame and
//     send the child in a `put` frame right before the result (ahead of its ack, as a real worker). No target runs, so the master's own cost
//     of the transfer shows.
//       tasks/s   results acknowledged "committed" in the window, per second
// (b) real workers. `fuzzfleet worker --slots 1` processes running a trivial C target (the input
//     plus one byte, until 14 bytes) against one master (-j 0): "shared" ones in the campaign's
//     directory; "no-shared" ones in a mount namespace of their own where the campaign's parent
//     directory is an empty tmpfs (unshare -m; needs root), with their own copy of the target.
//       tasks/s   observations / (elapsed_seconds - --max-idle), from --stats-json
//       CPU ms/task  the master's, the workers' own and their targets' CPU (from /proc, sampled
//                 every 100 ms until each process ends) per observation: a figure the load of other
//                 work on the machine moves far less than tasks/s
//     --target-ms N makes the target burn N ms of CPU per run (a target of realistic cost), and
//     --cpu-prof DIR profiles the master and every worker (node --cpu-prof) of each level.
// Modes alternate within each level, so both are taken under the same load.
//
// Runs against the compiled CLI: `npm run build && node bench/explore-no-shared.mjs [--help]`.
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { benchmarkMain, CLI, f1, f2, median, parseOptions, printTable, ROOT, sleep, startProcess } from "./common.mjs";

const TOKEN = "explore-no-shared-bench-token-0123456789";
const TARGET_RATIO = 0.9;

const HELP = `usage: node bench/explore-no-shared.mjs [options]

  --part P            fake, real or both                                      default both
  --workers LIST      worker counts                                           default 2,8
  --rounds R          passes over every level (modes alternate)               default 2

 (a) fake workers, no target
  --seeds N           distinct seeds (4 random bytes each)                    default 1000
  --length L          children grow by one byte until they are L bytes long  default 24
  --warmup S          seconds from the first committed result to the window   default 1.5
  --window S          seconds measured                                        default 4

 (b) real workers (fuzzfleet worker processes, trivial C target; no-shared needs root)
  --real-seeds N      seeds (the frontier is about 11 tasks per seed)         default 200
  --max-idle S        the master's idle window (taken out of elapsed)         default 1
  --target-ms N       CPU the target burns per run, in ms (0: none)           default 0
  --cpu-prof DIR      profile the master (and the real workers) of each level into DIR/<level>/
                      (outside the bench's scratch: no-shared workers cannot see that)`;

function options(argv) {
  return parseOptions(
    "explore-no-shared",
    argv,
    {
      part: { default: "both", choices: ["fake", "real", "both"] },
      workers: { default: "2,8", number: { min: 1, max: 64, integer: true }, list: true },
      rounds: { default: "2", number: { min: 1, integer: true } },
      seeds: { default: "1000", number: { min: 1, integer: true } },
      length: { default: "24", number: { min: 5, max: 4096, integer: true } },
      warmup: { default: "1.5", number: { min: 0 } },
      window: { default: "4", number: { min: 0.5 } },
      "real-seeds": { default: "200", number: { min: 1, integer: true } },
      "max-idle": { default: "1", number: { min: 0 } },
      "target-ms": { default: "0", number: { min: 0, integer: true } },
      "cpu-prof": { path: true },
    },
    HELP,
  );
}

const sha256 = (b) => createHash("sha256").update(b).digest("hex");
const MODES = ["shared", "no-shared"];

async function loadWire() {
  const dist = resolve(CLI, "..", "..");
  const url = (p) => new URL(`file://${join(dist, p)}`).href;
  const [{ dial }, messages, { handshake }, { provenTarget }] = await Promise.all([
    import(url("net/connection.js")),
    import(url("net/messages.js")),
    import(url("worker/client.js")),
    import(url("explore/state/target-identity.js")),
  ]);
  return { dial, messages, handshake, provenTarget };
}

/** The handshake of a worker that says it does not see the shared directory (it proves the target build where the master runs it). */
// As long as a real worker waits: a master admitting its seeds on a loaded machine answers late.
const HANDSHAKE_MS = 60_000;

async function noSharedHandshake(wire, conn, index) {
  const { HandshakeReply, PROTOCOL_VERSION, Welcome, Refuse } = wire.messages;
  const first = await conn.request({ type: "hello", token: TOKEN, protocol: PROTOCOL_VERSION, host: `fake-${index}`, jobs: 1, slots: 1 }, HandshakeReply, HANDSHAKE_MS);
  if (first.type !== "challenge") throw new Error(`fake worker ${index}: '${first.type}' in reply to hello`);
  const build = wire.provenTarget(first.target, true, process.cwd(), process.env.PATH).build;
  const prove = { type: "prove", nonce: null, gen_hash: null, app_build: null, problem: null, shared_dir: false, target_build: build };
  const { z } = await import("zod");
  const welcome = await conn.request(prove, z.discriminatedUnion("type", [Welcome, Refuse]), HANDSHAKE_MS);
  if (welcome.type !== "welcome") throw new Error(`fake worker ${index} refused: ${welcome.reason}`);
  return welcome;
}

/** One fake worker: want -> task -> (stage or put) one child -> result -> ack, until drained; then heartbeats until the stop. */
async function fakeWorker(wire, port, index, mode, o, clock, stats) {
  const conn = await wire.dial("127.0.0.1", port, 10_000);
  const welcome = mode === "shared" ? await wire.handshake(conn, { token: TOKEN, jobs: 1, slots: 1, hostname: `fake-${index}` }).then((h) => h.welcome) : await noSharedHandshake(wire, conn, index);
  const { corpus_dir: corpus, stage_root: stageRoot } = welcome.explore;
  const request = (frame) => conn.request(frame, wire.messages.CoordinatorReply, 60_000);
  let draining = false;
  let putsAhead = 0;
  try {
    for (;;) {
      let reply = await request(draining ? { type: "heartbeat", ids: [] } : { type: "want", slots: 1 });
      if (reply.type === "task") {
        for (const t of reply.tasks) {
          const input = mode === "shared" ? readFileSync(join(corpus, t.hash)) : Buffer.from(t.input.data, "base64");
          const result = { type: "result", task_id: t.task_id, fence: t.fence, input_hash: sha256(input), new_hashes: [], num_generated: 0, staged_bytes: 0, staging_id: "", retcode: 0, elapsed: 0.001, protocol_error: "", budget: null, detail: null, finding: null };
          if (input.length < o.length) {
            const child = Buffer.concat([input, randomBytes(1)]);
            const stageId = randomBytes(16).toString("hex");
            const hash = sha256(child);
            if (mode === "shared") {
              mkdirSync(join(stageRoot, stageId));
              writeFileSync(join(stageRoot, stageId, hash), child);
            } else {
              // Sent ahead of its ack, as a real worker does (worker/loop.ts); the ack is read before the result's.
              conn.send({ type: "put", unit: t.task_id, path: `${stageId}/${hash}`, size: child.length, offset: 0, data: child.toString("base64"), sha256: hash });
              putsAhead++;
            }
            Object.assign(result, { new_hashes: [hash], num_generated: 1, staged_bytes: child.length, staging_id: stageId });
          }
          conn.send(result);
          for (; putsAhead > 0; putsAhead--) {
            const put = await conn.receive(wire.messages.CoordinatorReply, 60_000);
            if (put.type !== "ack") throw new Error(`fake worker ${index}: '${put.type}' in reply to a put${put.reason ? `: ${put.reason}` : ""}`);
          }
          reply = await conn.receive(wire.messages.CoordinatorReply, 60_000);
          const at = performance.timeOrigin + performance.now();
          if (reply.type !== "ack") throw new Error(`fake worker ${index}: '${reply.type}' in reply to a result${reply.reason ? `: ${reply.reason}` : ""}`);
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
        await request({ type: "stop_ack", token: reply.token });
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

async function startMaster(dir, common, target, prof = []) {
  const proc = startProcess([process.execPath, ...prof, CLI, "explore", ...common, "--port", "0", "--bind", "127.0.0.1", "--token", TOKEN, "--", ...target], { cwd: dir, env: process.env });
  const port = Number((await proc.waitFor(/listening on 127\.0\.0\.1:(\d+)/, 60_000, "the master to listen"))[1]);
  return { proc, port };
}

async function fakeLevel(o, wire, dir, workers, mode, level) {
  mkdirSync(dir, { recursive: true });
  writeSeeds(join(dir, "seeds"), o.seeds, 4);
  const prof = o.cpuProf ? ["--cpu-prof", "--cpu-prof-dir", join(resolve(o.cpuProf), level, "master")] : [];
  const { proc, port } = await startMaster(dir, ["-i", join(dir, "seeds"), "-o", join(dir, "corpus"), "-j", "0", "--max-idle", "30", "-t", "20"], ["/bin/true", "@@"], prof);
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
  const running = [];
  for (let i = 0; i < workers; i++) running.push(fakeWorker(wire, port, i, mode, o, clock, stats).catch((err) => ({ error: err })));
  await Promise.race([firstResult, sleep(60_000)]);
  // The master's CPU over the window (the window's clock starts at the first committed result; none within a minute: no window).
  const until = (at) => sleep(Number.isFinite(at) ? Math.max(0, at - (performance.timeOrigin + performance.now())) : 0);
  await until(clock.from);
  const cpuFrom = cpuOf(proc.pid);
  await until(clock.to);
  const cpuTo = cpuOf(proc.pid);
  await sleep(250);
  proc.child.kill("SIGINT");
  await proc.done;
  const errors = (await Promise.all(running)).filter((x) => x?.error).map((x) => x.error.message);
  if (errors.length) console.log(`  errors: ${errors.slice(0, 3).join("; ")}\n${proc.output().split("\n").slice(-15).join("\n")}`);
  const masterMsPerTask = cpuFrom && cpuTo ? ((cpuTo.own - cpuFrom.own) * 1000) / stats.inWindow : NaN;
  return { tasksPerSec: stats.inWindow / o.window, committed: stats.committed, errors: errors.slice(0, 3), masterMsPerTask };
}

// ---- (b) real workers -----------------------------------------------------------------------

const TRIVIAL_C = `#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifndef BURN_MS
#define BURN_MS 0
#endif
int main(int argc, char **argv) {
  /* A target of realistic cost: BURN_MS of CPU before the real work. */
  clock_t until = clock() + (clock_t)BURN_MS * (CLOCKS_PER_SEC / 1000);
  volatile unsigned spin = 0;
  while (BURN_MS > 0 && clock() < until) spin++;
  char buf[64]; size_t n = 0; FILE *f = fopen(argv[1], "rb"); if (!f) return 1;
  n = fread(buf, 1, sizeof buf - 1, f); fclose(f);
  if (n >= 14) return 0;
  const char *out = getenv("SYMCC_OUTPUT_DIR"); if (!out) return 0;
  char path[4096]; snprintf(path, sizeof path, "%s/child", out);
  FILE *g = fopen(path, "wb"); if (!g) return 1;
  buf[n] = 'a'; fwrite(buf, 1, n + 1, g); fclose(g); return 0;
}
`;

function buildTarget(dir, burnMs) {
  writeFileSync(join(dir, "trivial.c"), TRIVIAL_C);
  const r = spawnSync("cc", ["-O2", `-DBURN_MS=${burnMs}`, "-o", join(dir, "trivial"), join(dir, "trivial.c")], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`cc failed: ${r.stderr}`);
  return join(dir, "trivial");
}

/** A worker: in `dir` (shared), or in `own` inside a mount namespace where `hidden` is an empty tmpfs (no-shared). */
function startWorker(port, mode, dir, own, hidden, prof) {
  const worker = [process.execPath, ...prof, CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", TOKEN, "--slots", "1", "-j", "1"];
  if (mode === "shared") return startProcess(worker, { cwd: dir, env: process.env });
  return startProcess(["unshare", "-m", "sh", "-c", 'mount -t tmpfs fuzzfleet-hidden "$1" && cd "$2" && shift 2 && exec "$@"', "sh", hidden, own, ...worker], { cwd: own, env: process.env });
}

/** CPU seconds of a live process: its own (user + system) and its reaped children's, from /proc; null once it is gone. */
function cpuOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime, stime, cutime, cstime are fields 14-17 of stat: 11-14 after the command name.
    return { own: (Number(f[11]) + Number(f[12])) / TICKS, children: (Number(f[13]) + Number(f[14])) / TICKS };
  } catch {
    return null;
  }
}
const TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;

/** Samples the CPU of `pids` every 100 ms; stop() returns the last sample of each (a process's CPU up to its last 100 ms). */
function cpuSampler(pids) {
  const last = new Map();
  const sample = () => {
    for (const pid of pids) {
      const c = cpuOf(pid);
      if (c !== null) last.set(pid, c);
    }
  };
  sample();
  const timer = setInterval(sample, 100);
  return {
    stop: () => {
      clearInterval(timer);
      return pids.map((pid) => last.get(pid) ?? { own: 0, children: 0 });
    },
  };
}

async function realLevel(o, dir, target, own, workers, mode, level) {
  mkdirSync(dir, { recursive: true });
  copyFileSync(target, join(dir, "trivial"));
  writeSeeds(join(dir, "seeds"), o.realSeeds, 3);
  const stats = join(dir, "stats.json");
  const prof = (who) => (o.cpuProf ? ["--cpu-prof", "--cpu-prof-dir", join(resolve(o.cpuProf), level, who)] : []);
  const { proc, port } = await startMaster(dir, ["-i", join(dir, "seeds"), "-o", join(dir, "corpus"), "-j", "0", "--max-idle", String(o.maxIdle), "-t", "20", "--stats-json", stats], ["./trivial", "@@"], prof("master"));
  const ws = [];
  for (let i = 0; i < workers; i++) ws.push(startWorker(port, mode, dir, own, dirname(dirname(dir)), prof("workers")));
  const sampler = cpuSampler([proc.pid, ...ws.map((w) => w.pid)]);
  const end = await proc.done;
  const wends = await Promise.all(ws.map((w) => w.done));
  const [master, ...wcpu] = sampler.stop();
  if (end.code !== 0) throw new Error(`master exited ${end.code ?? end.signal}:\n${proc.output()}`);
  const bad = wends.findIndex((e) => e.code !== 0);
  if (bad >= 0) throw new Error(`a ${mode} worker exited ${wends[bad].code}:\n${ws[bad].output()}`);
  const s = JSON.parse(readFileSync(stats, "utf8"));
  const perTask = (seconds) => (seconds * 1000) / s.observations;
  return {
    observations: s.observations,
    tasksPerSec: s.observations / (s.elapsed_seconds - o.maxIdle),
    masterMsPerTask: perTask(master.own),
    workerMsPerTask: perTask(wcpu.reduce((a, c) => a + c.own, 0)),
    targetMsPerTask: perTask(wcpu.reduce((a, c) => a + c.children, 0)),
  };
}

async function part(name, o, scratch, run) {
  const rows = [];
  let n = 0;
  for (let round = 0; round < o.rounds; round++) {
    for (const w of o.workers) {
      for (const mode of round % 2 === 0 ? MODES : [...MODES].reverse()) {
        const load = loadavg()[0];
        const dir = join(scratch, name, `run-${++n}`);
        const r = await run(dir, w, mode, `${name}-${w}-${mode}-${round + 1}`);
        rows.push({ round: round + 1, workers: w, mode, loadBefore: load, ...r });
        const cpu = r.workerMsPerTask === undefined ? ` (master CPU ms/task ${f2(r.masterMsPerTask)})` : ` (CPU ms/task: master ${f2(r.masterMsPerTask)}, worker ${f2(r.workerMsPerTask)}, target ${f2(r.targetMsPerTask)})`;
        console.log(`  ${name}, ${w} workers, ${mode}: ${f1(r.tasksPerSec)} tasks/s${cpu}`);
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
  const verdicts = o.workers.map((w) => {
    // A round whose workers failed (printed with its errors) measures nothing.
    const ok = (mode) => rows.filter((r) => r.workers === w && r.mode === mode && !(r.errors?.length > 0));
    const rate = (mode) => median(ok(mode).map((r) => r.tasksPerSec));
    const ratio = rate("no-shared") / rate("shared");
    const cpu = (mode, key) => (rows[0][key] === undefined ? null : median(ok(mode).map((r) => r[key])));
    const cpuPerTask = Object.fromEntries(MODES.map((mode) => [mode, { master: cpu(mode, "masterMsPerTask"), worker: cpu(mode, "workerMsPerTask"), target: cpu(mode, "targetMsPerTask") }]));
    return { workers: w, shared: rate("shared"), noShared: rate("no-shared"), ratio, verdict: ratio >= TARGET_RATIO ? "PASS" : "MISS", cpuPerTask };
  });
  const withCpu = rows[0].workerMsPerTask !== undefined;
  const cpuCols = (r) => (withCpu ? [f2(r.masterMsPerTask), f2(r.workerMsPerTask), f2(r.targetMsPerTask)] : [f2(r.masterMsPerTask)]);
  printTable([
    ["workers", "mode", "round", "tasks/s", "load before", "master CPU ms/task", ...(withCpu ? ["workers' own", "targets'"] : [])],
    ...rows.map((r) => [r.workers, r.mode, r.round, f1(r.tasksPerSec), f2(r.loadBefore), ...cpuCols(r)]),
  ]);
  for (const v of verdicts) {
    console.log(`${name}, ${v.workers} workers: shared ${f1(v.shared)}, no-shared ${f1(v.noShared)} tasks/s (medians); ratio ${f2(v.ratio)} — ${v.verdict} (target >= ${TARGET_RATIO})`);
    const c = v.cpuPerTask;
    if (c.shared.worker !== null) console.log(`  CPU ms/task (medians), shared / no-shared: master ${f2(c.shared.master)} / ${f2(c["no-shared"].master)}, workers ${f2(c.shared.worker)} / ${f2(c["no-shared"].worker)}, targets ${f2(c.shared.target)} / ${f2(c["no-shared"].target)}`);
    else console.log(`  master CPU ms/task (medians), shared / no-shared: ${f2(c.shared.master)} / ${f2(c["no-shared"].master)}`);
  }
  return { rows, verdicts };
}

const o = options(process.argv.slice(2));
benchmarkMain("explore-no-shared", o, async (scratch) => {
  const out = { root: ROOT };
  if (o.part !== "real") {
    const wire = await loadWire();
    console.log("(a) fake workers: shared vs no-shared, one master, no target");
    out.fake = await part("fake", o, scratch, (dir, w, mode, level) => fakeLevel(o, wire, dir, w, mode, level));
  }
  if (o.part !== "fake") {
    console.log("(b) real workers (fuzzfleet worker --slots 1, trivial C target): shared vs no-shared (unshare -m)");
    const tdir = join(scratch, "target");
    mkdirSync(tdir, { recursive: true });
    const target = buildTarget(tdir, o.targetMs);
    // The no-shared workers' own directory, outside the hidden one, with their own copy of the target.
    const own = mkdtempSync(join("/var/tmp", "fuzzfleet-own-"));
    try {
      copyFileSync(target, join(own, "trivial"));
      out.real = await part("real", o, scratch, (dir, w, mode, level) => realLevel(o, dir, target, own, w, mode, level));
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  }
  return out;
});
