// The process starter behind runChild: fuzzfleet's own addon (native/spawn.c and its watchdog
// program native/watchdog.c, built by `npm ci`) where it loads and the kernel gives pidfds, else
// Node's child_process.spawn.
//
// Why an addon: child_process.spawn forks the whole Node process, and on a small VM that blocks
// the event loop for about 5 ms per child (page tables copied, then torn down by the exec). The
// addon's posix_spawn shares the parent's memory until the exec (clone with CLONE_VFORK), so a
// trivial target starts in a fraction of that. Both starters give the child the same world: a new
// session and process group, default signal dispositions, the given descriptors on 0, 1 and 2,
// the given environment and working directory, the program looked up in the PATH of that
// environment. One difference: the native starter closes every other descriptor, while
// child_process leaves open those Node itself inherited without close-on-exec.
//
// Both register every child's process group with the child watchdog of their kind (see
// child-watchdog.ts) before they return, and forget it on Started.release().
//
// FUZZFLEET_SPAWN=node in the environment forces child_process (for comparison, or should the
// addon misbehave on some system); FUZZFLEET_SPAWN=native fails loudly when the addon is missing.
import { spawn as nodeSpawn } from "node:child_process";
import { accessSync, constants as fsConstants } from "node:fs";
import { createRequire } from "node:module";
import { constants as osConstants } from "node:os";
import { fileURLToPath } from "node:url";
import { ChildWatchdog, nativeWatchdog, nodeWatchdog, type WatchdogAddon } from "./child-watchdog.ts";
import { childEnvironment } from "./secrets.ts";

export type Starter = "native" | "node";

export type LeaderEnd = { code: number | null; signal: NodeJS.Signals | null } | { error: unknown };

export interface Started {
  /** undefined when the Node starter could not start the program: `exited` then gives the error. */
  pid: number | undefined;
  /** Resolves once, when the leader has exited and been reaped (or failed to start). */
  exited: Promise<LeaderEnd>;
  /** Unregisters the group from the child watchdog; call once no live member of it is left. */
  release(): void;
}

export interface StartOptions {
  cwd?: string;
  env: NodeJS.ProcessEnv;
  /** Descriptors for the child's stdin, stdout and stderr; null = /dev/null. */
  stdio: [number | null, number | null, number | null];
}

interface Addon extends WatchdogAddon {
  spawn(
    file: string,
    argv: string[],
    envp: string[],
    cwd: string | null,
    stdin: number,
    stdout: number,
    stderr: number,
    onExit: (code: number | null, signal: number | null) => void,
  ): number;
  supported(): boolean;
}

// Same relative paths from src/exec (tests) and dist/exec (the built CLI).
const ADDON_PATH = "../../build/Release/fuzzfleet_spawn.node";
const WATCHDOG_PATH = fileURLToPath(new URL("../../build/Release/fuzzfleet_watchdog", import.meta.url));

let addonLookup: { addon: Addon } | { problem: string } | undefined;

function loadAddon(): { addon: Addon } | { problem: string } {
  addonLookup ??= findAddon();
  return addonLookup;
}

function findAddon(): { addon: Addon } | { problem: string } {
  let addon: Addon;
  try {
    addon = createRequire(import.meta.url)(ADDON_PATH) as Addon;
  } catch (err) {
    return { problem: `the addon did not load (${(err as Error).message.split("\n")[0]}); run \`npm ci\` to build it` };
  }
  if (typeof addon.spawnWatchdog !== "function") return { problem: "the addon was built from an older native/spawn.c; run `npm ci` to rebuild it" };
  try {
    accessSync(WATCHDOG_PATH, fsConstants.X_OK);
  } catch {
    return { problem: "its watchdog program (build/Release/fuzzfleet_watchdog) is missing; run `npm ci` to build it" };
  }
  return addon.supported() ? { addon } : { problem: "this kernel has no pidfd_open (Linux 5.3 or later needed)" };
}

let chosen: { wanted: string | undefined; starter: Starter } | undefined;

/** Which starter runChild uses unless told otherwise: FUZZFLEET_SPAWN, else native if it works. */
export function defaultStarter(): Starter {
  const wanted = process.env.FUZZFLEET_SPAWN;
  if (chosen === undefined || chosen.wanted !== wanted) chosen = { wanted, starter: chooseStarter(wanted) };
  return chosen.starter;
}

function chooseStarter(wanted: string | undefined): Starter {
  if (wanted !== undefined && wanted !== "" && wanted !== "native" && wanted !== "node") {
    throw new Error(`FUZZFLEET_SPAWN must be 'native' or 'node' (got '${wanted}')`);
  }
  if (wanted === "node") return "node";
  const found = loadAddon();
  if (wanted === "native" && "problem" in found) {
    throw new Error(`FUZZFLEET_SPAWN=native, but the native process starter is unavailable: ${found.problem}`);
  }
  return "addon" in found ? "native" : "node";
}

/** Why the native starter is unavailable, or null when it works. */
export function nativeStarterProblem(): string | null {
  const found = loadAddon();
  return "problem" in found ? found.problem : null;
}

/**
 * Starts `argv` as the leader of a new session, synchronously, with `options.env` less fuzzfleet's
 * secrets (secrets.ts: whatever the caller passes, a child never sees the campaign token). When the program cannot be started,
 * the native starter throws an Error whose `code` names the errno (ENOENT, EACCES, ...); the Node
 * starter either throws or returns no pid and resolves `exited` with `{ error }`, as spawn does.
 */
export function startChild(starter: Starter, argv: readonly string[], options: StartOptions): Started {
  const safe = { ...options, env: childEnvironment(options.env) };
  return starter === "native" ? startNative(argv, safe) : startNode(argv, safe);
}

// C strings end at a NUL byte, so such a value would reach the child cut short; child_process
// refuses them itself, and so does this.
function refuseNul(value: string, what: string): void {
  if (value.includes("\0")) throw Object.assign(new TypeError(`${what} contains a NUL byte`), { code: "ERR_INVALID_ARG_VALUE" });
}

// The "NAME=value" list of a frozen environment object (one that cannot change any more, like
// the one explore builds per scratch directory) is made once.
const envpOfFrozen = new WeakMap<object, string[]>();

function envpOf(env: NodeJS.ProcessEnv): string[] {
  const known = envpOfFrozen.get(env);
  if (known) return known;
  const envp: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    refuseNul(name, `environment variable name '${name}'`);
    refuseNul(value, `environment variable '${name}'`);
    envp.push(`${name}=${value}`);
  }
  if (Object.isFrozen(env)) envpOfFrozen.set(env, envp);
  return envp;
}

let nativeGuard: ChildWatchdog | undefined;
let nodeGuard: ChildWatchdog | undefined;

/** The child watchdog registry a starter registers its children with (created on first use). */
export function childWatchdog(starter: Starter): ChildWatchdog {
  if (starter === "node") return (nodeGuard ??= new ChildWatchdog(nodeWatchdog()));
  const found = loadAddon();
  if ("problem" in found) throw new Error(`the native process starter is unavailable: ${found.problem}`);
  return (nativeGuard ??= new ChildWatchdog(nativeWatchdog(found.addon, WATCHDOG_PATH)));
}

function startNative(argv: readonly string[], options: StartOptions): Started {
  const found = loadAddon();
  if ("problem" in found) throw new Error(`the native process starter is unavailable: ${found.problem}`);
  const { addon } = found;
  for (const arg of argv) refuseNul(arg, "an argument");
  if (options.cwd !== undefined) refuseNul(options.cwd, "the working directory");
  const envp = envpOf(options.env);
  const guard = childWatchdog("native");
  guard.ensure();
  let settle!: (end: LeaderEnd) => void;
  const exited = new Promise<LeaderEnd>((resolve) => (settle = resolve));
  const [stdin, stdout, stderr] = options.stdio;
  // The addon writes the "+" line itself, in the same call as posix_spawn.
  const spawn = () =>
    addon.spawn(argv[0], [...argv], envp, options.cwd ?? null, stdin ?? -1, stdout ?? -1, stderr ?? -1, (code, signal) =>
      settle({ code, signal: signal === null ? null : signalName(signal) }),
    );
  let pid: number;
  try {
    pid = spawn();
  } catch (err) {
    // The watchdog stopped reading or is gone; the addon has already killed the child. One retry
    // with a fresh watchdog, then the error stands.
    if (!(err instanceof Error && "code" in err && err.code === "ERR_CHILD_UNGUARDED")) throw err;
    guard.replace();
    guard.ensure();
    pid = spawn();
  }
  guard.guarded(pid, true);
  return { pid, exited, release: () => guard.release(pid) };
}

function startNode(argv: readonly string[], options: StartOptions): Started {
  const guard = childWatchdog("node");
  guard.ensure();
  const child = nodeSpawn(argv[0], argv.slice(1), {
    cwd: options.cwd,
    env: options.env,
    detached: true,
    stdio: options.stdio.map((fd) => fd ?? "ignore"),
  });
  const exited = new Promise<LeaderEnd>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
    // After a successful spawn, 'error' only comes from kill()/send(), which are not used here;
    // the listener must exist regardless, or such an event would crash the process.
    child.on("error", (error) => {
      if (child.pid === undefined) resolve({ error });
    });
  });
  const { pid } = child;
  if (pid === undefined) return { pid, exited, release: () => {} };
  guard.guarded(pid, false);
  return { pid, exited, release: () => guard.release(pid) };
}

const signalNames = new Map<number, NodeJS.Signals>(
  Object.entries(osConstants.signals).map(([name, number]) => [number, name as NodeJS.Signals]),
);

function signalName(signal: number): NodeJS.Signals {
  return signalNames.get(signal) ?? (`SIG${signal}` as NodeJS.Signals);
}
