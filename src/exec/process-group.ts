// A child's process group after its leader: is any member still alive (zombies do not count), a
// signal to the whole group, and clearing it (SIGTERM, the grace, SIGKILL, then a bounded wait).
// run-child.ts calls clearGroup before it releases the group from the watchdog, so the watchdog
// never signals a recycled number.
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";

/** How long SIGKILLed processes get to disappear (a process in uninterruptible sleep may not). */
export const KILL_SETTLE_MS = 5_000;
const POLL_FIRST_MS = 10;
const POLL_MAX_MS = 200;

/**
 * Makes sure no live member of process group `pgid` remains. `termSentAt` is when SIGTERM already
 * went to the group (-Infinity if SIGKILL did too), null if not yet. Costs one kill(2) when the
 * group is already empty. Returns false if members survived SIGKILL for KILL_SETTLE_MS.
 */
export async function clearGroup(pgid: number, graceMs: number, termSentAt: number | null): Promise<boolean> {
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
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return false;
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
export function signalGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {
    // ESRCH: nothing left to signal. EPERM: a member we may not signal; the bounded waits report it.
  }
}
