// The child watchdog: when this fuzzfleet process is gone, however it went (SIGKILL included), the
// process groups of the children it started die too (invariant 10: no child outlives the session
// that started it).
//
// A small process, started with the first child, in a session of its own (so a Ctrl-C at the
// terminal, which goes to fuzzfleet's process group, does not reach it). Its stdin is a pipe whose
// only write end fuzzfleet holds, close-on-exec, so no other child inherits it. fuzzfleet writes
// one line per change, each in a single write(2):
//   +<pgid>   a child was started; it leads process group <pgid>
//   -<pgid>   runChild has cleared that group: no live member is left (undoes one "+": the
//             number may already belong to the next child, registered just before)
// When fuzzfleet exits or dies, the kernel closes its descriptors: the watchdog reads what was
// written before, then end of file, sends SIGTERM to every group still registered, SIGKILL to
// those with a member left WATCHDOG_GRACE_MS later, and exits. A group is released only once it
// is empty, and only then can its number be recycled, so the watchdog signals no group that is
// not ours.
//
// Two implementations of the same watchdog, one per process starter:
// - native: native/watchdog.c, started by the addon; the addon's spawn writes the "+" line itself,
//   in the same call as posix_spawn. The program drains its pipe every 100 ms instead of waiting
//   on it, so a line costs fuzzfleet one write(2) and wakes nobody.
// - node: SCRIPT below under /bin/sh (awk does the reading), started by child_process; "+" is
//   written right after child_process.spawn returns. Its reader wakes on every line, a few
//   microseconds each, next to the ~5 ms a fork of Node costs that starter per child anyway.
// Either way "-" is one more write(2), and nothing keeps the event loop alive.
//
// Lifecycle of one ChildWatchdog (one per process starter in use):
//
//   none ──ensure()──▶ running ──the watchdog exits, or a write to it fails──▶ replace() ──▶ running
//                                 (SIGKILL to the old one before its pipe is closed, so it
//                                  cannot act on end of file; a new one; every registered group
//                                  sent to it again)
//
// If no watchdog can be started, ensure() throws: the child is reported as not started (runChild's
// outcome "error") rather than run unguarded.
import { spawn as nodeSpawn } from "node:child_process";
import { closeSync, writeSync } from "node:fs";
import type { Socket } from "node:net";
import { performance } from "node:perf_hooks";

/** How long a group has between SIGTERM and SIGKILL once fuzzfleet is gone. */
export const WATCHDOG_GRACE_MS = 2000;
/** The watchdog's name in its command line, followed by the pid of the fuzzfleet process it watches. */
export const WATCHDOG_NAME = "fuzzfleet-watchdog";
/** A watchdog that lived shorter than this is not restarted at once, only at the next child's start. */
const RESTART_MIN_MS = 1000;

// The watchdog of the Node starter: sh -c SCRIPT fuzzfleet-watchdog <fuzzfleet pid> <grace ms>.
// Registrations are counted per number ("-" undoes one "+"), as in ChildWatchdog.
// Lines that are not "+" or "-" and a pid are ignored, and so are 0 and 1: `kill -- -1` would
// signal every process we may signal. awk reads the pipe in blocks, at a small fraction of the CPU
// of the shell's one-byte-per-read(2) `read` (kept for a system without awk). The grace loop drops
// a group as soon as it is empty, so a number recycled after that is never signalled.
const SCRIPT = `trap '' INT HUP
steps=$((\${2:-2000} / 100))
if command -v awk >/dev/null 2>&1; then
  set -- $(awk '/^[+][1-9][0-9]*$/ { g[substr($0, 2)]++; next }
    /^-[1-9][0-9]*$/ { k = substr($0, 2); if (--g[k] <= 0) delete g[k] }
    END { for (k in g) if (k != "1") print k }')
else
  groups=' '
  while IFS= read -r line; do
    id=\${line#?}
    case $id in '' | *[!0-9]* | 0* | 1) continue ;; esac
    case $line in
      +*) groups="$groups$id " ;;
      -*) case $groups in *" $id "*) groups="\${groups%% $id *} \${groups#* $id }" ;; esac ;;
    esac
  done
  set -- $groups
fi
[ $# -gt 0 ] || exit 0
for g; do kill -s TERM -- "-$g" 2>/dev/null; done
tries=0
while [ $# -gt 0 ] && [ $tries -lt $steps ]; do
  sleep 0.1
  alive=
  for g; do kill -s 0 -- "-$g" 2>/dev/null && alive="$alive $g"; done
  set -- $alive
  tries=$((tries + 1))
done
for g; do kill -s KILL -- "-$g" 2>/dev/null; done
`;

const SHELL = "/bin/sh";

/** What follows the program in every watchdog's command line. */
function watchdogArgs(): string[] {
  return [WATCHDOG_NAME, String(process.pid), String(WATCHDOG_GRACE_MS)];
}

/** One running watchdog, as the starter that launched it sees it. */
export interface WatchdogLink {
  /** Writes whole lines; throws when the watchdog does not take them now. */
  send(lines: string): void;
  /** Ends this watchdog without letting it act: SIGKILL first (if it still runs), then the pipe is closed. */
  discard(): void;
}

/** Starts a watchdog; `onExit` is called if it ends while fuzzfleet lives. Throws if it cannot start. */
export type OpenWatchdog = (onExit: () => void) => WatchdogLink;

export class ChildWatchdog {
  private link: WatchdogLink | null = null;
  private startedAt = 0;
  private problem = "";
  /**
   * Registrations not yet released, counted per group number: what a replacement watchdog is told.
   * A count, not a set: the number of a group found empty may be taken by the next child before
   * the release line is written, and that "-" must then not unregister the new group.
   */
  private readonly groups = new Map<number, number>();

  constructor(private readonly open: OpenWatchdog) {}

  /** Makes sure a watchdog runs; throws, naming the cause, when none can be started. */
  ensure(): void {
    if (this.link === null) this.replace();
    if (this.link === null) throw Object.assign(new Error(`the child watchdog could not be started (${this.problem}), so no child is started unguarded`), { code: "ERR_NO_WATCHDOG" });
  }

  /** Records a started child's group; `sent`: the starter already wrote its "+" line. */
  guarded(pgid: number, sent: boolean): void {
    this.groups.set(pgid, (this.groups.get(pgid) ?? 0) + 1);
    if (!sent) this.deliver(`+${pgid}\n`);
  }

  /** Call once no live member of the group is left; the watchdog forgets one registration of it. */
  release(pgid: number): void {
    const count = this.groups.get(pgid);
    if (count === undefined) return;
    if (count > 1) this.groups.set(pgid, count - 1);
    else this.groups.delete(pgid);
    this.deliver(`-${pgid}\n`);
  }

  /** Replaces the watchdog (if any) by a new one that holds every registered group. Never throws. */
  replace(): void {
    const old = this.link;
    this.link = null;
    old?.discard();
    let link: WatchdogLink;
    try {
      link = this.open(() => this.exited(link));
    } catch (err) {
      this.problem = err instanceof Error ? err.message : String(err);
      return;
    }
    try {
      if (this.groups.size > 0) link.send([...this.groups].map(([g, count]) => `+${g}\n`.repeat(count)).join(""));
    } catch (err) {
      this.problem = `it did not take the registered groups: ${err instanceof Error ? err.message : String(err)}`;
      link.discard();
      return;
    }
    this.link = link;
    this.startedAt = performance.now();
  }

  /** A replacement receives the whole registered set, this line included (or made moot). */
  private deliver(line: string): void {
    if (this.link === null) {
      if (this.groups.size > 0) this.replace();
      return;
    }
    try {
      this.link.send(line);
    } catch {
      this.replace();
    }
  }

  private exited(link: WatchdogLink): void {
    if (this.link !== link) return;
    this.link = null;
    this.problem = "it exited";
    link.discard();
    if (this.groups.size > 0 && performance.now() - this.startedAt >= RESTART_MIN_MS) this.replace();
  }
}

/** The parts of the addon (native/spawn.c) a watchdog for the native starter uses. */
export interface WatchdogAddon {
  pipe(): [number, number];
  guard(fd: number): void;
  spawnWatchdog(file: string, argv: string[], envp: string[], stdin: number, onExit: () => void): number;
}

/**
 * The program `program` (native/watchdog.c, built beside the addon), started by the addon. Its
 * "+" lines are written by the addon's spawn itself (through guard); the watch on its exit does
 * not keep the event loop alive.
 */
export function nativeWatchdog(addon: WatchdogAddon, program: string): OpenWatchdog {
  return (onExit) => {
    const [readFd, writeFd] = addon.pipe();
    let pid: number;
    let exited = false;
    try {
      pid = addon.spawnWatchdog(program, watchdogArgs(), [], readFd, () => {
        exited = true;
        onExit();
      });
    } catch (err) {
      closeSync(writeFd);
      throw err;
    } finally {
      closeSync(readFd);
    }
    addon.guard(writeFd);
    let open = true;
    return {
      send(lines) {
        if (!open) throw new Error("the watchdog was discarded");
        if (writeSync(writeFd, lines) !== Buffer.byteLength(lines)) throw new Error("the watchdog's pipe is full");
      },
      discard() {
        if (!open) return;
        open = false;
        addon.guard(-1);
        // Still our unreaped child while `exited` is false: the pid cannot belong to anyone else.
        if (!exited) process.kill(pid, "SIGKILL");
        closeSync(writeFd);
      },
    };
  };
}

/** A watchdog started by child_process, for the Node starter; "+" lines go through deliver(). */
export function nodeWatchdog(): OpenWatchdog {
  return (onExit) => {
    const child = nodeSpawn(SHELL, ["-c", SCRIPT, ...watchdogArgs()], {
      cwd: "/",
      // PATH for awk and sleep; nothing else of fuzzfleet's environment.
      env: { PATH: process.env.PATH || "/usr/bin:/bin", LC_ALL: "C" },
      detached: true,
      stdio: ["pipe", "ignore", "ignore"],
    });
    child.on("error", () => {}); // a failed start is detected below; kill() is the only other source
    const stdin = child.stdin as Socket;
    stdin.on("error", () => {}); // EPIPE once the watchdog is gone; its exit event does the rest
    if (child.pid === undefined) {
      stdin.destroy();
      throw new Error(`cannot start ${SHELL}`);
    }
    child.once("exit", onExit);
    child.unref();
    stdin.unref();
    return {
      send(lines) {
        if (!stdin.writable) throw new Error("the watchdog's pipe is closed");
        stdin.write(lines);
      },
      discard() {
        child.kill("SIGKILL"); // a no-op once it has exited and been reaped
        stdin.destroy();
      },
    };
  };
}
