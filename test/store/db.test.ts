// The store's promises: the journal mode chosen by file system and read back, versioned additive
// schema, read-only opens that never create or migrate and survive a writer that died mid-commit.
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { chooseJournal, networkFileSystem, openStore } from "../../src/store/db.ts";
import { SCHEMA_VERSION } from "../../src/store/migrations.ts";
import { StoreError } from "../../src/errors.ts";

const require = createRequire(import.meta.url);
const root = mkdtempSync(join(tmpdir(), "fuzzfleet-store-"));
after(() => rmSync(root, { recursive: true, force: true }));

test("a writer on a local file system opens in WAL mode with synchronous=FULL and the current schema", () => {
  const db = openStore(join(root, "a.db"));
  try {
    assert.equal(chooseJournal(join(root, "a.db"), "auto").mode, "wal");
    assert.equal(db.pragma("journal_mode", { simple: true }), "wal");
    assert.equal(db.pragma("synchronous", { simple: true }), 2);
    assert.equal(db.pragma("user_version", { simple: true }), SCHEMA_VERSION);
    const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map((t) => t.name);
    assert.deepEqual(tables, [
      "build_range", "chunk", "chunk_tally", "distinct_history", "failure", "failure_seed", "generation", "lane", "lane_failure", "meta", "minimize_find", "minimize_unit",
      "quarantine_reason", "quarantine_tally", "session", "sweep_history", "sweep_timeline", "worker", "worker_rate",
    ]);
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

test("[store] journal = truncate keeps a rollback journal; a store left in WAL mode is switched back", () => {
  const path = join(root, "wal.db");
  const other = new Database(path);
  other.pragma("journal_mode = WAL");
  other.close();
  const db = openStore(path, { journal: "truncate" });
  assert.equal(db.pragma("journal_mode", { simple: true }), "truncate");
  db.close();
  const again = openStore(path);
  assert.equal(again.pragma("journal_mode", { simple: true }), "wal", "auto switches a local store to WAL");
  again.close();
});

test("a WAL store held open by another connection cannot be switched to TRUNCATE: a clear error", () => {
  const path = join(root, "held.db");
  const other = new Database(path);
  other.pragma("journal_mode = WAL");
  other.prepare("CREATE TABLE t (x)").run();
  try {
    assert.throws(
      () => openStore(path, { busyTimeoutMs: 50, journal: "truncate" }),
      (err: unknown) => err instanceof StoreError && /TRUNCATE|locked|busy/i.test((err as Error).message),
    );
  } finally {
    other.close();
  }
});

test("the network file systems that get TRUNCATE are named from statfs; a local one gets WAL", () => {
  assert.equal(networkFileSystem(root), null);
  assert.deepEqual(chooseJournal(join(root, "x.db"), "auto"), { mode: "wal", why: "a local file system" });
  assert.deepEqual(chooseJournal(join(root, "x.db"), "truncate"), { mode: "truncate", why: '[store] journal = "truncate"' });
});

/** A store whose writer was killed mid-transaction after spilling pages: a hot journal (TRUNCATE) or uncommitted WAL frames. */
function killWriterMidCommit(path: string, journal: "truncate" | "wal"): void {
  const db = openStore(path, { journal });
  db.exec("CREATE TABLE filler (x TEXT)");
  const fill = db.prepare("INSERT INTO filler VALUES (?)");
  db.transaction(() => {
    for (let i = 0; i < 2000; i++) fill.run("x".repeat(500));
  })();
  db.close();
  const script = `
    const Database = require(${JSON.stringify(require.resolve("better-sqlite3"))});
    const db = new Database(${JSON.stringify(path)});
    db.pragma("cache_size = 2");
    db.exec("BEGIN IMMEDIATE");
    db.exec("UPDATE filler SET x = x || 'y'");
    process.kill(process.pid, "SIGKILL");`;
  const r = spawnSync(process.execPath, ["-e", script]);
  assert.equal(r.signal, "SIGKILL", String(r.stderr));
}

for (const journal of ["truncate", "wal"] as const) {
  test(`a read-only open after a writer died mid-commit (${journal}) reads the last committed state`, () => {
    const path = join(root, `hot-${journal}.db`);
    killWriterMidCommit(path, journal);
    if (journal === "truncate") assert.ok(statSync(`${path}-journal`).size > 0, "the writer left a hot journal");
    const db = openStore(path, { readonly: true });
    try {
      const rows = db.prepare("SELECT COUNT(*) AS n, SUM(length(x)) AS bytes FROM filler").get() as { n: number; bytes: number };
      assert.deepEqual(rows, { n: 2000, bytes: 2000 * 500 }, "the uncommitted update is gone");
    } finally {
      db.close();
    }
  });
}

test("a reading open refuses writes and, closing last, leaves no -wal or -shm file behind", () => {
  const path = join(root, "reader.db");
  openStore(path, { journal: "wal" }).close();
  assert.ok(!existsSync(`${path}-wal`) && !existsSync(`${path}-shm`), "the writer removed them when it closed");
  const db = openStore(path, { readonly: true });
  try {
    assert.ok(db.prepare("SELECT COUNT(*) AS n FROM sqlite_master").get());
    assert.throws(() => db.exec("CREATE TABLE x (y)"), /readonly|query_only|attempt to write/i);
  } finally {
    db.close();
  }
  assert.deepEqual([existsSync(`${path}-wal`), existsSync(`${path}-shm`)], [false, false], "status and failures leave the directory as they found it");
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
