// Runs one child command (a generator chunk, a target execution) in its own process group.
//
// Contract of runChild:
// - The child is the leader of a new process group (pgid = its pid), so a Ctrl-C at the terminal
//   reaches only fuzzfleet. stdout and stderr are appended to `logPath` through a file descriptor
//   the child inherits; nothing has to drain a pipe.
// - On the hard timeout or on abort, the whole group gets SIGTERM and, `killGraceMs` later,
//   SIGKILL if the leader is still there.
// - Whatever the outcome, when the promise settles no live member of the group is left: stragglers
//   (background grandchildren) get SIGTERM, then SIGKILL after the grace period.
// - The group does not outlive this process either, however it ends (SIGKILL included): from the
//   start of the child until runChild has cleared its group, the group is registered with the
//   child watchdog (child-watchdog.ts), which sends it SIGTERM, then SIGKILL 2 s later, once this
//   process is gone. The registration is released only after the group was found empty, so the
//   watchdog never signals a recycled number. Not covered: processes the child moves into another
//   process group or session (setsid), and a SIGKILL landing between the child's start and its
//   registration (with the native starter, two consecutive system calls; see docs/architecture.md,
//   Decisions).
// - The child's environment (`env`, else process.env) never holds fuzzfleet's secrets: the starter
//   removes them (secrets.ts), so a generator or target that prints its environment shows no token.
// - If no watchdog can be started, the child is not started either: outcome "error".
// - It never rejects because the child could not start (missing program, no permission, log or
//   stdin file unusable): that is outcome "error" with a message naming the thing. It rejects only
//   for invalid options and when `onSpawn` throws (after the group has been cleared).
// - Every wait is bounded except the wait for the child itself while no timeout is configured
//   (hardTimeoutMs = Infinity) and no abort arrives; after SIGKILL the leader gets KILL_SETTLE_MS
//   to disappear before runChild gives up on it and says so in the log.

import assert from "node:assert/strict";
import { closeSync, constants as fsConstants, existsSync, fstatSync, openSync } from "node:fs";
import { access, mkdir, open, readdir, readFile, stat, type FileHandle } from "node:fs/promises";
import { setPriority } from "node:os";
import { dirname, resolve as resolvePath } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { defaultStarter, startChild, type Started, type Starter } from "./native-spawn.ts";

export type ChildOutcome = "complete" | "timeout" | "interrupted" | "error";

export interface RunChildOptions {
  /** argv[0] is the program, looked up on PATH (of `env`) as spawn does. */
  argv: readonly string[];
  cwd?: string;
  /** Default: process.env. Either way the child gets it without fuzzfleet's secrets (secrets.ts). */
  env?: NodeJS.ProcessEnv;
  /**
   * stdout and stderr are appended here; the file and its parent directory are created if missing.
   * null discards them (/dev/null, opened by the starter without a round trip through the pool).
   */
  logPath: string | null;
  /** Wall-clock limit on the monotonic clock, in ms; Infinity for none. */
  hardTimeoutMs: number;
  /** 0 or undefined leaves the priority alone; otherwise the child's niceness, set right after spawn. */
  nice?: number;
  /** Run through `ionice -c3` (idle I/O class) when `ionice` is on PATH. */
  idleIo?: boolean;
  /** Abort = interruption: SIGTERM to the group, then SIGKILL after killGraceMs. */
  signal?: AbortSignal;
  /** Default 20 000 ms. */
  killGraceMs?: number;
  /** "ignore" (default: the child reads an empty stdin) or the path of a regular file fed on stdin. */
  stdin?: "ignore" | string;
  /** Called synchronously with the child's pid (= its process group id) right after it started. */
  onSpawn?: (pid: number) => void;
  /** How the child is started (see native-spawn.ts); default: FUZZFLEET_SPAWN, else native if it works. */
  starter?: Starter;
}

export interface ChildResult {
  /** complete = the child exited on its own, before the timeout and without abort. */
  outcome: ChildOutcome;
  /** null if killed by a signal or never started. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** Monotonic time from spawn to the leader's exit; 0 if it never started. */
  seconds: number;
  /** For outcome "error": why the child could not start. */
  error?: string;
}

export const DEFAULT_KILL_GRACE_MS = 20_000;
/** How long SIGKILLed processes get to disappear (a process in uninterruptible sleep may not). */
const KILL_SETTLE_MS = 5_000;
/** setTimeout cannot wait longer than this in one go. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const POLL_FIRST_MS = 10;
const POLL_MAX_MS = 200;

export async function runChild(options: RunChildOptions): Promise<ChildResult> {
  checkOptions(options);
  const { signal } = options;
  if (signal?.aborted) return notStarted("interrupted");

  const env = options.env ?? process.env;
  const program = options.argv[0];
  const cwd = options.cwd;

  let command = [...options.argv];
  if (options.idleIo) {
    const ionice = await findIonice();
    if (ionice !== null) {
      // Through the wrapper a missing program would surface as ionice's exit status 127; resolving
      // it here keeps that case an "error" outcome, exactly as without the wrapper.
      const found = await resolveProgram(program, env.PATH, cwd ?? process.cwd());
      if (typeof found !== "string") return notStarted("error", await startProblem(program, cwd, found));
      command = [ionice, "-c3", found, ...options.argv.slice(1)];
    }
  }

  const files = await openStdio(options);
  if (typeof files === "string") return notStarted("error", files);
  const { log, input } = files;
  try {
    if (signal?.aborted) return notStarted("interrupted");
    return await supervise(options, command, log, input);
  } finally {
    if (input !== null) closeQuietly(input);
    await log?.close().catch(() => {});
  }
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // Nothing useful to do: the descriptor is gone either way.
  }
}

async function supervise(
  options: RunChildOptions,
  command: string[],
  log: FileHandle | null,
  input: number | null,
): Promise<ChildResult> {
  const { signal } = options;
  const program = options.argv[0];
  const graceMs = options.killGraceMs ?? DEFAULT_KILL_GRACE_MS;

  const t0 = performance.now();
  let child: Started;
  try {
    child = startChild(options.starter ?? defaultStarter(), command, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: [input, log?.fd ?? null, log?.fd ?? null],
    });
  } catch (err) {
    return notStarted("error", await startProblem(program, options.cwd, err));
  }
  const { exited, pid } = child;
  if (pid === undefined) {
    const end = await exited;
    return notStarted("error", await startProblem(program, options.cwd, "error" in end ? end.error : undefined));
  }

  // Everything from here to the listener registration runs in one synchronous stretch, so the
  // leader cannot be reaped and an abort cannot be missed in between.
  const notes: string[] = [];
  if (options.nice) {
    try {
      setPriority(pid, options.nice);
    } catch (err) {
      if (errorCode(err) !== "ESRCH") notes.push(`could not set nice ${options.nice} on pid ${pid}: ${errorText(err)}`);
    }
  }

  const timers = new TimerSet();
  let stopReason: "timeout" | "interrupted" | null = null;
  let termSentAt: number | null = null;
  let killSent = false;
  let giveUp!: () => void;
  const gaveUp = new Promise<"gave-up">((resolve) => (giveUp = () => resolve("gave-up")));
  const stop = (reason: "timeout" | "interrupted") => {
    if (stopReason !== null) return;
    stopReason = reason;
    termSentAt = performance.now();
    signalGroup(pid, "SIGTERM");
    timers.after(graceMs, () => {
      killSent = true;
      signalGroup(pid, "SIGKILL");
      timers.after(KILL_SETTLE_MS, giveUp);
    });
  };
  const onAbort = () => stop("interrupted");
  signal?.addEventListener("abort", onAbort, { once: true });
  if (Number.isFinite(options.hardTimeoutMs)) armDeadline(timers, t0 + options.hardTimeoutMs, () => stop("timeout"));

  let callbackFailed = false;
  let callbackError: unknown;
  try {
    options.onSpawn?.(pid);
  } catch (err) {
    callbackFailed = true;
    callbackError = err;
    stop("interrupted");
  }

  try {
    const end = await Promise.race([exited, gaveUp]);
    const seconds = (performance.now() - t0) / 1000;
    timers.clear();
    signal?.removeEventListener("abort", onAbort);
    if (end === "gave-up") notes.push(`pid ${pid} did not exit within ${KILL_SETTLE_MS} ms of SIGKILL`);

    const cleared = await clearGroup(pid, graceMs, killSent ? -Infinity : termSentAt);
    // Only now: a released number may be recycled, and the watchdog must never signal it then.
    child.release();
    if (!cleared) notes.push(`members of process group ${pid} were still alive ${KILL_SETTLE_MS} ms after SIGKILL`);
    if (notes.length > 0 && log !== null) await log.appendFile(notes.map((n) => `fuzzfleet: ${n}\n`).join("")).catch(() => {});
    if (callbackFailed) throw callbackError;

    const exit = end !== "gave-up" && "code" in end ? end : { code: null, signal: null };
    return { outcome: stopReason ?? "complete", exitCode: exit.code, signal: exit.signal, seconds };
  } finally {
    timers.clear();
    signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * Makes sure no live member of process group `pgid` remains. `termSentAt` is when SIGTERM already
 * went to the group (-Infinity if SIGKILL did too), null if not yet. Costs one kill(2) when the
 * group is already empty. Returns false if members survived SIGKILL for KILL_SETTLE_MS.
 */
async function clearGroup(pgid: number, graceMs: number, termSentAt: number | null): Promise<boolean> {
  if (!(await groupHasLiveMembers(pgid))) return true;
  let killAt: number;
  if (termSentAt === null) {
    signalGroup(pgid, "SIGTERM");
    killAt = performance.now() + graceMs;
  } else {
    killAt = termSentAt + graceMs;
  }
  if (await waitGroupGone(pgid, killAt)) return true;
  signalGroup(pgid, "SIGKILL");
  return waitGroupGone(pgid, performance.now() + KILL_SETTLE_MS);
}

async function waitGroupGone(pgid: number, until: number): Promise<boolean> {
  let step = POLL_FIRST_MS;
  for (;;) {
    if (!(await groupHasLiveMembers(pgid))) return true;
    const left = until - performance.now();
    if (left <= 0) return false;
    await sleep(Math.min(step, left));
    step = Math.min(step * 2, POLL_MAX_MS);
  }
}

/**
 * kill(-pgid, 0) failing with ESRCH proves the group is empty; success may only mean zombies
 * (orphans whose reaper has not collected them), so with /proc the answer comes from the
 * members' states instead.
 */
async function groupHasLiveMembers(pgid: number): Promise<boolean> {
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    if (errorCode(err) === "ESRCH") return false;
  }
  if (!hasProc()) return true;
  return (await liveGroupMembers(pgid)).length > 0;
}

/** Pids whose /proc/<pid>/stat names process group `pgid` and whose state is not zombie/dead. */
async function liveGroupMembers(pgid: number): Promise<number[]> {
  const members: number[] = [];
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let text: string;
    try {
      text = await readFile(`/proc/${name}/stat`, "latin1");
    } catch {
      continue; // the process went away while we looked
    }
    // "pid (comm) state ppid pgrp …"; comm may itself contain spaces and parentheses.
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
    const state = fields[0];
    if (Number(fields[2]) === pgid && state !== "Z" && state !== "X") members.push(Number(name));
  }
  return members;
}

let procAvailable: boolean | undefined;
function hasProc(): boolean {
  procAvailable ??= existsSync("/proc/self/stat");
  return procAvailable;
}

/** ESRCH (group already gone) is the expected end state, not an error; EPERM leaves nothing to do. */
function signalGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {
    // ESRCH: nothing left to signal. EPERM: a member we may not signal; the bounded waits report it.
  }
}

let ioniceLookup: Promise<string | null> | undefined;
/** The `ionice` executable on fuzzfleet's own PATH, looked up once per process. */
function findIonice(): Promise<string | null> {
  ioniceLookup ??= resolveProgram("ionice", process.env.PATH, process.cwd()).then((found) =>
    typeof found === "string" ? found : null,
  );
  return ioniceLookup;
}

/**
 * Finds `program` the way execvp does: a name with a slash is a path (relative to `cwd`), a bare
 * name is searched in `pathVar`. Returns the absolute path, or an error with ENOENT / EACCES.
 */
async function resolveProgram(program: string, pathVar: string | undefined, cwd: string): Promise<string | Error> {
  const candidates = program.includes("/")
    ? [resolvePath(cwd, program)]
    : (pathVar ?? "/usr/bin:/bin").split(":").map((dir) => resolvePath(cwd, dir || ".", program));
  let denied = false;
  for (const candidate of candidates) {
    try {
      if (!(await stat(candidate)).isFile()) {
        denied = true;
        continue;
      }
      await access(candidate, fsConstants.X_OK);
      return candidate;
    } catch (err) {
      if (errorCode(err) === "EACCES") denied = true;
    }
  }
  return Object.assign(new Error(denied ? "permission denied" : "not found"), { code: denied ? "EACCES" : "ENOENT" });
}

/**
 * The log file is opened asynchronously (it may sit on a slow file system); the stdin file
 * synchronously: it is an input the caller just prepared, and a round trip through the thread
 * pool before every start would cost more than the open itself.
 */
async function openStdio(options: RunChildOptions): Promise<{ log: FileHandle | null; input: number | null } | string> {
  let log: FileHandle | null = null;
  const { logPath } = options;
  if (logPath !== null) {
    try {
      await mkdir(dirname(logPath), { recursive: true });
      log = await open(logPath, "a");
    } catch (err) {
      return `cannot open log file '${logPath}': ${errorText(err)}; check the directory exists and is writable`;
    }
  }
  const stdinPath = options.stdin ?? "ignore";
  if (stdinPath === "ignore") return { log, input: null };
  let input: number | undefined;
  try {
    // O_NONBLOCK so that a FIFO named by mistake cannot block the open; it is refused just below.
    input = openSync(stdinPath, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
    if (!fstatSync(input).isFile()) throw new Error("not a regular file");
    return { log, input };
  } catch (err) {
    if (input !== undefined) closeQuietly(input);
    await log?.close().catch(() => {});
    return `cannot open stdin file '${stdinPath}': ${errorText(err)}; give the path of a regular, readable file`;
  }
}

/**
 * Why a start failed, in words. The working directory is looked at only now, after the fact: a
 * check before every start would cost a round trip through the thread pool per run, and a bad
 * working directory fails the start anyway (the child's chdir, with an errno that would otherwise
 * be read as a missing program).
 */
async function startProblem(program: string, cwd: string | undefined, err: unknown): Promise<string> {
  if (cwd !== undefined) {
    const problem = await directoryProblem(cwd);
    if (problem) return `cannot start '${program}': working directory '${cwd}' ${problem}`;
  }
  return startFailure(program, err);
}

async function directoryProblem(dir: string): Promise<string | null> {
  try {
    return (await stat(dir)).isDirectory() ? null : "is not a directory";
  } catch (err) {
    return errorCode(err) === "ENOENT" ? "does not exist" : `cannot be used (${errorText(err)})`;
  }
}

function startFailure(program: string, err: unknown): string {
  switch (errorCode(err)) {
    case "ENOENT":
      return program.includes("/")
        ? `cannot start '${program}': no such file (ENOENT); check the path`
        : `cannot start '${program}': not found on PATH (ENOENT); install it or give its full path`;
    case "EACCES":
      return `cannot start '${program}': permission denied, not an executable file (EACCES); check its mode`;
    default:
      return `cannot start '${program}': ${errorText(err)}`;
  }
}

function notStarted(outcome: "interrupted" | "error", error?: string): ChildResult {
  const result: ChildResult = { outcome, exitCode: null, signal: null, seconds: 0 };
  if (error !== undefined) result.error = error;
  return result;
}

function checkOptions(options: RunChildOptions): void {
  const { argv, hardTimeoutMs, killGraceMs, nice } = options;
  assert.ok(argv.length > 0 && typeof argv[0] === "string" && argv[0] !== "", "runChild: argv must start with a program name");
  assert.ok(hardTimeoutMs > 0, `runChild: hardTimeoutMs must be > 0 (got ${hardTimeoutMs})`);
  assert.ok(killGraceMs === undefined || (killGraceMs >= 0 && Number.isFinite(killGraceMs)), `runChild: killGraceMs must be a finite number >= 0 (got ${killGraceMs})`);
  assert.ok(nice === undefined || (Number.isInteger(nice) && nice >= -20 && nice <= 19), `runChild: nice must be an integer from -20 to 19 (got ${nice})`);
}

/** Fires `fire` once performance.now() reaches `deadline`, however far away it is. */
function armDeadline(timers: TimerSet, deadline: number, fire: () => void): void {
  const left = deadline - performance.now();
  if (left <= 0) {
    fire();
    return;
  }
  timers.after(Math.min(left, MAX_TIMER_MS), () => armDeadline(timers, deadline, fire));
}

/**
 * Supervision timers. They are unref'd: while they are pending the child handle keeps the event
 * loop alive, and they must not keep it alive on their own.
 */
class TimerSet {
  private readonly handles = new Set<NodeJS.Timeout>();

  after(ms: number, fn: () => void): void {
    const handle = setTimeout(() => {
      this.handles.delete(handle);
      fn();
    }, ms);
    handle.unref();
    this.handles.add(handle);
  }

  clear(): void {
    for (const handle of this.handles) clearTimeout(handle);
    this.handles.clear();
  }
}

function errorCode(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "code" in err ? String(err.code) : undefined;
}

function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
