// The lease journal: how a lease table that one process owns alone (a lone master, or a master
// under broadcast ownership, whose table is its own) records its transitions without a file per
// record write. One append-only file per owning process, beside the shard directories:
//
//   <root>/journal-<pid>-<random>-<gen>.log   one line per transition, the whole record after
//                                        it: {"put": <record>} or {"del": "<id>"}; flock'ed by its
//                                        writer for as long as it lives
//
// A journal that grew well past the records it describes is compacted: generation gen+1 is
// written with one line per live record, fdatasynced, its name made durable, and only then is
// generation gen removed; a crash in between leaves both, absorbed in generation order.
//
// Each transition is one write(2) of its line before the table answers, so a process crash
// (SIGKILL) loses nothing the table acknowledged: the kernel has the bytes. fdatasync is what a
// machine crash needs; the store asks for it where the durability policy says (lease-store/journal.ts),
// once for a whole batch of lines (group commit).
//
// A journal whose writer is gone (its flock is free) is absorbed by the next process that opens
// the table: its last line per record is written into the record files (fsynced, directories
// fsynced), then the journal is removed. A torn last line (a write the crash cut short, or bytes
// a machine crash left unwritten) is one the writer never acted upon and is dropped; a bad line
// before the last one is corruption: the table refuses to open and names the file.
import { closeSync, constants, fdatasync, fdatasyncSync, fstatSync, openSync, readFileSync, readdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { flockSync } from "fs-ext";
import { recordProblem, recordText, type LeaseRecord } from "../../core/lease-record.ts";
import { HEX64 } from "../../core/message-checks.ts";
import { RuntimeFailure } from "../../errors.ts";
import { randomHex } from "../../util/random-hex.ts";
import { fsyncDir, writeFully } from "./durable.ts";
import { byUpdated, readRecordFiles, shardName } from "./lease-files.ts";
import { SHARD_COUNT } from "./work-dir.ts";

export const JOURNAL_FILE = /^journal-[0-9]+-[0-9a-f]{12}-([0-9]+)\.log$/;

/** A journal line that is not a valid transition (and not a torn tail). */
export class CorruptJournalError extends RuntimeFailure {
  constructor(path: string, line: number, reason: string) {
    super(
      `lease journal ${path} is corrupt at line ${line} (${reason}); it is never skipped or removed automatically: ` +
        `inspect it, and move it away only once no fuzzfleet process uses this campaign`,
    );
  }
}

/** The last state of every record a journal names: the record, or null once deleted. */
export type JournalState = Map<string, LeaseRecord | null>;

export class LeaseJournal {
  readonly path: string;
  readonly stats = { lines: 0, syncs: 0, bytes: 0 };
  private readonly fd: number;
  /** Bytes written in all, and how many of them an fdatasync covered. */
  private written = 0;
  private synced = 0;

  private constructor(path: string, fd: number, private readonly root: string, private readonly base: string, readonly generation: number) {
    this.path = path;
    this.fd = fd;
  }

  /** A fresh journal in `root`, locked by this process for as long as it lives. */
  static create(root: string, base = `journal-${process.pid}-${randomHex(6)}`, generation = 0): LeaseJournal {
    const path = join(root, `${base}-${generation}.log`);
    const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_APPEND | constants.O_NOFOLLOW, 0o600);
    try {
      flockSync(fd, "exnb");
      // The name must survive a machine crash before any line written into it counts.
      fsyncDir(root);
    } catch (err) {
      closeSync(fd);
      unlinkSync(path);
      throw err;
    }
    return new LeaseJournal(path, fd, root, base, generation);
  }

  /**
   * Compaction: the next generation holding exactly `records`, synced and durably named, then
   * this one removed (and closed). Returns the new journal.
   */
  compact(records: readonly LeaseRecord[]): LeaseJournal {
    const next = LeaseJournal.create(this.root, this.base, this.generation + 1);
    try {
      next.put(records);
      next.sync();
    } catch (err) {
      next.close();
      unlinkSync(next.path);
      throw err;
    }
    unlinkSync(this.path);
    fsyncDir(this.root);
    this.close();
    return next;
  }

  close(): void {
    closeSync(this.fd);
  }

  /** Appends the records' lines in one write: after it returns a process crash loses none of them. */
  put(records: readonly LeaseRecord[]): void {
    if (records.length === 0) return;
    this.append(records.map((r) => recordText({ put: r })).join(""), records.length);
  }

  del(id: string): void {
    this.append(recordText({ del: id }), 1);
  }

  /** Whether lines were written since the last sync. */
  get dirty(): boolean {
    return this.written > this.synced;
  }

  /** The end of what is written so far: synced once syncedThrough() reaches it. */
  get end(): number {
    return this.written;
  }

  get syncedThrough(): number {
    return this.synced;
  }

  /** sync() in libuv's pool: covers what was written before the call. Resolves once durable. */
  syncAsync(): Promise<void> {
    const target = this.written;
    if (target <= this.synced) return Promise.resolve();
    return new Promise((ok, fail) =>
      fdatasync(this.fd, (err) => {
        if (err) return fail(err);
        this.synced = Math.max(this.synced, target);
        this.stats.syncs++;
        ok();
      }),
    );
  }

  /** fdatasync of everything written so far (nothing when nothing is new): one per batch of lines. */
  sync(): void {
    if (this.written <= this.synced) return;
    fdatasyncSync(this.fd);
    this.synced = this.written;
    this.stats.syncs++;
  }

  private append(text: string, lines: number): void {
    const bytes = Buffer.from(text, "utf8");
    writeFully(this.fd, bytes);
    this.written += bytes.length;
    this.stats.lines += lines;
    this.stats.bytes += bytes.length;
  }
}

/** Parses a journal's text: the last state per record; a torn tail is dropped. */
export function parseJournal(path: string, text: string): JournalState {
  const state: JournalState = new Map();
  const lines = text.split("\n");
  // The part after the last newline was never completely written: a torn tail.
  lines.pop();
  for (const [i, line] of lines.entries()) {
    const last = i === lines.length - 1;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      // A machine crash can leave the unsynced end of the file as zeros or stale bytes.
      if (last) break;
      throw new CorruptJournalError(path, i + 1, "not JSON");
    }
    const why = entryProblem(value);
    if (why !== null) {
      if (last) break;
      throw new CorruptJournalError(path, i + 1, why);
    }
    const entry = value as { put?: LeaseRecord; del?: string };
    if (entry.put) state.set(entry.put.id, entry.put);
    else state.set(entry.del!, null);
  }
  return state;
}

function entryProblem(v: unknown): string | null {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return "not a JSON object";
  const keys = Object.keys(v);
  if (keys.length !== 1 || (keys[0] !== "put" && keys[0] !== "del")) return "a line must be exactly {put} or {del}";
  const e = v as Record<string, unknown>;
  if (keys[0] === "del") return typeof e.del === "string" && HEX64.test(e.del) ? null : "del must name a record id";
  const r = e.put as { id?: unknown } | null;
  if (typeof r !== "object" || r === null || typeof r.id !== "string" || !HEX64.test(r.id)) return "put must hold a record with an id";
  const problem = recordProblem(r, r.id);
  return problem === null ? null : `record ${r.id}: ${problem}`;
}

/** The journal files in `root`, by generation then name; none when `root` is absent. */
function journalsInOrder(root: string): string[] {
  let names: string[];
  try {
    names = readdirSync(root).filter((n) => JOURNAL_FILE.test(n));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const gen = (n: string) => Number(JOURNAL_FILE.exec(n)![1]);
  return names.sort((a, b) => gen(a) - gen(b) || (a < b ? -1 : a > b ? 1 : 0));
}

/** A journal opened for reading, never through a symlink and only as a regular file; null when it is gone. */
function openJournal(path: string): number | null {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw new RuntimeFailure(`cannot open the lease journal ${path}: ${(err as Error).message}; nothing is followed through a symlink`);
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    throw new RuntimeFailure(`lease journal ${path} is not a regular file; move it away once no fuzzfleet process uses this campaign`);
  }
  return fd;
}

/**
 * Every journal in `root` whose writer is gone: `absorb(state)` writes its states into the record
 * files (durably), then the journal is removed and `root` fsynced. Journals of live writers (their
 * flock is held) are left alone. Returns how many were absorbed.
 */
export function absorbStaleJournals(root: string, absorb: (state: JournalState, path: string) => void): number {
  let n = 0;
  // One session's generations in order (only one session's journals are ever left behind: each
  // absorbs them before it writes its own).
  for (const name of journalsInOrder(root)) {
    const path = join(root, name);
    const fd = openJournal(path);
    if (fd === null) continue; // absorbed meanwhile by another process
    try {
      try {
        flockSync(fd, "exnb");
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "EAGAIN" || code === "EWOULDBLOCK") continue; // its writer lives
        throw err;
      }
      absorb(parseJournal(path, readFileSync(fd, "utf8")), path);
      unlinkSync(path);
      fsyncDir(root);
      n++;
    } finally {
      closeSync(fd);
    }
  }
  return n;
}

/**
 * The records a table at `root` holds, read without writing, locking or creating anything (for a
 * reader of a campaign's files): the record files, with every journal in `root` — one whose writer
 * is gone and not yet absorbed, or a live writer's as far as it is written — laid over them in
 * generation order. Nothing is followed through a symlink.
 */
export function readLeaseRecordsNoWrite(root: string, shardCount = SHARD_COUNT): LeaseRecord[] {
  const shardOf = (id: string) => shardName(Number.parseInt(id.slice(0, 8), 16) % shardCount);
  const byId = new Map(readRecordFiles(root, shardOf).map((r) => [r.id, r]));
  for (const name of journalsInOrder(root)) {
    const path = join(root, name);
    const fd = openJournal(path);
    if (fd === null) continue; // absorbed meanwhile
    try {
      for (const [id, rec] of parseJournal(path, readFileSync(fd, "utf8"))) {
        if (rec === null) byId.delete(id);
        else byId.set(id, rec);
      }
    } finally {
      closeSync(fd);
    }
  }
  return [...byId.values()].sort(byUpdated);
}
