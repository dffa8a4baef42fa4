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
//
// Beside it: clearing the group (process-group.ts), and finding the program and the words for a
// start that failed (start-problem.ts).

import assert from "node:assert/strict";
import { closeSync, constants as fsConstants, fstatSync, openSync } from "node:fs";
import { mkdir, open, type FileHandle } from "node:fs/promises";
import { setPriority } from "node:os";
import { dirname } from "node:path";
import { performance } from "node:perf_hooks";
import { defaultStarter, startChild, type Started, type Starter } from "./native-spawn.ts";
import { clearGroup, KILL_SETTLE_MS, signalGroup } from "./process-group.ts";
import { errorCode, errorText, findIonice, resolveProgram, startProblem } from "./start-problem.ts";

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
/** setTimeout cannot wait longer than this in one go. */
const MAX_TIMER_MS = 2 ** 31 - 1;

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
