// explore-fleet, part (b): real `fuzzfleet worker` processes running a C target of realistic cost,
// against one master or two, beside the same number of direct loops running that target.
//
// The target is built here: it burns about --target-ms of CPU per run in a busy loop over its
// input's bytes (calibrated on this machine, then measured and printed), writes one child (the
// input plus one byte) until the input is --real-length bytes long, and appends the time its run
// ended (CLOCK_MONOTONIC) to a run log. --target-ms 0 is the trivial target (no busy loop, about
// 1 ms of process cost): it measures fuzzfleet's per-task machinery, not a real campaign.
//
// One level = (target, masters, workers). The explore side: masters as part (a) starts them (a
// root with --masters 2 --port 0 and a --join submaster with its own port), `fuzzfleet worker
// --slots 1 -j 1` processes split between the masters, a frontier far larger than the window
// needs. The window opens --real-warmup seconds after the first run ends and lasts --real-window
// seconds; then the masters are interrupted (SIGINT, exit 6). The direct side: as many loops as
// workers (a small C driver: posix_spawn into a new session as fuzzfleet starts a target, waitpid,
// again), each running the target on a file, counted from the same run log over a window of the
// same length. Within a round the two sides run back to back; their order alternates from round to
// round. Everything a task creates (corpus, stages, the workers' scratch) is under --tmpdir.
//   tasks/s        runs of the target that ended inside the window / the window
//   own CPU/task   utime + stime from /proc/<pid>/stat (a process's own threads; a reaped child's
//                  CPU goes to cutime/cstime, so the target's is excluded) of every master and
//                  every worker, sampled when the window opens and when it closes, / those runs
// Every run the explore side logged must be one the masters committed, or one still in flight
// when they were interrupted: the root's --stats-json observations are printed beside the runs.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { CLI, f1, f2, median, printTable, processCpuSeconds, sleep, startProcess } from "./common.mjs";

export const TARGET_REAL_RATIO = 0.95;
export const TARGET_OWN_CPU_MS = 1;
const SEED_BYTES = 3;

// ITERS iterations of FNV-1a over the input's bytes, round after round: a multiply chain whose
// result picks the child's last byte, so the compiler can neither drop it nor fold it.
const TARGET_C = `#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
  unsigned char buf[4096]; size_t n = 0; FILE *f = fopen(argv[1], "rb"); if (!f) return 1;
  n = fread(buf, 1, sizeof buf - 1, f); fclose(f);
  uint64_t h = 1469598103934665603ULL;
  if (n > 0) for (long r = 0, rounds = (long)ITERS / (long)n; r < rounds; r++)
    for (size_t i = 0; i < n; i++) { h ^= buf[i]; h *= 1099511628211ULL; }
  int rc = 0;
  if (n < MAXLEN) {
    const char *out = getenv("SYMCC_OUTPUT_DIR");
    if (out) {
      char path[4096]; snprintf(path, sizeof path, "%s/child", out);
      FILE *g = fopen(path, "wb");
      if (!g) rc = 1;
      else { buf[n] = (unsigned char)('a' + h % 26); fwrite(buf, 1, n + 1, g); fclose(g); }
    }
  }
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  char line[32]; int k = snprintf(line, sizeof line, "%lld\\n", (long long)t.tv_sec * 1000000000LL + t.tv_nsec);
  int fd = open(RUNLOG, O_WRONLY | O_APPEND | O_CREAT, 0600);
  if (fd < 0 || write(fd, line, k) != k) rc = 1;
  if (fd >= 0) close(fd);
  return rc;
}
`;

// driver SECONDS|-COUNT TARGET INPUT OUTDIR: runs TARGET INPUT with SYMCC_OUTPUT_DIR=OUTDIR again
// and again, for SECONDS or COUNT runs; prints the runs and the children's CPU seconds. Each run
// leads its own session, as fuzzfleet starts a target: with the scheduler's autogroups (Linux,
// sched_autogroup_enabled) a session is a group with its own share of the CPU, so on a busy
// machine a target in the driver's session would get less than one fuzzfleet starts.
const DRIVER_C = `#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
int main(int argc, char **argv) {
  if (argc != 5) return 2;
  double limit = atof(argv[1]);
  char env0[4200]; snprintf(env0, sizeof env0, "SYMCC_OUTPUT_DIR=%s", argv[4]);
  char *envp[] = { env0, NULL };
  char *args[] = { argv[2], argv[3], NULL };
  posix_spawnattr_t attr; posix_spawnattr_init(&attr); posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
  long runs = 0;
  for (;;) {
    if (limit < 0 && runs >= (long)-limit) break;
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (limit >= 0 && (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9 >= limit) break;
    pid_t pid; int st;
    if (posix_spawn(&pid, argv[2], NULL, &attr, args, envp) != 0) return 3;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 4;
    runs++;
  }
  struct rusage ru; getrusage(RUSAGE_CHILDREN, &ru);
  printf("%ld %.6f\\n", runs, ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
  return 0;
}
`;

function cc(dir, name, source, defines = []) {
  writeFileSync(join(dir, `${name}.c`), source);
  const r = spawnSync("cc", ["-O2", ...defines, "-o", join(dir, name), join(dir, `${name}.c`)], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`cc ${name}.c failed: ${r.stderr}`);
  return join(dir, name);
}

/** Runs the target `count` times through the driver; its CPU seconds per run (children's utime + stime). */
function cpuPerRun(driver, target, input, outDir, count) {
  mkdirSync(outDir, { recursive: true });
  const r = spawnSync(driver, [String(-count), target, input, outDir], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`the driver exited ${r.status ?? r.signal} running ${target}: ${r.stderr}`);
  const [runs, cpu] = r.stdout.trim().split(" ").map(Number);
  return cpu / runs;
}

/**
 * Builds the target for `ms` of CPU per run (0: the trivial one): measures the cost of a run
 * without the busy loop and of a loop of known length, sizes the loop, rebuilds and measures again.
 */
function buildTarget(dir, driver, ms, length) {
  const log = join(dir, "runs.log");
  const input = join(dir, "direct-input");
  writeFileSync(input, "x".repeat(Math.max(1, length >> 1)));
  const build = (iters) => cc(dir, `target-${ms}ms`, TARGET_C, [`-DITERS=${iters}`, `-DMAXLEN=${length}`, `-DRUNLOG=${JSON.stringify(log)}`]);
  const out = join(dir, "calibration-out");
  let iters = 0;
  if (ms > 0) {
    const base = cpuPerRun(driver, build(0), input, out, 40);
    const probeIters = 4_000_000;
    const probe = cpuPerRun(driver, build(probeIters), input, out, 10);
    const perIter = Math.max(1e-12, (probe - base) / probeIters);
    iters = Math.max(0, Math.round((ms / 1000 - base) / perIter));
  }
  const path = build(iters);
  const measured = cpuPerRun(driver, path, input, out, ms > 0 ? 25 : 200);
  rmSync(log, { force: true });
  return { ms, length, iters, path, log, input, cpuMs: measured * 1000, label: ms > 0 ? `${ms} ms target` : "trivial target (~1 ms): says little about real campaigns" };
}

/** The end times (seconds, CLOCK_MONOTONIC) of the runs logged so far. */
function loggedRuns(log) {
  if (!existsSync(log)) return [];
  return readFileSync(log, "utf8").split("\n").filter(Boolean).map((line) => Number(line) / 1e9);
}

const monotonicSeconds = () => Number(process.hrtime.bigint()) / 1e9;
const countIn = (times, from, to) => times.filter((t) => t >= from && t < to).length;

async function waitForFirstRun(log, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(log) || statSync(log).size === 0) {
    if (Date.now() > deadline) throw new Error(`no run of the target logged within ${timeoutMs / 1000}s (${what})`);
    await sleep(50);
  }
}

/** Sum of the own CPU seconds (utime + stime) of live processes; a process gone counts as missing. */
function ownCpu(pids) {
  const each = pids.map(processCpuSeconds);
  if (each.some((c) => c === null)) throw new Error("a fuzzfleet process ended inside the measured window");
  return each.reduce((a, b) => a + b, 0);
}

/**
 * Seeds (one chain of tasks each) for a frontier far larger than the window needs: twice the runs
 * the machine could do in it. Each chain has one task ready at a time, and with two masters a child
 * waits for its owner's corpus scan (a quarter second) half the time: 16 chains per worker keep
 * every worker fed. Few seeds, long chains: a master lists its input directory about every second.
 */
function seedCount(o, target, workers) {
  const chain = target.length - SEED_BYTES + 1;
  const limit = Math.min(workers, cpus().length) / (target.cpuMs / 1000);
  return Math.max(Math.ceil((2 * limit * (o.realWarmup + o.realWindow + 5)) / chain), 16 * workers);
}

async function exploreSide(o, fleet, dir, target, masters, workers) {
  mkdirSync(dir, { recursive: true });
  rmSync(target.log, { force: true });
  const seeds = seedCount(o, target, workers);
  fleet.writeSeeds(join(dir, "seeds"), seeds, SEED_BYTES);
  const stats = join(dir, "stats.json");
  const common = ["-i", join(dir, "seeds"), "-o", join(dir, "corpus"), "-j", "0", "--max-idle", "1", "-t", "10", "--status-every", "0"];
  const procs = await fleet.startMasters(CLI, dir, masters, common, ["--", target.path, "@@"], { vars: process.env, rootArgs: ["--stats-json", stats] });
  // A worker's scratch (os.tmpdir()) goes beside the campaign, on the file system --tmpdir chose:
  // creating and removing files there is a large part of a task's cost, and it is that file system's.
  const workerEnv = { ...process.env, TMPDIR: dir };
  const ws = [];
  for (let i = 0; i < workers; i++) {
    const { port } = procs[i % procs.length];
    ws.push(startProcess([process.execPath, CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", fleet.token, "--slots", "1", "-j", "1"], { cwd: dir, env: workerEnv }));
  }
  const pids = { masters: procs.map(({ proc }) => proc.pid), workers: ws.map((w) => w.pid) };
  try {
    await waitForFirstRun(target.log, 120_000, `${masters} master(s), ${workers} workers`);
    await sleep(o.realWarmup * 1000);
    const from = monotonicSeconds();
    const cpu0 = { masters: ownCpu(pids.masters), workers: ownCpu(pids.workers) };
    await sleep(o.realWindow * 1000);
    const cpu1 = { masters: ownCpu(pids.masters), workers: ownCpu(pids.workers) };
    const to = monotonicSeconds();
    for (const { proc } of procs) proc.child.kill("SIGINT");
    const ends = await Promise.all(procs.map(({ proc }) => proc.done));
    await Promise.all(ws.map((w) => w.done));
    if (ends[0].code !== 6) throw new Error(`the root exited ${ends[0].code ?? ends[0].signal}, not 6 (interrupted):\n${procs[0].proc.output()}`);
    const runs = loggedRuns(target.log);
    const tasks = countIn(runs, from, to);
    const s = JSON.parse(readFileSync(stats, "utf8"));
    return {
      seeds,
      frontier: seeds * (target.length - SEED_BYTES + 1),
      tasks,
      tasksPerSec: tasks / (to - from),
      runsLogged: runs.length,
      observations: s.observations,
      ownMsPerTask: {
        masters: ((cpu1.masters - cpu0.masters) * 1000) / tasks,
        workers: ((cpu1.workers - cpu0.workers) * 1000) / tasks,
        total: ((cpu1.masters - cpu0.masters + cpu1.workers - cpu0.workers) * 1000) / tasks,
      },
      exits: ends.map((e) => e.code ?? e.signal),
    };
  } finally {
    for (const p of [...procs.map(({ proc }) => proc), ...ws]) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
  }
}

/** `loops` drivers running the target on a file; the runs that ended in a window of --real-window seconds, per second. */
async function directSide(o, dir, driver, target, loops) {
  rmSync(target.log, { force: true });
  const lead = 0.5;
  for (let i = 0; i < loops; i++) mkdirSync(join(dir, `direct-out-${i}`), { recursive: true });
  const procs = [];
  const started = monotonicSeconds();
  for (let i = 0; i < loops; i++) procs.push(startProcess([driver, String(lead + o.realWindow + 0.5), target.path, target.input, join(dir, `direct-out-${i}`)], { cwd: dir, env: process.env }));
  const ends = await Promise.all(procs.map((p) => p.done));
  const bad = ends.findIndex((e) => e.code !== 0);
  if (bad >= 0) throw new Error(`a direct loop exited ${ends[bad].code ?? ends[bad].signal}: ${procs[bad].output()}`);
  const from = started + lead;
  return countIn(loggedRuns(target.log), from, from + o.realWindow) / o.realWindow;
}

export async function realPart(o, scratch, fleet) {
  const dir = join(scratch, "real");
  mkdirSync(dir, { recursive: true });
  const driver = cc(dir, "driver", DRIVER_C);
  const targets = o.targetMs.map((ms) => {
    const t = buildTarget(dir, driver, ms, o.realLength);
    console.log(`  ${t.label}: ${f2(t.cpuMs)} ms of CPU per run measured (${t.iters.toLocaleString("en-US")} loop iterations; children up to ${t.length} bytes)`);
    return t;
  });
  const levels = targets.flatMap((t) => o.realMasters.flatMap((m) => o.realWorkers.map((w) => ({ t, m, w }))));
  const rows = [];
  let n = 0;
  for (let round = 0; round < o.rounds; round++) {
    for (const { t, m, w } of round % 2 === 0 ? levels : [...levels].reverse()) {
      n++;
      const load = loadavg()[0];
      const sides = round % 2 === 0 ? ["explore", "direct"] : ["direct", "explore"];
      let real;
      let direct;
      for (const side of sides) {
        if (side === "explore") real = await exploreSide(o, fleet, join(dir, `level-${n}`), t, m, w);
        else direct = await directSide(o, dir, driver, t, w);
      }
      if (!o.keep) rmSync(join(dir, `level-${n}`), { recursive: true, force: true });
      const row = { round: round + 1, targetMs: t.ms, targetCpuMs: t.cpuMs, label: t.label, masters: m, workers: w, loadBefore: load, ...real, directPerSec: direct, ratio: real.tasksPerSec / direct };
      rows.push(row);
      if (row.runsLogged > row.frontier / 2) console.log(`  note: ${row.runsLogged} of a frontier of ${row.frontier} ran: it may have thinned inside the window (raise --real-length)`);
      console.log(
        `  ${t.ms > 0 ? `${t.ms} ms` : "trivial"} target, ${m} master(s), ${w} worker(s): ${f1(row.tasksPerSec)} tasks/s, direct loops ${f1(direct)} runs/s, ratio ${f2(row.ratio)}, ` +
          `own CPU ${f2(row.ownMsPerTask.masters)} + ${f2(row.ownMsPerTask.workers)} = ${f2(row.ownMsPerTask.total)} ms/task (masters + workers); ` +
          `${row.runsLogged} runs logged, ${row.observations} committed, frontier ${row.frontier}`,
      );
    }
  }
  console.log("\n(b) real workers (fuzzfleet worker --slots 1) vs direct loops of the same target; own CPU from /proc (target excluded)");
  printTable([
    ["target", "target CPU", "masters", "workers", "round", "tasks/s", "direct runs/s", "ratio", "own CPU ms/task (masters+workers)", "load before"],
    ...rows.map((r) => [r.targetMs > 0 ? `${r.targetMs} ms` : "trivial", `${f2(r.targetCpuMs)} ms`, r.masters, r.workers, r.round, f1(r.tasksPerSec), f1(r.directPerSec), f2(r.ratio), `${f2(r.ownMsPerTask.masters)}+${f2(r.ownMsPerTask.workers)}=${f2(r.ownMsPerTask.total)}`, f2(r.loadBefore)]),
  ]);
  const verdicts = [];
  for (const { t, m, w } of levels) {
    const mine = rows.filter((r) => r.targetMs === t.ms && r.masters === m && r.workers === w);
    const ratio = median(mine.map((r) => r.ratio));
    const own = median(mine.map((r) => r.ownMsPerTask.total));
    const v = { targetMs: t.ms, masters: m, workers: w, ratio, ownMsPerTask: own };
    if (t.ms > 0) Object.assign(v, { ratioVerdict: ratio >= TARGET_REAL_RATIO ? "PASS" : "MISS", ownCpuVerdict: own <= TARGET_OWN_CPU_MS ? "PASS" : "MISS" });
    verdicts.push(v);
    console.log(
      `${t.label}, ${m} master(s), ${w} workers: median ratio ${f2(ratio)}${v.ratioVerdict ? ` ${v.ratioVerdict} (target ${TARGET_REAL_RATIO})` : ""}, ` +
        `own CPU ${f2(own)} ms/task${v.ownCpuVerdict ? ` ${v.ownCpuVerdict} (target ${TARGET_OWN_CPU_MS})` : ""}`,
    );
  }
  return { targets: targets.map(({ ms, length, iters, cpuMs, label }) => ({ ms, length, iters, cpuMs, label })), rows, verdicts, targetRatio: TARGET_REAL_RATIO, targetOwnCpuMs: TARGET_OWN_CPU_MS };
}
