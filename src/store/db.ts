// The sweep store: one SQLite file that users may query directly, so table and column names are
// part of the product (docs/store.md). It may live on a network filesystem beside the artifacts,
// hence journal_mode=TRUNCATE (never WAL: WAL needs a shared-memory file that NFS cannot provide)
// and a single writer at a time, guaranteed by the campaign lock, not by SQLite.
import Database from "better-sqlite3";
import { existsSync } from "node:fs";
import { StoreError } from "../errors.ts";

export type Db = Database.Database;

/** Each entry upgrades the schema by one version. Additive only: nothing existing changes meaning. */
const MIGRATIONS: readonly string[] = [
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
];

export const SCHEMA_VERSION = MIGRATIONS.length;

export interface OpenOptions {
  /** Read-only commands never create, migrate or write the file. */
  readonly?: boolean;
  /** How long a statement waits for another process's write lock (ms). */
  busyTimeoutMs?: number;
}

/** Opens (and for writers creates and migrates) the store at `path`. */
export function openStore(path: string, options: OpenOptions = {}): Db {
  const busy = options.busyTimeoutMs ?? 30_000;
  if (options.readonly) return openReadonly(path, busy);
  let db: Db;
  try {
    db = new Database(path, { timeout: busy });
  } catch (err) {
    throw new StoreError(`cannot open the store ${path}: ${(err as Error).message}`, { cause: err });
  }
  try {
    const mode = String(db.pragma("journal_mode = TRUNCATE", { simple: true })).toLowerCase();
    if (mode !== "truncate") {
      throw new StoreError(
        `SQLite refused journal_mode=TRUNCATE for ${path} (it reports '${mode}'). ` +
          "Another connection probably holds the file in WAL mode; close it and retry.",
      );
    }
    db.pragma("synchronous = FULL");
    db.pragma("foreign_keys = ON");
    migrate(db, path);
    return db;
  } catch (err) {
    db.close();
    if (err instanceof StoreError) throw err;
    if ((err as { code?: string }).code === "SQLITE_BUSY") {
      throw new StoreError(
        `the store ${path} stayed locked by another process for ${busy / 1000}s (another tool holding it open in WAL mode, or a long transaction); close it and retry`,
        { cause: err },
      );
    }
    throw new StoreError(`cannot use the store ${path}: ${(err as Error).message}`, { cause: err });
  }
}

function openReadonly(path: string, busy: number): Db {
  if (!existsSync(path)) {
    throw new StoreError(`no store at ${path} — nothing has been swept yet ('fuzzfleet run --for 30m' creates it)`);
  }
  let db: Db;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true, timeout: busy });
  } catch (err) {
    throw new StoreError(`cannot open the store ${path}: ${(err as Error).message}`, { cause: err });
  }
  const version = schemaVersion(db);
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
    for (let v = from; v < SCHEMA_VERSION; v++) db.exec(MIGRATIONS[v]!);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  });
  upgrade.immediate();
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
