// The sweep store: one SQLite file that users may query directly, so table and column names are
// part of the product (docs/store.md). One writer at a time, guaranteed by the campaign lock, not
// by SQLite.
//
// Journal mode (docs/store.md, "Readers and the writer"): WAL where the store lies on a local file
// system, so a reader — `sqlite3` holding a transaction for minutes included — never blocks a
// commit; TRUNCATE (a rollback journal) on a network file system, where WAL's shared-memory index
// cannot work across hosts. `[store] journal` overrides the choice.
import Database from "better-sqlite3";
import { accessSync, closeSync, constants as fsConstants, existsSync, openSync, readSync, statfsSync } from "node:fs";
import { dirname } from "node:path";
import { StoreError } from "../errors.ts";
import { migrate, newerSchema, SCHEMA_VERSION, schemaVersion } from "./migrations.ts";
export { isoNow } from "./records.ts";

export type { Db } from "./statement.ts";
export { atomically, stmt } from "./statement.ts";
import type { Db } from "./statement.ts";

/** What `[store] journal` may say; "auto" picks by file system. */
export type JournalChoice = "auto" | "wal" | "truncate";

export interface OpenOptions {
  /** Read-only commands never create, migrate or write the file (but see openReadonly on hot journals). */
  readonly?: boolean;
  /** How long a statement waits for another process's lock while the store opens (ms). */
  busyTimeoutMs?: number;
  /** Writers: which journal mode to keep the file in (default "auto"). */
  journal?: JournalChoice;
}

/** How long the opening statements wait for another process's lock, by default. */
export const OPEN_BUSY_MS = 5_000;

/** Opens (and for writers creates and migrates) the store at `path`. */
export function openStore(path: string, options: OpenOptions = {}): Db {
  const busy = options.busyTimeoutMs ?? OPEN_BUSY_MS;
  if (options.readonly) return openReadonly(path, busy);
  const journal = chooseJournal(path, options.journal ?? "auto");
  let db: Db;
  try {
    db = new Database(path, { timeout: busy });
  } catch (err) {
    throw new StoreError(`cannot open the store ${path}: ${(err as Error).message}`, { cause: err });
  }
  try {
    const mode = String(db.pragma(`journal_mode = ${journal.mode}`, { simple: true })).toLowerCase();
    if (mode !== journal.mode) {
      throw new StoreError(
        `SQLite refused journal_mode=${journal.mode.toUpperCase()} for ${path} (it reports '${mode}'). ` +
          "Another program probably holds the file open; close it and retry.",
      );
    }
    db.pragma("synchronous = FULL");
    db.pragma("foreign_keys = ON");
    migrate(db, path);
    return db;
  } catch (err) {
    db.close();
    if (err instanceof StoreError) throw err;
    if (isLockedError(err)) {
      throw new StoreError(
        `the store ${path} stayed locked by another process for ${busy / 1000}s (a reader holding a transaction, or a writer outside fuzzfleet); close it and retry`,
        { cause: err },
      );
    }
    throw new StoreError(`cannot use the store ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/** The journal mode the connection `db` has the store in ("wal", "truncate", ...). */
export function journalModeOf(db: Db): string {
  return String(db.pragma("journal_mode", { simple: true })).toLowerCase();
}

/** The journal mode a writer keeps the store in, and why (for the docs and the tests). */
export function chooseJournal(path: string, choice: JournalChoice): { mode: "wal" | "truncate"; why: string } {
  if (choice !== "auto") return { mode: choice, why: `[store] journal = "${choice}"` };
  const fs = networkFileSystem(dirname(path));
  return fs === null ? { mode: "wal", why: "a local file system" } : { mode: "truncate", why: `a network file system (${fs})` };
}

// statfs(2) f_type of file systems whose files other hosts may open too (linux/magic.h). FUSE is
// here because sshfs, GlusterFS and most other FUSE mounts are remote: WAL is not worth the risk.
const NETWORK_FS: ReadonlyMap<number, string> = new Map([
  [0x6969, "nfs"],
  [0x517b, "smb"],
  [0xff534d42, "cifs"],
  [0xfe534d42, "smb2"],
  [0x73757245, "coda"],
  [0x5346414f, "afs"],
  [0x6b414653, "afs"],
  [0x00c36400, "ceph"],
  [0x0bd00bd0, "lustre"],
  [0x47504653, "gpfs"],
  [0x01021997, "9p"],
  [0x7461636f, "ocfs2"],
  [0x01161970, "gfs2"],
  [0x65735546, "fuse"],
]);

/** The name of the network file system `dir` lies on, or null for a local one (or when unknown). */
export function networkFileSystem(dir: string): string | null {
  try {
    return NETWORK_FS.get(Number(statfsSync(dir).type)) ?? null;
  } catch {
    return null;
  }
}

function openReadonly(path: string, busy: number): Db {
  if (!existsSync(path)) {
    throw new StoreError(`no store at ${path} — nothing has been swept yet ('fuzzfleet run --for 30m' creates it)`);
  }
  refuseRemoteWal(path);
  let db = connectReadonly(path, busy);
  let version: number;
  try {
    version = schemaVersion(db);
  } catch (err) {
    db.close();
    if (!isHotJournalError(err)) throw new StoreError(`cannot read the store ${path}: ${(err as Error).message}`, { cause: err });
    rollBackHotJournal(path, busy, err);
    db = connectReadonly(path, busy);
    version = schemaVersion(db);
  }
  if (version > SCHEMA_VERSION) {
    db.close();
    throw newerSchema(path, version);
  }
  if (version < SCHEMA_VERSION) {
    db.close();
    throw new StoreError(
      `the store ${path} has schema version ${version}, this fuzzfleet reads ${SCHEMA_VERSION}; ` +
        "a writing command ('fuzzfleet run') upgrades it in place, additively",
    );
  }
  return db;
}

/**
 * A reading connection. Where this user may write the store, it is opened for writing with
 * `query_only` on: SQLite then refuses every write through it just the same, and, being allowed
 * to write, the connection that closes last removes the WAL's `-wal` and `-shm` files (a
 * read-only connection would leave them behind after every `status`). Elsewhere it is read-only.
 */
function connectReadonly(path: string, busy: number): Db {
  try {
    if (mayWrite(path)) {
      const db = new Database(path, { fileMustExist: true, timeout: busy });
      db.pragma("query_only = ON");
      return db;
    }
    return new Database(path, { readonly: true, fileMustExist: true, timeout: busy });
  } catch (err) {
    throw new StoreError(`cannot open the store ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * A writer that died mid-commit leaves a hot journal, which only a connection that may write can
 * roll back. Any SQLite connection does that on its first read, under SQLite's own locks (a journal
 * is hot only while nobody holds the write lock), so a short read-write open restores the last
 * committed state; without write permission, say what to run instead.
 */
function rollBackHotJournal(path: string, busy: number, cause: unknown): void {
  try {
    accessSync(path, fsConstants.W_OK);
    accessSync(dirname(path), fsConstants.W_OK);
  } catch {
    throw new StoreError(
      `the store ${path} has a journal left by a writer that died mid-commit, and this user may not roll it back; ` +
        "run any fuzzfleet command as the store's owner (for example 'fuzzfleet status'): the rollback restores the last committed state",
      { cause },
    );
  }
  let rw: Db | null = null;
  try {
    rw = new Database(path, { fileMustExist: true, timeout: busy });
    rw.prepare("SELECT count(*) FROM sqlite_master").get();
  } catch (err) {
    throw new StoreError(`the store ${path} has a journal left by a writer that died mid-commit, and rolling it back failed: ${(err as Error).message}`, {
      cause: err,
    });
  } finally {
    rw?.close();
  }
}

/**
 * WAL's index lives in shared memory of the writer's host: another host reading the file through
 * a network mount could see a torn state, and its recovery could damage the writer's index.
 */
function refuseRemoteWal(path: string): void {
  const fs = networkFileSystem(dirname(path));
  if (fs === null || !inWalMode(path)) return;
  throw new StoreError(
    `the store ${path} is in WAL mode (its writer keeps it on a local disk) and this host sees it through ${fs}, which is not safe to read; ` +
      "ask the coordinator instead ('fuzzfleet status --master HOST:PORT'), run the command on the coordinator's host, " +
      "or set [store] journal = \"truncate\" for stores that other hosts read",
  );
}

/** Byte 18 of the database header is 2 for WAL (1 for a rollback journal). */
function inWalMode(path: string): boolean {
  const header = Buffer.alloc(100);
  let fd: number;
  try {
    fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
  } catch {
    return false;
  }
  try {
    return readSync(fd, header, 0, 100, 0) === 100 && header[18] === 2;
  } finally {
    closeSync(fd);
  }
}

/** How long a statement of `db` waits for another process's lock before it fails with SQLITE_BUSY. */
export function setBusyTimeout(db: Db, ms: number): void {
  db.pragma(`busy_timeout = ${Math.max(0, Math.round(ms))}`);
}

/** The SQLite result code of an error (SQLITE_BUSY, SQLITE_IOERR_WRITE, …), or null for any other error. */
export function sqliteCode(err: unknown): string | null {
  if (!(err instanceof Database.SqliteError)) return null;
  return typeof err.code === "string" ? err.code : "SQLITE_ERROR";
}

function isLockedError(err: unknown): boolean {
  const code = sqliteCode(err);
  return code !== null && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"));
}

function isHotJournalError(err: unknown): boolean {
  const code = sqliteCode(err);
  return code === "SQLITE_READONLY_ROLLBACK" || code === "SQLITE_READONLY";
}

function mayWrite(path: string): boolean {
  try {
    accessSync(path, fsConstants.W_OK);
    accessSync(dirname(path), fsConstants.W_OK);
    return true;
  } catch {
    return false;
  }
}

