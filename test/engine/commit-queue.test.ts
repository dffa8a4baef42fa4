// CommitQueue with a real SQLite file: group commit, memory put back with every refused
// transaction, hold and drop while the store is blocked, giving up, and a handler's own error.
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { CommitQueue, StoreBlocked, type Books, type Durability } from "../../src/sweep/engine/commit-queue.ts";
import { StoreError } from "../../src/errors.ts";
import { openStore, type Db } from "../../src/store/db.ts";
import { sqliteSweepStore } from "../../src/store/sqlite/index.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-queue-"));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

/** Books whose memory is one counter, mirrored in a table by the handlers. */
class Counter implements Books<number> {
  value = 0;
  readonly calls: string[] = [];
  committedActions = 0;
  checkpoint(): number {
    this.calls.push("checkpoint");
    return this.value;
  }
  rollback(mark: number): void {
    this.calls.push("rollback");
    this.value = mark;
  }
  committed(): () => void {
    this.calls.push("committed");
    return () => {
      this.committedActions++;
    };
  }
}

function setup(o: { giveUpMs?: number; journal?: "wal" | "truncate"; durability?: Durability } = {}) {
  const path = join(root, `q${n++}.db`);
  const db: Db = openStore(path, { journal: o.journal ?? "truncate" });
  db.exec("CREATE TABLE counter (v INTEGER)");
  db.exec("INSERT INTO counter VALUES (0)");
  const books = new Counter();
  const log: string[] = [];
  const clock = { now: 0 };
  const failures: StoreError[] = [];
  const queue = new CommitQueue(sqliteSweepStore(db), books, {
    giveUpMs: o.giveUpMs ?? 60_000,
    now: () => clock.now,
    log: (l) => log.push(l),
    path,
    retryFirstMs: 5,
    retryMaxMs: 20,
    busyMs: 0,
    onFail: (e) => failures.push(e),
    durability: o.durability,
  });
  const bump = () => {
    books.value++;
    db.prepare("UPDATE counter SET v = v + 1").run();
    return books.value;
  };
  const stored = () => (db.prepare("SELECT v FROM counter").get() as { v: number }).v;
  const reader = () => {
    const r = new Database(path, { readonly: true });
    r.exec("BEGIN");
    r.prepare("SELECT v FROM counter").get();
    return { release: () => (r.exec("COMMIT"), r.close()) };
  };
  return { db, books, log, clock, failures, queue, bump, stored, reader, close: () => (queue.close(), db.close()) };
}

test("handlers queued in one turn share one transaction and settle only after it committed", async () => {
  const s = setup();
  try {
    const results = await Promise.all([s.queue.run(s.bump, "hold"), s.queue.run(s.bump, "drop"), s.queue.run(s.bump, "hold")]);
    assert.deepEqual(results, [1, 2, 3]);
    assert.equal(s.stored(), 3);
    assert.deepEqual(s.queue.stats, { commits: 1, handlers: 3, refused: 0, syncs: 0 });
    assert.deepEqual(s.books.calls, ["checkpoint", "committed"]);
  } finally {
    s.close();
  }
});

test("a handler's own error rejects that handler alone; memory is put back and the others run again from there", async () => {
  const s = setup();
  try {
    const bug = new Error("a bug in a handler");
    const [a, b, c] = await Promise.allSettled([
      s.queue.run(s.bump, "hold"),
      s.queue.run(() => {
        s.books.value += 100;
        throw bug;
      }, "hold"),
      s.queue.run(s.bump, "hold"),
    ]);
    assert.deepEqual(a, { status: "fulfilled", value: 1 });
    assert.deepEqual(b, { status: "rejected", reason: bug });
    assert.deepEqual(c, { status: "fulfilled", value: 2 });
    assert.equal(s.stored(), 2);
    assert.equal(s.books.value, 2, "the failed handler's change to memory is gone");
    assert.deepEqual(s.books.calls, ["checkpoint", "rollback", "checkpoint", "committed"]);
    assert.deepEqual(s.log, [], "a handler's bug is not a store problem");
  } finally {
    s.close();
  }
});

test("a blocked store: memory goes back, 'drop' is refused at once, 'hold' waits and commits when the store takes writes again", async () => {
  const s = setup();
  try {
    await s.queue.run(s.bump, "hold");
    const reader = s.reader();
    const held = s.queue.run(s.bump, "hold");
    await s.queue.whenBlocked();
    assert.equal(s.books.value, 1, "memory says what the store holds");
    assert.deepEqual([s.queue.blocked?.code, s.queue.blocked?.detail], ["busy", "SQLITE_BUSY"]);
    await assert.rejects(s.queue.run(s.bump, "drop"), (e: unknown) => e instanceof StoreBlocked && /is locked by another process/.test((e as Error).message));
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(s.stored(), 1);
    reader.release();
    assert.equal(await held, 2);
    assert.equal(s.stored(), 2);
    assert.equal(s.queue.blocked, null);
    assert.equal(s.log.length, 2, s.log.join("\n"));
    assert.match(s.log[0]!, /^the store .* is locked by another process \(a reader holding a transaction\? .*\) — retrying; nothing is lost \(giving up after 1m00s\)$/);
    assert.match(s.log[1]!, /^the store .* takes writes again after \d+s \(1 change\(s\) were waiting\)$/);
    assert.ok(s.queue.stats.refused >= 2, "it retried");
  } finally {
    s.close();
  }
});

for (const kind of ["hold", "drop"] as const) {
  test(`a store blocked while only 'drop' handlers waited: a '${kind}' handler that comes after it took writes again commits`, async () => {
    const s = setup();
    try {
      const reader = s.reader();
      await assert.rejects(s.queue.run(s.bump, "drop"), StoreBlocked);
      assert.deepEqual([s.queue.blocked?.code, s.queue.blocked?.detail], ["busy", "SQLITE_BUSY"]);
      await new Promise((r) => setTimeout(r, 60)); // past the armed retry (5 ms), which found nothing queued
      reader.release();
      const next = s.queue.run(s.bump, kind);
      const outcome = await Promise.race([next, new Promise((r) => setTimeout(() => r("still waiting after 2 s"), 2_000))]);
      assert.equal(outcome, 1);
      assert.equal(s.stored(), 1);
      assert.equal(s.queue.blocked, null);
      assert.equal(s.log.filter((l) => /takes writes again/.test(l)).length, 1, s.log.join("\n"));
    } finally {
      s.close();
    }
  });
}

test("a 'drop' handler that meets a store still blocked after the retry found nothing queued is refused, and arms the next retry", async () => {
  const s = setup();
  try {
    const reader = s.reader();
    await assert.rejects(s.queue.run(s.bump, "drop"), StoreBlocked);
    await new Promise((r) => setTimeout(r, 60));
    await assert.rejects(s.queue.run(s.bump, "drop"), StoreBlocked);
    assert.equal(s.log.filter((l) => /is locked by another process/.test(l)).length, 1, "said once");
    const held = s.queue.run(s.bump, "hold");
    reader.release();
    assert.equal(await held, 1, "the hold handler ran at the armed retry");
    assert.equal(s.queue.blocked, null);
  } finally {
    s.close();
  }
});

test("a store that stays blocked past the give-up time ends the queue: every waiting handler is rejected, once, with the reason", async () => {
  const s = setup({ giveUpMs: 1_000 });
  const reader = s.reader();
  try {
    const held = s.queue.run(s.bump, "hold");
    await s.queue.whenBlocked();
    s.clock.now = 1_500;
    await assert.rejects(held, (e: unknown) => e instanceof StoreError && /for 2s; giving up\..*give_up_minutes/.test((e as Error).message));
    assert.equal(s.failures.length, 1);
    assert.equal(s.queue.failed, s.failures[0]);
    await assert.rejects(s.queue.run(s.bump, "hold"), (e: unknown) => e === s.failures[0]);
    assert.equal(s.books.value, 0);
  } finally {
    reader.release();
    s.close();
  }
});

test("a damaged store ends the queue at once; it is not retried", async () => {
  const s = setup();
  try {
    const corrupt = new Database.SqliteError("database disk image is malformed", "SQLITE_CORRUPT");
    await assert.rejects(
      s.queue.run(() => {
        throw corrupt;
      }, "hold"),
      (e: unknown) => e instanceof StoreError && /is damaged \(SQLITE_CORRUPT\)/.test((e as Error).message),
    );
    assert.equal(s.failures.length, 1);
    assert.equal(s.queue.stats.refused, 1);
  } finally {
    s.close();
  }
});

test("after close, changes are refused quietly: nothing is logged and nothing is written", async () => {
  const s = setup();
  try {
    s.queue.close();
    await assert.rejects(s.queue.run(s.bump, "hold"), StoreError);
    assert.equal(s.stored(), 0);
    assert.deepEqual(s.log, []);
    assert.deepEqual(s.failures, []);
  } finally {
    s.db.close();
  }
});

test("settled() resolves once nothing is queued: at once when idle, after the commit otherwise, and when the queue fails", async () => {
  const s = setup({ giveUpMs: 200 });
  try {
    await s.queue.settled();
    let committed = false;
    void s.queue.run(s.bump, "hold").then(() => (committed = true));
    await s.queue.settled();
    assert.equal(committed, true, "settled after the handler's transaction committed");
    const reader = s.reader();
    const held = s.queue.run(s.bump, "hold");
    const settled = s.queue.settled();
    await s.queue.whenBlocked();
    s.clock.now = 1_000; // past the give-up time: the next retry fails the queue
    await settled;
    await assert.rejects(held, StoreError);
    reader.release();
  } finally {
    s.close();
  }
});

/** A durability whose syncs the test ends by hand, one at a time. */
function handSync() {
  const waiting: { resolve: () => void; reject: (e: Error) => void }[] = [];
  return {
    waiting,
    sync: () => new Promise<void>((resolve, reject) => waiting.push({ resolve, reject })),
    async end(ok = true) {
      const w = waiting.shift();
      assert.ok(w, "a sync is running");
      if (ok) w.resolve();
      else w.reject(new StoreError("fsync failed: EIO"));
      await new Promise((r) => setImmediate(r));
    },
  };
}

test("with deferred durability a handler settles only after a sync that started after its commit; commits during a sync share the next", async () => {
  const d = handSync();
  const s = setup({ journal: "wal", durability: d });
  try {
    const settled: number[] = [];
    const first = [s.queue.run(s.bump, "hold"), s.queue.run(s.bump, "hold")].map((p) => p.then((v) => settled.push(v)));
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    assert.equal(s.stored(), 2, "committed");
    assert.equal(settled.length, 0, "but nobody is told before it is durable");
    assert.equal(s.books.committedActions, 0, "and nothing that waits for the commit ran");
    assert.equal(d.waiting.length, 1);
    // Two more commits while the first sync runs: they wait for a second one, started after it.
    void s.queue.run(s.bump, "hold").then((v) => settled.push(v));
    await new Promise((r) => setImmediate(r));
    void s.queue.run(s.bump, "drop").then((v) => settled.push(v));
    await new Promise((r) => setImmediate(r));
    assert.equal(s.stored(), 4);
    assert.equal(d.waiting.length, 1, "one sync at a time");
    let quiet = false;
    const whenSettled = s.queue.settled().then(() => (quiet = true));
    await d.end();
    await Promise.all(first);
    assert.deepEqual(settled, [1, 2]);
    assert.equal(s.books.committedActions, 1);
    assert.equal(d.waiting.length, 1, "the next sync started for the commits that came during the first");
    assert.equal(quiet, false, "settled() waits for durability too");
    await d.end();
    await whenSettled;
    assert.deepEqual(settled, [1, 2, 3, 4]);
    assert.equal(s.books.committedActions, 3);
    assert.deepEqual(s.queue.stats, { commits: 3, handlers: 4, refused: 0, syncs: 2 });
  } finally {
    s.close();
  }
});

test("a sync that fails ends the queue: the handlers it held are rejected, nothing waiting for it runs", async () => {
  const d = handSync();
  const s = setup({ journal: "wal", durability: d });
  try {
    const held = assert.rejects(s.queue.run(s.bump, "hold"), /fsync failed: EIO/);
    await new Promise((r) => setImmediate(r));
    await d.end(false);
    await held;
    assert.equal(s.books.committedActions, 0);
    assert.equal(s.failures.length, 1);
    await assert.rejects(s.queue.run(s.bump, "hold"), /fsync failed/);
  } finally {
    s.close();
  }
});
