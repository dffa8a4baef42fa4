// The store's promises: TRUNCATE journal read back, versioned additive schema, read-only opens
// that never create or migrate.
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { openStore, SCHEMA_VERSION } from "../../src/store/db.ts";
import { StoreError } from "../../src/errors.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-store-"));
after(() => rmSync(root, { recursive: true, force: true }));

test("a writer opens in TRUNCATE journal mode with synchronous=FULL and the current schema", () => {
  const db = openStore(join(root, "a.db"));
  try {
    assert.equal(db.pragma("journal_mode", { simple: true }), "truncate");
    assert.equal(db.pragma("synchronous", { simple: true }), 2);
    assert.equal(db.pragma("user_version", { simple: true }), SCHEMA_VERSION);
    const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map((t) => t.name);
    assert.deepEqual(tables, ["chunk", "failure", "failure_seed", "generation", "lane", "meta", "session", "worker", "worker_rate"]);
    const chunkCols = (db.prepare("PRAGMA table_info(chunk)").all() as { name: string }[]).map((c) => c.name);
    assert.deepEqual(chunkCols, [
      "id", "session_id", "lane_id", "seed_from", "seed_to", "started_at", "ended_at", "seconds", "app_build", "status",
      "clean", "finds", "quarantine", "unshrunk", "worker_id", "leased_at", "last_heartbeat",
    ]);
  } finally {
    db.close();
  }
});

test("reopening migrates nothing and keeps the data", () => {
  const path = join(root, "b.db");
  const db = openStore(path);
  db.prepare("INSERT INTO generation (gen_hash, created_at) VALUES ('h', 't')").run();
  db.close();
  const again = openStore(path);
  assert.equal((again.prepare("SELECT COUNT(*) AS n FROM generation").get() as { n: number }).n, 1);
  again.close();
});

test("a store left in WAL mode by another tool is switched back to TRUNCATE, never used as WAL", () => {
  const path = join(root, "wal.db");
  const other = new Database(path);
  other.pragma("journal_mode = WAL");
  other.close();
  const db = openStore(path);
  assert.equal(db.pragma("journal_mode", { simple: true }), "truncate");
  db.close();
});

test("a WAL store held open by another connection is refused with a clear error", () => {
  const path = join(root, "held.db");
  const other = new Database(path);
  other.pragma("journal_mode = WAL");
  other.prepare("CREATE TABLE t (x)").run();
  try {
    assert.throws(() => openStore(path, { busyTimeoutMs: 50 }), (err: unknown) => err instanceof StoreError && /TRUNCATE|locked|busy/i.test((err as Error).message));
  } finally {
    other.close();
  }
});

test("a read-only open never creates a missing store", () => {
  const path = join(root, "missing.db");
  assert.throws(() => openStore(path, { readonly: true }), /no store at .*missing\.db/);
  assert.ok(!existsSync(path));
});

test("a read-only open of a newer schema is refused, naming both versions", () => {
  const path = join(root, "newer.db");
  const db = new Database(path);
  db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
  db.close();
  assert.throws(() => openStore(path, { readonly: true }), new RegExp(`schema version ${SCHEMA_VERSION + 1}.*${SCHEMA_VERSION}`));
  assert.throws(() => openStore(path), /upgrade fuzzfleet/);
});
