// How the ranks of one launched job find their leader without anyone typing an address or a
// secret: the leading ranks (rank 0, and an explore's other masters) publish where they listen in
// the shared campaign directory, and rank 0 a fresh campaign token beside it; the others read them
// with a bounded wait. Layout, below the campaign's base directory (a sweep's fuzzfleet-out/, an
// explore corpus's .fuzzfleet/):
//
//   launch/fuzzfleet.lock                       the leader's lock: held by the rank 0 that runs the
//                                               campaign (lock/campaign-lock.ts: host, pid, start)
//   launch/job-<hash of the job id>/            one job (mode 0700), created fresh by rank 0
//   launch/job-<…>/fuzzfleet.token              the job's token (0600, net/token.ts writes it)
//   launch/job-<…>/r<rank>.json                 {job, rank, role, host, port, token} of a master
//
// Nothing is followed through a symlink: each directory is checked with lstat (a directory, this
// user's) before it is used, records are written under a temporary name (O_EXCL | O_NOFOLLOW,
// 0600), fsynced and renamed into place (files/atomic-write.ts), and read with O_NOFOLLOW, at most RECORD_MAX_BYTES, only
// from a regular file of this user (files/small-file.ts), and checked field by field.
//
// Only the rank 0 that holds the leader's lock touches launch/: it takes the lock before it
// creates or removes anything there, and a rank 0 refused the lock (a second rank 0 of a running
// job, another job in the same directory) leaves launch/ as it found it. The campaign's own lock
// cannot serve: the command rank 0 runs (coordinate, explore) takes that one itself, in this
// process. With the lock held, a job directory of the same id is what a dead job left, and is
// replaced; at the end the holder removes its job's directory (if the lock is still its own),
// releases the lock, and removes launch/ once it is empty.
import { createHash } from "node:crypto";
import { lstatSync, mkdirSync, readdirSync, rmdirSync, unlinkSync, type Stats } from "node:fs";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { z } from "zod";
import { formatDuration } from "../config/duration.ts";
import { RefusedError, RuntimeFailure } from "../errors.ts";
import { FileProblem } from "../files/file-problem.ts";
import { problemCode, readSmallFile } from "../files/small-file.ts";
import { fsyncDir, replaceFileSynced } from "../files/atomic-write.ts";
import { printable } from "../core/log-lines.ts";
import { CampaignLock, lockPath, readLock, type LockHolder } from "../lock/campaign-lock.ts";
import { retryDelayMs } from "../net/dial-wait.ts";
import { JOB_ID_MAX_CHARS } from "./launcher.ts";
import { WakeablePause } from "../util/pause.ts";

export const LAUNCH_DIR = "launch";
const RECORD_MAX_BYTES = 4096;

/** A master's published place. `token`: whether the job's token file holds the secret, or every rank has it in FUZZFLEET_TOKEN. */
export const Published = z.strictObject({
  job: z.string().min(1).max(JOB_ID_MAX_CHARS).refine((id) => printable(id, { max: JOB_ID_MAX_CHARS * 6 }) === id, "a job id has no control characters"),
  rank: z.number().int().min(0).max(1_000_000),
  role: z.enum(["coordinator", "root", "submaster"]),
  host: z
    .string()
    .min(1)
    .max(255)
    .regex(/^[A-Za-z0-9._:%-]+$/, "a host name or an IP address"),
  port: z.number().int().min(1).max(65535),
  token: z.enum(["file", "environment"]),
});
export type PublishedT = z.infer<typeof Published>;

export function launchDir(base: string): string {
  return join(base, LAUNCH_DIR);
}

/** The job's directory: named by a hash, so no job id can reach outside launch/. */
export function jobDir(base: string, jobId: string): string {
  return join(launchDir(base), `job-${createHash("sha256").update(jobId).digest("hex").slice(0, 16)}`);
}

export function recordPath(dir: string, rank: number): string {
  return join(dir, `r${rank}.json`);
}

/** Rank 0's hold on launch/: the leader's lock and the job's directory. */
export interface JobLead {
  dir: string;
  lock: CampaignLock;
}

/** Who holds launch/ when a rank 0 is refused it, and the job id its record names (null before it published one). */
export interface LeadHolder {
  holder: LockHolder;
  jobId: string | null;
  lockPath: string;
}

export type LeadOutcome = { kind: "lead"; lead: JobLead } | { kind: "held"; by: LeadHolder };

export interface LeadOptions {
  /** What the holder runs, for the lock's line ("coordinate", "explore"). */
  command: "coordinate" | "explore";
  /** The port it publishes. */
  port: number;
  /** The user's --force-unlock: take over a holder known to be dead. */
  forceUnlock: boolean;
  /** Receives the line that says a lock was taken over. */
  log: (line: string) => void;
}

/**
 * Rank 0: takes the leader's lock of launch/, then makes the job's directory empty and new (what
 * a dead job of the same id left is removed). "held": another live rank 0 holds launch/, and
 * nothing here was created, changed or removed.
 */
export function openJobDir(base: string, jobId: string, o: LeadOptions): LeadOutcome {
  mkdirSync(dirname(base), { recursive: true });
  ensureOwnDir(base, true);
  ensureOwnDir(launchDir(base), true);
  // A lock naming this host and this very pid is no live holder's but an earlier process's with
  // the same pid: a restarted container numbers its processes as the last one did. Only this
  // process could change such a lock (others see a live pid, or another host), so taking it over is safe.
  const left = readLock(launchDir(base));
  const ownPidLeft = left !== null && left.local && left.pid === process.pid;
  let lock: CampaignLock;
  try {
    lock = CampaignLock.acquire(launchDir(base), {
      command: o.command,
      port: o.port,
      forceUnlock: o.forceUnlock || ownPidLeft,
      log: (line) => o.log(ownPidLeft ? `the leader's lock ${lockPath(launchDir(base))} names this host and this process's pid, so an earlier run of this container left it: taking it over` : line),
    });
  } catch (err) {
    const holder = err instanceof RefusedError ? readLock(launchDir(base)) : null;
    if (holder === null) throw err;
    return { kind: "held", by: { holder, jobId: publishedJob(base, jobId, holder), lockPath: lockPath(launchDir(base)) } };
  }
  try {
    const dir = jobDir(base, jobId);
    if (lstatOrNull(dir) !== null) removeJobDir(dir);
    mkdirSync(dir, { mode: 0o700 });
    ensureOwnDir(dir, false);
    return { kind: "lead", lead: { dir, lock } };
  } catch (err) {
    lock.release();
    throw err;
  }
}

/**
 * The job id the holder published: the one in the record of rank 0 at the holder's port (its
 * lock names the port it published), this job's directory first; null before it published.
 */
function publishedJob(base: string, jobId: string, holder: LockHolder): string | null {
  const own = jobDir(base, jobId);
  for (const dir of [own, ...staleJobDirs(base, own).map((s) => s.path)]) {
    try {
      const rec = readRecord(base, dir, recordPath(dir, 0));
      if (rec !== null && rec.port === holder.port) return rec.job;
    } catch {
      // A record no launch wrote names no job.
    }
  }
  return null;
}

/** Removes a job's directory: only regular files are expected in it, and nothing is followed. */
export function removeJobDir(dir: string): void {
  const st = ensureOwnDir(dir, false);
  if (st === null) return;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const s = lstatSync(path);
    if (!s.isFile()) throw new RefusedError(`${path} is not a regular file, which no launch wrote: remove it by hand, then start the job again`);
    unlinkSync(path);
  }
  rmdirSync(dir);
}

/**
 * Rank 0 at the end: the job's directory goes while the lock is still its own (not taken over
 * with --force-unlock), then the lock, then launch/ once no other job's directory is left.
 */
export function closeJobDir(base: string, lead: JobLead): void {
  const holder = readLock(launchDir(base));
  try {
    if (holder !== null && holder.local && holder.pid === process.pid) removeJobDir(lead.dir);
  } catch {
    // Left for the next rank 0 of this job id, which replaces it.
  }
  lead.lock.release();
  try {
    rmdirSync(launchDir(base));
  } catch {
    // launch/ still holds another job's directory (reported at that job's next start), or another rank 0's lock, or is gone.
  }
}

/** Other jobs' directories in launch/, for the report of stale state at start. */
export function staleJobDirs(base: string, current: string | null): { path: string; ageSeconds: number }[] {
  const dir = launchDir(base);
  const st = lstatOrNull(dir);
  if (st === null || !st.isDirectory()) return [];
  const out: { path: string; ageSeconds: number }[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (path === current || !name.startsWith("job-")) continue;
    const s = lstatOrNull(path);
    if (s !== null) out.push({ path, ageSeconds: Math.max(0, (Date.now() - s.mtimeMs) / 1000) });
  }
  return out;
}

/** Writes `rec` as rank `rec.rank`'s record: a temporary file, fsynced, renamed into place. */
export function publish(dir: string, rec: PublishedT): string {
  ensureOwnDir(dir, false);
  const path = recordPath(dir, rec.rank);
  replaceFileSynced(path, JSON.stringify(Published.parse(rec)) + "\n", 0o600);
  fsyncDir(dir);
  return path;
}

export interface RecordWait {
  jobId: string;
  waitSeconds: number;
  signal: AbortSignal;
  log: (line: string) => void;
  /** Whose record it is, for the lines ("the coordinator", "the root explore master", "explore master rank 2"). */
  who: string;
  random?: () => number;
}

/** Waits (bounded, backing off) for rank `rank`'s record of this job. Null if the signal aborted the wait. */
export async function awaitPublished(base: string, rank: number, w: RecordWait): Promise<PublishedT | null> {
  const dir = jobDir(base, w.jobId);
  const path = recordPath(dir, rank);
  const deadline = performance.now() + w.waitSeconds * 1000;
  const pause = new WakeablePause();
  const onAbort = () => pause.wake();
  w.signal.addEventListener("abort", onAbort, { once: true });
  let said = false;
  try {
    for (let attempt = 0; ; attempt++) {
      if (w.signal.aborted) return null;
      const rec = readRecord(base, dir, path);
      if (rec !== null && rec.job === w.jobId && rec.rank === rank) return rec;
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new RuntimeFailure(
          `${w.who} published no address in ${path} within ${formatDuration(w.waitSeconds)} (--wait): is launcher rank ${rank} running, ` +
            `and is this the same shared directory, at the same path, as on its host? (a longer --wait, if it starts slowly)`,
        );
      }
      if (!said) {
        w.log(`waiting up to ${formatDuration(w.waitSeconds)} for ${w.who} (launcher rank ${rank}) to publish its address in ${path} …`);
        said = true;
      }
      await pause.pause(Math.min(retryDelayMs(attempt, w.random), left));
    }
  } finally {
    w.signal.removeEventListener("abort", onAbort);
  }
}

/** The record at `path`, or null while it is not there yet. Refuses anything it must not trust. */
function readRecord(base: string, dir: string, path: string): PublishedT | null {
  for (const d of [base, launchDir(base), dir]) if (ensureOwnDir(d, false) === null) return null;
  let bytes: Buffer | null;
  try {
    bytes = readSmallFile(path, RECORD_MAX_BYTES, (st) => checkOwner(path, st));
  } catch (err) {
    if (!(err instanceof FileProblem)) throw err;
    switch (err.problem) {
      case "symlink":
        throw new RefusedError(`${path} is a symbolic link; a launch record is never followed through a link: remove it and start the job again`);
      case "not-regular":
        throw new RefusedError(`${path} is not a regular file: remove it and start the job again`);
      case "too-large":
        throw new RefusedError(`${path} is longer than ${RECORD_MAX_BYTES} bytes, which no launch record is: remove it and start the job again`);
      default:
        throw new RefusedError(`cannot read ${path} (${problemCode(err)})`);
    }
  }
  if (bytes === null) return null;
  const text = bytes.toString("utf8");
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new RefusedError(`${path} is not JSON, so no launch wrote it whole: remove it and start the job again`);
  }
  const r = Published.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new RefusedError(`${path} is no launch record (${issue.path.join(".") || "the record"}: ${issue.message}): remove it and start the job again`);
  }
  return r.data;
}

/** lstat of a directory this user owns; null when absent (or, with `create`, after creating it). Refuses a link or a file. */
function ensureOwnDir(path: string, create: boolean): Stats | null {
  let st = lstatOrNull(path);
  if (st === null && create) {
    try {
      mkdirSync(path, { mode: 0o700 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw new RuntimeFailure(`cannot create ${path} (${(err as Error).message}): the shared directory must be writable by every rank`, { cause: err });
    }
    st = lstatOrNull(path);
  }
  if (st === null) return null;
  if (st.isSymbolicLink()) throw new RefusedError(`${path} is a symbolic link; the launch never follows one: replace it with a directory (or give the real path)`);
  if (!st.isDirectory()) throw new RefusedError(`${path} is not a directory: move it away, then start the job again`);
  checkOwner(path, st);
  return st;
}

function checkOwner(path: string, st: Stats): void {
  const uid = process.geteuid?.();
  if (uid !== undefined && st.uid !== uid) {
    throw new RefusedError(`${path} belongs to uid ${st.uid}, not to this user (uid ${uid}): every rank must run as the user that owns the campaign directory`);
  }
}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}
