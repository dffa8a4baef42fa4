// The SQLite adapter of the sweep store port (store/sqlite/): its units of work nest as the commit
// queue needs them, and SQLite's refusals come out in the port's words. Real SQLite files.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import Database from "better-sqlite3";
import { openStore } from "../../src/store/db.ts";
import { openSessionStore, openSweepStore, sqliteSweepStore } from "../../src/store/sqlite/index.ts";
import type { SqliteSweepStore } from "../../src/store/sqlite/sweep-store.ts";

const root = mkdtempSync(join(tmpdir(), "ff-port-"));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const storePath = () => join(root, `s${n++}.db`);

test("a store's units of work: a nested unit that throws takes back its own writes alone; atomically joins the open unit", () => {
  const store = openSweepStore(storePath(), { journal: "truncate" });
  try {
    const gen = store.startGeneration(null, "aa".repeat(32), "initial");
    store.transaction(() => {
      store.restartLane(null, gen, "kept", "{}", 0);
      assert.throws(() =>
        store.transaction(() => {
          store.restartLane(null, gen, "taken back", "{}", 0);
          throw new Error("handler bug");
        }),
      );
      assert.throws(() =>
        store.transaction(() => {
          store.atomically(() => store.restartLane(null, gen, "inside the nested unit", "{}", 0));
          throw new Error("also taken back");
        }),
      );
      assert.equal(store.inTransaction, true);
    });
    assert.equal(store.inTransaction, false);
    assert.deepEqual(
      store.activeLanes(gen).map((l) => l.name),
      ["kept"],
    );
  } finally {
    store.close();
  }
});

test("SQLite's refusals in the port's words: a lock held by another process is 'busy', a damaged file 'corrupt'; a constraint or a plain error is no refusal", () => {
  const path = storePath();
  const store = openSweepStore(path, { journal: "truncate" });
  const reader = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const gen = store.startGeneration(null, "bb".repeat(32), "initial");
    store.setLockWait(0);
    reader.prepare("BEGIN").run();
    reader.prepare("SELECT count(*) FROM lane").get();
    let busy: unknown = null;
    try {
      store.transaction(() => store.restartLane(null, gen, "blocked", "{}", 0));
    } catch (err) {
      busy = err;
    }
    assert.deepEqual(store.refusalOf(busy), { code: "busy", detail: "SQLITE_BUSY" });
    reader.prepare("ROLLBACK").run();
    let constraint: unknown = null;
    try {
      store.saveQuarantineReasons(999_999, [{ reason: "no such chunk", inconclusive: false, count: 1 }]);
    } catch (err) {
      constraint = err;
    }
    assert.match(String((constraint as { code?: string }).code), /^SQLITE_CONSTRAINT/);
    assert.equal(store.refusalOf(constraint), null);
    assert.equal(store.refusalOf(new Error("SQLITE_BUSY: not from SQLite")), null);
    assert.deepEqual(store.refusalOf(new Database.SqliteError("database disk image is malformed", "SQLITE_CORRUPT")), { code: "corrupt", detail: "SQLITE_CORRUPT" });
    assert.deepEqual(store.refusalOf(new Database.SqliteError("database or disk is full", "SQLITE_FULL")), { code: "full", detail: "SQLITE_FULL" });
    assert.deepEqual(store.refusalOf(new Database.SqliteError("disk I/O error", "SQLITE_IOERR_FSYNC")), { code: "io", detail: "SQLITE_IOERR_FSYNC" });
    assert.deepEqual(store.refusalOf(new Database.SqliteError("attempt to write a readonly database", "SQLITE_READONLY")), { code: "readonly", detail: "SQLITE_READONLY" });
  } finally {
    reader.close();
    store.close();
  }
});

test("a store over a connection its opener keeps: one port per connection, and closing the port leaves the connection open", () => {
  const db = openStore(storePath(), { journal: "truncate" });
  try {
    const store = sqliteSweepStore(db);
    assert.equal(sqliteSweepStore(db), store);
    store.close();
    assert.equal(db.open, true);
    assert.equal(store.currentGeneration(), undefined);
  } finally {
    db.close();
  }
});

test("a session's store: its opening writes are durable at once; in WAL mode deferDurability hands commits to sync(), and settle() takes that back before the last writes", { timeout: 30_000 }, async () => {
  const path = storePath();
  const logged: string[] = [];
  const store = openSessionStore(path, { journal: "wal", log: (l) => logged.push(l) });
  // The adapter's own connection, to read its pragmas.
  const db = (store as unknown as SqliteSweepStore).db;
  const synchronous = () => db.pragma("synchronous", { simple: true });
  assert.equal(synchronous(), 2, "FULL while the session opens");
  const gen = store.startGeneration(null, "cc".repeat(32), "initial");
  const durability = store.deferDurability();
  assert.ok(durability !== null, "WAL: commits are made durable off the event loop");
  assert.equal(store.deferDurability(), durability, "deferred once");
  assert.equal(synchronous(), 1, "NORMAL: a commit returns before its fsync");
  store.restartLane(null, gen, "a", "{}", 0);
  await durability.sync();
  store.setLockWait(25);
  await store.settle();
  await assert.rejects(durability.sync(), /closed/, "the deferred durability ended (its checkpointer and the WAL's descriptor closed)");
  assert.equal(synchronous(), 2, "the last writes are durable when they return");
  assert.equal(db.pragma("busy_timeout", { simple: true }), 5_000, "and wait for a lock as long as at opening");
  store.endSession(store.startSession({ generationId: gen, requestedSeconds: 60, appBuild: null, transport: "local", host: "h", port: null }), "done");
  store.close();
  const reader = openSweepStore(path, { readonly: true });
  try {
    assert.deepEqual(
      reader.activeLanes(gen).map((l) => l.name),
      ["a"],
    );
    assert.deepEqual(
      reader.recentSessions(5).map((s) => s.status),
      ["done"],
    );
  } finally {
    reader.close();
  }
  assert.deepEqual(logged, []);
});

test("a session's store on a TRUNCATE journal defers nothing: every commit is durable when it returns", async () => {
  const store = openSessionStore(storePath(), { journal: "truncate", log: () => assert.fail("nothing to say") });
  try {
    assert.equal(store.deferDurability(), null);
    assert.equal((store as unknown as SqliteSweepStore).db.pragma("synchronous", { simple: true }), 2);
    await store.settle();
  } finally {
    store.close();
  }
});
