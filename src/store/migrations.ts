// The sweep store's schema and its upgrades: each step moves a store written by an older
// fuzzfleet one version up, inside one transaction; a store newer than this build is refused.
import { StoreError } from "../errors.ts";
import type { Db } from "./statement.ts";
import { findSignature } from "./signature.ts";
import { rebuildTallies } from "./tallies.ts";
import { rebuildBuildRanges } from "./build-ranges.ts";

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
  // 3: the views' aggregates (tallies.ts, history.ts), kept by the statements that book chunks
  // and failures, and the indexes that let a view read a lane's chunks ahead of its cursor and
  // the chunks in flight without reading every chunk.
  `
  CREATE TABLE chunk_tally (
    lane_id INTEGER NOT NULL REFERENCES lane(id),
    app_build TEXT NOT NULL,
    chunks INTEGER NOT NULL DEFAULT 0,
    seeds INTEGER NOT NULL DEFAULT 0,
    seconds REAL NOT NULL DEFAULT 0,
    finds INTEGER NOT NULL DEFAULT 0,
    quarantine INTEGER NOT NULL DEFAULT 0,
    aborted INTEGER NOT NULL DEFAULT 0,
    reissued INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (lane_id, app_build)
  );
  CREATE TABLE lane_failure (
    lane_id INTEGER NOT NULL REFERENCES lane(id),
    failure_id INTEGER NOT NULL REFERENCES failure(id),
    hits INTEGER NOT NULL,
    PRIMARY KEY (lane_id, failure_id)
  );
  CREATE INDEX lane_failure_failure ON lane_failure (failure_id);
  CREATE TABLE sweep_timeline (
    generation_id INTEGER PRIMARY KEY REFERENCES generation(id),
    origin INTEGER NOT NULL,
    width INTEGER NOT NULL,
    last_end REAL NOT NULL
  );
  CREATE TABLE sweep_history (
    generation_id INTEGER NOT NULL REFERENCES generation(id),
    lane_id INTEGER NOT NULL REFERENCES lane(id),
    slot INTEGER NOT NULL,
    seeds REAL NOT NULL DEFAULT 0,
    finds INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (generation_id, lane_id, slot)
  );
  CREATE TABLE distinct_history (
    generation_id INTEGER NOT NULL REFERENCES generation(id),
    slot INTEGER NOT NULL,
    n INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (generation_id, slot)
  );
  CREATE INDEX chunk_lane_reach ON chunk (lane_id, status, seed_to);
  CREATE INDEX chunk_held ON chunk (session_id) WHERE status IN ('running', 'leased');
  CREATE TABLE quarantine_tally (
    lane_id INTEGER NOT NULL REFERENCES lane(id),
    reason TEXT NOT NULL,
    inconclusive INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (lane_id, reason)
  );
  `,
  // 3 (continued): the aggregates of the rows already there.
  (db) => rebuildTallies(db),
  // 4: how a worker's files reach the campaign ('shared' directory or 'transfer' over the connection; null: before this column, shared).
  `
  ALTER TABLE worker ADD COLUMN files TEXT;
  `,
  // 5: results bound to the build that produced them: per lane and app build, the seed ranges its
  // complete chunks swept (build-ranges.ts; '' for chunks that named none), and the build a
  // failure was last seen under.
  `
  CREATE TABLE build_range (
    lane_id INTEGER NOT NULL REFERENCES lane(id),
    app_build TEXT NOT NULL,
    seed_from INTEGER NOT NULL,
    seed_to INTEGER NOT NULL,
    PRIMARY KEY (lane_id, app_build, seed_from)
  );
  CREATE INDEX build_range_seed ON build_range (lane_id, seed_from);
  ALTER TABLE failure ADD COLUMN last_app_build TEXT;
  `,
  // 5 (continued): the ranges of the chunks already there, and each failure's last build: that of
  // the latest chunk that recorded one of its seeds (its first build when none did).
  (db) => {
    rebuildBuildRanges(db);
    db.exec(`UPDATE failure SET last_app_build = COALESCE(
      (SELECT c.app_build FROM failure_seed fs JOIN chunk c ON c.id = fs.chunk_id WHERE fs.failure_id = failure.id ORDER BY fs.chunk_id DESC LIMIT 1),
      first_app_build)`);
  },
];

/** The schema version each migration step leaves behind (two steps may share one version). */
const STEP_VERSION: readonly number[] = [1, 2, 2, 3, 3, 4, 5, 5];

export const SCHEMA_VERSION = STEP_VERSION[STEP_VERSION.length - 1]!;

/** The schema version the file says it has (`user_version`; 0 for a new file). */
export function schemaVersion(db: Db): number {
  return Number(db.pragma("user_version", { simple: true }));
}

/** The refusal of a store written by a newer fuzzfleet. */
export function newerSchema(path: string, version: number): StoreError {
  return new StoreError(
    `the store ${path} has schema version ${version}, newer than this fuzzfleet understands (${SCHEMA_VERSION}); upgrade fuzzfleet`,
  );
}

/** Upgrades a writer's store to SCHEMA_VERSION in one immediate transaction; refuses a newer one. */
export function migrate(db: Db, path: string): void {
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
