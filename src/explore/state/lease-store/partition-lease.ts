// The partition lease of one master's share of an explore campaign's content (the hashes
// rendezvous ownership gives its rank): who serves the share, under which generation, and when it
// last said so. One small record per share, beside the lease table's shard directories:
//
//   <root>/partitions/r<rank>.json    {schema, rank, epoch, generation, holder, heartbeat, journal}
//   <root>/partitions/r<rank>.lock    the short lock (file-lock.ts) every change of the record
//                                     and every commit-fence check of its holder is made under
//
// `journal` is the base name of the holder's lease journal for the share (lease-journal.ts:
// <root>/<journal>-<gen>.log); its writer keeps that file flock'ed for as long as it lives.
//
//   (none)  --create, under the short lock-->              generation 1, holder h
//   held    --renew by h, same generation-->               heartbeat now
//   held    --release by h-->                              holder "" (free at once)
//   held    --takeover, heartbeat older than the ttl
//             AND the holder's journal lock is free-->     generation + 1, holder t
//
// A takeover needs both: the lease expired (the holder stopped saying it serves the share) and its
// journal's flock is free (the kernel dropped it when the holder died; an NFSv4 server drops it
// when the client's own lease lapses). A stalled holder on a local disk therefore keeps its share:
// nobody steals a share whose lock is held. A holder whose lock was dropped while it was away
// finds another generation in the record when it wakes: it checks the record under the short lock
// before every commit batch and on every heartbeat, and from then on commits nothing more.
import { closeSync, constants, fstatSync, openSync, readdirSync, readFileSync } from "node:fs";
import type { LeaseRecord } from "../../../core/lease-record.ts";
import { join } from "node:path";
import { flockSync } from "fs-ext";
import { RuntimeFailure } from "../../../errors.ts";
import { fsyncDir, replaceFile, replaceFileSynced } from "../durable.ts";
import { readRecordFiles, shardName } from "../lease-files.ts";
import { JOURNAL_FILE, parseJournal } from "../lease-journal.ts";

export interface PartitionRecord {
  schema: 1;
  rank: number;
  epoch: string;
  generation: number;
  /** Who serves the share ("" once released). */
  holder: string;
  /** Wall-clock ms of the holder's last renewal. */
  heartbeat: number;
  /** The base name of the holder's journal ("" before it has one). */
  journal: string;
}

const KEYS = "epoch,generation,heartbeat,holder,journal,rank,schema";

export function partitionDir(root: string): string {
  return join(root, "partitions");
}

export function partitionPath(root: string, rank: number): string {
  return join(partitionDir(root), `r${rank}.json`);
}

export function partitionLockPath(root: string, rank: number): string {
  return join(partitionDir(root), `r${rank}.lock`);
}

/** A partition record that does not validate: the share is blocked, never taken as free. */
export class CorruptPartitionError extends RuntimeFailure {
  constructor(path: string, reason: string) {
    super(`partition lease ${path} is corrupt (${reason}); it is never overwritten or treated as free: inspect it, and move it away only once no fuzzfleet process uses this campaign`);
  }
}

/** Why `v` is not the partition record of `rank`, or null. */
export function partitionProblem(v: unknown, rank: number): string | null {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return "not a JSON object";
  const r = v as Record<string, unknown>;
  if (Object.keys(r).sort().join(",") !== KEYS) return `keys must be exactly ${KEYS}`;
  if (r.schema !== 1) return "schema is not 1";
  if (r.rank !== rank) return `rank ${JSON.stringify(r.rank)} does not match the file name`;
  if (typeof r.epoch !== "string") return "epoch must be a string";
  if (!Number.isSafeInteger(r.generation) || (r.generation as number) < 1) return "generation must be an integer >= 1";
  if (typeof r.holder !== "string") return "holder must be a string";
  if (typeof r.heartbeat !== "number" || !Number.isFinite(r.heartbeat) || r.heartbeat < 0) return "heartbeat must be a time >= 0";
  if (typeof r.journal !== "string" || (r.journal !== "" && !/^journal-[0-9]+-[0-9a-f]{12}$/.test(r.journal))) return "journal must be a journal base name or empty";
  return null;
}

/** A partition record file's text, read afresh (an open, so close-to-open sees the last rename); never through a symlink. */
export function readPartitionFile(path: string): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    if (!fstatSync(fd).isFile()) throw new CorruptPartitionError(path, "not a regular file");
    return readFileSync(fd, "utf8");
  } finally {
    closeSync(fd);
  }
}

let partitionFileReader: (path: string) => string = readPartitionFile;

/**
 * Replaces how partition record files are read (null: the real read again). The lease simulation
 * stands a shared file system's client cache in here, whose reads without the short lock may
 * return an older record, without the stores knowing.
 */
export function setPartitionFileReader(read: ((path: string) => string) | null): void {
  partitionFileReader = read ?? readPartitionFile;
}

/** The record of `rank`'s share, null when there is none. */
export function readPartition(root: string, rank: number): PartitionRecord | null {
  const path = partitionPath(root, rank);
  let text: string;
  try {
    text = partitionFileReader(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    if (err instanceof CorruptPartitionError) throw err;
    throw new CorruptPartitionError(path, `unreadable: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CorruptPartitionError(path, "not JSON");
  }
  const problem = partitionProblem(value, rank);
  if (problem !== null) throw new CorruptPartitionError(path, problem);
  return value as PartitionRecord;
}

/** Every share's record in `root`, by rank. */
export function readPartitions(root: string): PartitionRecord[] {
  let names: string[];
  try {
    names = readdirSync(partitionDir(root));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const ranks = names.map((n) => /^r([0-9]+)\.json$/.exec(n)?.[1]).filter((r): r is string => r !== undefined).map(Number);
  return ranks.sort((a, b) => a - b).map((r) => readPartition(root, r)).filter((r): r is PartitionRecord => r !== null);
}

export function partitionText(r: PartitionRecord): string {
  return `${JSON.stringify(r, KEYS.split(","))}\n`;
}

/** Writes a new generation durably (its name too): a takeover, a first creation under the lock. */
export function writePartitionSynced(root: string, r: PartitionRecord): void {
  replaceFileSynced(partitionPath(root, r.rank), partitionText(r));
  fsyncDir(partitionDir(root));
}

/** A renewal: atomic (temp + rename) but not synced; a machine crash losing one only ages the lease. */
export function writePartition(root: string, r: PartitionRecord): void {
  replaceFile(partitionPath(root, r.rank), partitionText(r));
}

/** The journal files of `base` in `root`, oldest generation first. */
export function journalFiles(root: string, base: string): string[] {
  if (base === "") return [];
  const gen = (n: string) => Number(JOURNAL_FILE.exec(n)![1]);
  return readdirSync(root)
    .filter((n) => JOURNAL_FILE.test(n) && n.startsWith(`${base}-`))
    .sort((a, b) => gen(a) - gen(b))
    .map((n) => join(root, n));
}

/** The highest journal generation in `root` (any base), -1 when there is none: a new journal starts above it. */
export function highestJournalGeneration(root: string): number {
  let top = -1;
  for (const n of readdirSync(root)) {
    const m = JOURNAL_FILE.exec(n);
    if (m) top = Math.max(top, Number(m[1]));
  }
  return top;
}

/**
 * Whether the writer of every journal in `paths` is gone: each one's flock can be taken. The
 * descriptors that took it are returned still locked (the caller holds them until it has written
 * the next generation, so that no late writer can think it still serves the share), or null when
 * one of them is held by a live writer.
 */
export function lockAbandonedJournals(paths: readonly string[]): number[] | null {
  const fds: number[] = [];
  for (const path of paths) {
    let fd: number;
    try {
      fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
      for (const f of fds) closeSync(f);
      throw err;
    }
    try {
      flockSync(fd, "exnb");
      fds.push(fd);
    } catch (err) {
      closeSync(fd);
      for (const f of fds) closeSync(f);
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "EAGAIN" || code === "EWOULDBLOCK") return null;
      throw err;
    }
  }
  return fds;
}

/**
 * The records of a share as its previous holder left them: the share's record files (a resumed
 * campaign's, or a journal folded back into them) with its journals laid over them in order (a
 * torn last line dropped). `inShare` says which records are the share's.
 */
export function replayShare(root: string, shardCount: number, journals: readonly string[], inShare: (id: string) => boolean): LeaseRecord[] {
  const byId = new Map<string, LeaseRecord>();
  const shardOf = (id: string) => shardName(Number.parseInt(id.slice(0, 8), 16) % shardCount);
  for (const r of readRecordFiles(root, shardOf)) if (inShare(r.id)) byId.set(r.id, r);
  for (const path of journals) {
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw err;
    }
    for (const [id, rec] of parseJournal(path, text)) {
      if (rec === null) byId.delete(id);
      else byId.set(id, rec);
    }
  }
  return [...byId.values()];
}
