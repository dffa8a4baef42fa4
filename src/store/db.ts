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
import { findSignature } from "./signature.ts";

export type Db = Database.Database;

/**
 * Each entry upgrades the schema by one version: SQL, or a function for a step SQL cannot say
 * (it runs in the same transaction). Additive only: nothing existing changes meaning.
 */
const MIGRATIONS: readonly (string | ((db: Db) => void))[] = [
  // 1: the initial schema (fuzzrun-compatible names).
  `
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
  CREATE TABLE generation (
    id INTEGER PRIMARY KEY,
    gen_hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    note TEXT
  );
  CREATE TABLE lane (
    id INTEGER PRIMARY KEY,
    generation_id INTEGER NOT NULL REFERENCES generation(id),
    name TEXT NOT NULL,
    params_json TEXT NOT NULL,
    base_seed INTEGER NOT NULL,
    cursor INTEGER NOT NULL,
    seeds_per_sec REAL,
    retired INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
  );
  CREATE INDEX lane_active ON lane (generation_id, name, retired);
  CREATE TABLE session (
    id INTEGER PRIMARY KEY,
    generation_id INTEGER NOT NULL REFERENCES generation(id),
    started_at TEXT NOT NULL,
    ended_at TEXT,
    requested_seconds INTEGER,
    status TEXT NOT NULL,
    app_build TEXT,
    mode TEXT NOT NULL DEFAULT 'local',
    coordinator_host TEXT,
    port INTEGER
  );
  CREATE TABLE chunk (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES session(id),
    lane_id INTEGER NOT NULL REFERENCES lane(id),
    seed_from INTEGER NOT NULL,
    seed_to INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    seconds REAL,
    app_build TEXT,
    status TEXT NOT NULL,
    clean INTEGER DEFAULT 0,
    finds INTEGER DEFAULT 0,
    quarantine INTEGER DEFAULT 0,
    unshrunk INTEGER DEFAULT 0,
    worker_id INTEGER,
    leased_at TEXT,
    last_heartbeat TEXT
  );
  CREATE INDEX chunk_lane ON chunk (lane_id, status);
  CREATE TABLE worker (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES session(id),
    host TEXT NOT NULL,
    addr TEXT,
    jobs INTEGER NOT NULL,
    gen_hash TEXT,
    app_build TEXT,
    connected_at TEXT NOT NULL,
    last_seen TEXT,
    disconnected_at TEXT,
    state TEXT NOT NULL DEFAULT 'live'
  );
  CREATE TABLE worker_rate (
    worker_id INTEGER NOT NULL REFERENCES worker(id),
    lane_id INTEGER NOT NULL REFERENCES lane(id),
    seeds_per_sec REAL,
    PRIMARY KEY (worker_id, lane_id)
  );
  CREATE TABLE failure (
    id INTEGER PRIMARY KEY,
    generation_id INTEGER NOT NULL REFERENCES generation(id),
    lane_id INTEGER NOT NULL REFERENCES lane(id),
    dedup_key TEXT NOT NULL,
    bucket TEXT NOT NULL,
    first_seed INTEGER NOT NULL,
    shrunk INTEGER NOT NULL,
    message TEXT,
    repro TEXT,
    artifact_dir TEXT,
    first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL,
    first_app_build TEXT,
    hits INTEGER NOT NULL DEFAULT 1,
    state TEXT NOT NULL DEFAULT 'open',
    resolved_at TEXT,
    resolved_app_build TEXT,
    UNIQUE (generation_id, dedup_key)
  );
  CREATE TABLE failure_seed (
    failure_id INTEGER NOT NULL REFERENCES failure(id),
    seed INTEGER NOT NULL,
    chunk_id INTEGER REFERENCES chunk(id),
    PRIMARY KEY (failure_id, seed)
  );
  `,
  // 2: two levels of identity, background minimization, quarantine reasons.
  `
  ALTER TABLE failure ADD COLUMN signature TEXT;
  ALTER TABLE failure ADD COLUMN minimize_state TEXT;
  ALTER TABLE failure ADD COLUMN merged_into INTEGER REFERENCES failure(id);
  ALTER TABLE failure ADD COLUMN minimize_note TEXT;
  CREATE INDEX failure_minimize ON failure (generation_id, minimize_state);
  CREATE INDEX failure_signature ON failure (generation_id, signature);
  CREATE TABLE minimize_unit (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES session(id),
    lane_id INTEGER NOT NULL REFERENCES lane(id),
    worker_id INTEGER,
    finds INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    seconds REAL,
    status TEXT NOT NULL,
    merged INTEGER NOT NULL DEFAULT 0,
    new_failures INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0
  );
  CREATE TABLE minimize_find (
    unit_id INTEGER NOT NULL REFERENCES minimize_unit(id),
    failure_id INTEGER NOT NULL REFERENCES failure(id),
    PRIMARY KEY (unit_id, failure_id)
  );
  CREATE TABLE quarantine_reason (
    chunk_id INTEGER NOT NULL REFERENCES chunk(id),
    reason TEXT NOT NULL,
    inconclusive INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (chunk_id, reason)
  );
  `,
  // 2 (continued in the same version's transaction): existing rows get their signature, and
  // every unshrunk failure becomes what it always was, a find pending minimization.
  (db) => {
    const set = db.prepare("UPDATE failure SET signature = ? WHERE id = ?");
    for (const row of db.prepare("SELECT id, bucket, message FROM failure").all() as { id: number; bucket: string; message: string | null }[]) {
      set.run(findSignature(row.bucket, row.message, null), row.id);
    }
    db.exec("UPDATE failure SET minimize_state = 'pending' WHERE shrunk = 0");
  },
];

/** The schema version each migration step leaves behind (two steps may share one version). */
const STEP_VERSION: readonly number[] = [1, 2, 2];

export const SCHEMA_VERSION = STEP_VERSION[STEP_VERSION.length - 1]!;

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

function schemaVersion(db: Db): number {
  return Number(db.pragma("user_version", { simple: true }));
}

function newerSchema(path: string, version: number): StoreError {
  return new StoreError(
    `the store ${path} has schema version ${version}, newer than this fuzzfleet understands (${SCHEMA_VERSION}); upgrade fuzzfleet`,
  );
}

function migrate(db: Db, path: string): void {
  const from = schemaVersion(db);
  if (from > SCHEMA_VERSION) throw newerSchema(path, from);
  if (from === SCHEMA_VERSION) return;
  const upgrade = db.transaction(() => {
    MIGRATIONS.forEach((step, i) => {
      if (STEP_VERSION[i]! <= from) return;
      if (typeof step === "string") db.exec(step);
      else step(db);
    });
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  });
  upgrade.immediate();
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

/** UTC ISO-8601 with seconds precision: the store's timestamp format. */
export function isoNow(date: Date = new Date()): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

const statements = new WeakMap<Db, Map<string, Database.Statement>>();

/** A prepared statement, compiled once per connection. */
export function stmt(db: Db, sql: string): Database.Statement {
  let cache = statements.get(db);
  if (!cache) statements.set(db, (cache = new Map()));
  let s = cache.get(sql);
  if (!s) cache.set(sql, (s = db.prepare(sql)));
  return s;
}

/**
 * Runs `fn` atomically: in a transaction of its own, or simply inside the caller's when one is
 * open already (the caller's transaction, or its savepoint, then makes it atomic). Each nested
 * savepoint is two more statements, and statements are what a busy coordinator pays for.
 */
export function atomically<T>(db: Db, fn: () => T): T {
  return db.inTransaction ? fn() : db.transaction(fn)();
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

