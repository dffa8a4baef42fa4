// WalSync with a real SQLite file: the writer's commits stop syncing themselves, a sync makes
// them durable, the checkpointer thread keeps the WAL from growing, and close hands the store
// back whole (the writer's close then removes the WAL).
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import Database from "better-sqlite3";
import { openStore } from "../../src/store/db.ts";
import { WalSync } from "../../src/store/wal-sync.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-walsync-"));
after(() => rmSync(root, { recursive: true, force: true }));
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("commits defer their fsync to sync(); the checkpointer keeps the WAL bounded; close leaves a whole store and no WAL", { timeout: 30_000 }, async () => {
  const path = join(root, "a.db");
  const db = openStore(path, { journal: "wal" });
  db.exec("CREATE TABLE t (v TEXT)");
  const logged: string[] = [];
  const w = new WalSync(db, path, { log: (l) => logged.push(l), everyMs: 50 });
  assert.equal(db.pragma("synchronous", { simple: true }), 1, "NORMAL");
  assert.equal(db.pragma("wal_autocheckpoint", { simple: true }), 0, "no checkpoint on the writer's thread");
  const insert = db.prepare("INSERT INTO t VALUES (?)");
  const burst = async () => {
    for (let i = 0; i < 300; i++) insert.run("x".repeat(2000));
    await w.sync();
  };
  await burst();
  const grown = statSync(`${path}-wal`).size;
  assert.ok(grown > 300 * 2000, `the burst is in the WAL (${grown} bytes)`);
  // Once the checkpointer copied it, the next burst starts the WAL over instead of growing it.
  for (let i = 0; i < 5; i++) {
    await pause(150);
    await burst();
  }
  const after5 = statSync(`${path}-wal`).size;
  assert.ok(after5 < 2 * grown, `WAL ${after5} bytes after six bursts of ${grown}: it starts over`);
  await w.close();
  await assert.rejects(w.sync(), /closed/);
  db.close();
  assert.equal(existsSync(`${path}-wal`), false, "the writer closed last and removed the WAL");
  const r = new Database(path, { readonly: true });
  assert.equal((r.prepare("SELECT COUNT(*) AS n FROM t").get() as { n: number }).n, 1800);
  r.close();
  assert.deepEqual(logged, []);
});

test("a store in TRUNCATE mode is refused: deferred durability needs the WAL", () => {
  const path = join(root, "b.db");
  const db = openStore(path, { journal: "truncate" });
  assert.throws(() => new WalSync(db, path, { log: () => {} }), /truncate mode; deferred durability needs WAL/);
  db.close();
});
