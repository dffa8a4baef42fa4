import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { RuntimeFailure } from "../../src/errors.ts";
import { mkdirDurable, writeFileAtomic } from "../../src/explore/state/durable.ts";
import { LockTimeoutError, withFileLock } from "../../src/explore/state/file-lock.ts";
import {
  canonicalManifest,
  CorruptRecordError,
  LeaseTable,
  type CommitManifest,
  type LeaseRecord,
  type WorkPayload,
} from "../../src/explore/state/lease-table.ts";
import { SharedFilesStore } from "../../src/explore/state/lease-store/shared-files.ts";

const HOLDER = fileURLToPath(new URL("../fixtures/explore/lock-holder.ts", import.meta.url));
const RACER = fileURLToPath(new URL("../fixtures/explore/claim-racer.ts", import.meta.url));

const scratch = mkdtempSync(join(tmpdir(), "fuzzfleet-leases-"));
const children = new Set<Child>();
after(async () => {
  for (const c of children) await c.kill();
  rmSync(scratch, { recursive: true, force: true });
});
let dirCount = 0;
function freshRoot(): string {
  return join(scratch, `table-${++dirCount}`, "leases");
}
function freshTable(opts: { lockTimeoutMs?: number } = {}): LeaseTable {
  return new LeaseTable({ root: freshRoot(), ...opts });
}

/** A task id that lands in shard `shard` of a 64-shard table; `n` makes it unique. */
function idIn(shard: number, n: number): string {
  return shard.toString(16).padStart(8, "0") + n.toString(16).padStart(56, "0");
}
function payload(id: string): WorkPayload {
  return { hash: id, origin: "initial" };
}
function recordFile(table: LeaseTable, id: string): string {
  const shard = String(Number.parseInt(id.slice(0, 8), 16) % 64).padStart(3, "0");
  return join(table.root, shard, `${id}.json`);
}
function manifest(over: Partial<CommitManifest> = {}): CommitManifest {
  return { worker: "w1", staging_id: "a".repeat(32), hashes: ["c".repeat(64), "b".repeat(64)], num_generated: 3, ...over };
}
/** A complete, valid record, to be corrupted one field at a time. */
function forged(id: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    schema: 1,
    id,
    status: "leased",
    payload: { hash: id, origin: "initial" },
    owner: "forger",
    previous_owner: "",
    worker: 0,
    token: "forger:0:1:0000000000000000",
    updated: 0,
    attempts: 1,
    steals: 0,
    ...over,
  };
}
function plant(table: LeaseTable, id: string, body: string): string {
  const path = recordFile(table, id);
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, body);
  return path;
}

const A = idIn(1, 1);
const B = idIn(1, 2);
const C = idIn(5, 3);

describe("lease table fencing", () => {
  it("fencing prevents duplicate active claims and stale completion", () => {
    const table = freshTable();
    const fenceA = table.claim(A, payload(A), "master-a", { now: 100, ttlMs: 10 });
    assert.ok(fenceA);
    assert.equal(table.claim(A, payload(A), "master-b", { now: 105, ttlMs: 10 }), null, "an active lease is not taken");
    const fenceB = table.claim(A, payload(A), "master-b", { now: 120, ttlMs: 10 });
    assert.ok(fenceB);
    assert.notEqual(fenceB, fenceA);
    assert.equal(table.complete(A, fenceA, 121), "stale");
    assert.equal(table.beginCommit(A, fenceA, manifest(), 121), false);
    assert.equal(table.record(A)?.status, "leased", "a stale fence changed nothing");
    assert.equal(table.beginCommit(A, fenceB, manifest(), 122), true);
    assert.equal(table.complete(A, fenceB, 123), "completed");
    assert.equal(table.claim(A, payload(A), "master-a", { now: 1e9, ttlMs: 10 }), null, "done is never claimed again");
    assert.equal(table.claim(A, payload(A), "master-a", { now: 1e9, ttlMs: 0 }), null, "not even by a forced takeover");
    const rec = table.record(A)!;
    assert.deepEqual(
      { status: rec.status, fence: rec.token, owner: rec.owner, previous_owner: rec.previous_owner, attempts: rec.attempts, steals: rec.steals, completed: rec.completed },
      { status: "done", fence: fenceB, owner: "master-b", previous_owner: "master-a", attempts: 2, steals: 1, completed: 123 },
    );
  });

  it("a claim issues a unique owner-bound fence and writes a canonical record file", () => {
    const table = freshTable();
    const id = idIn(65, 7); // 65 mod 64 = shard 001
    const fence = table.claim(id, { hash: id, origin: "generated" }, "master-a", { now: 42, ttlMs: 10, worker: 3 })!;
    assert.match(fence, new RegExp(`^master-a:3:${process.pid}:[0-9a-f]{16}$`));
    const path = join(table.root, "001", `${id}.json`);
    const text = readFileSync(path, "utf8");
    const expected: LeaseRecord = {
      attempts: 1,
      id,
      owner: "master-a",
      payload: { hash: id, origin: "generated" },
      previous_owner: "",
      schema: 1,
      status: "leased",
      steals: 0,
      token: fence,
      updated: 42,
      worker: 3,
    };
    assert.equal(text, `${JSON.stringify(expected)}\n`, "keys sorted, compact, newline-terminated");
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.deepEqual(readdirSync(join(table.root, "001")).sort(), [`${id}.json`, `${id}.json.lock`], "no temporary file is left");
    const again = table.claim(id, { hash: id, origin: "generated" }, "master-a", { now: 60, ttlMs: 10, worker: 3 })!;
    assert.notEqual(again, fence, "every claim gets a fresh fence, even by the same owner");
    assert.deepEqual([table.record(id)!.attempts, table.record(id)!.steals], [2, 0], "re-claim by the same owner is not a steal");
  });

  it("a heartbeat extends the active fence", () => {
    const table = freshTable();
    const fence = table.claim(A, payload(A), "master-a", { now: 10, ttlMs: 10 })!;
    assert.deepEqual(table.heartbeatMany(new Map([[A, fence]]), 19), { renewed: [A], lost: [] });
    assert.equal(table.record(A)!.updated, 19);
    assert.deepEqual(table.recoverExpired(25, 10), []);
    assert.equal(table.claim(A, payload(A), "master-b", { now: 25, ttlMs: 10 }), null);
    assert.deepEqual(table.recoverExpired(30, 10), [{ id: A, payload: payload(A), updated: 19 }]);
    assert.ok(table.claim(A, payload(A), "master-b", { now: 30, ttlMs: 10 }));
  });

  it("heartbeatMany syncs each affected shard directory once", () => {
    const table = freshTable();
    const fences = new Map([A, B, C].map((id) => [id, table.claim(id, payload(id), "m", { now: 0, ttlMs: 10 })!]));
    const before = { ...table.stats };
    assert.deepEqual(table.heartbeatMany(fences, 7), { renewed: [A, B, C], lost: [] });
    assert.equal(table.stats.directorySyncs - before.directorySyncs, 2, "three records in two shards: two directory syncs");
    assert.equal(table.stats.heartbeatBatches - before.heartbeatBatches, 1);
    assert.equal(table.stats.renewals - before.renewals, 3);
    for (const id of [A, B, C]) assert.equal(table.record(id)!.updated, 7);
  });

  it("heartbeatMany flushes the renewed prefix when a later record fails", () => {
    const table = freshTable();
    const later = idIn(9, 4);
    const fences = new Map([A, later].map((id) => [id, table.claim(id, payload(id), "m", { now: 0, ttlMs: 10 })!]));
    const lock = `${recordFile(table, later)}.lock`;
    unlinkSync(lock);
    mkdirSync(lock); // the later record cannot be locked
    const before = table.stats.directorySyncs;
    assert.throws(() => table.heartbeatMany(fences, 8), (err) => err instanceof RuntimeFailure && err.message.includes(lock));
    assert.equal(table.record(A)!.updated, 8, "the earlier record was renewed");
    assert.equal(table.stats.directorySyncs - before, 1, "and its shard directory was still synced");
    assert.equal(table.record(later)!.updated, 0);
    assert.equal(table.stats.renewals, 0, "nothing is acknowledged as renewed");
  });

  it("heartbeatMany classifies stale fences as lost without syncing their shards", () => {
    const table = freshTable();
    const current = table.claim(A, payload(A), "m", { now: 0, ttlMs: 10 })!;
    table.claim(C, payload(C), "m", { now: 0, ttlMs: 10 });
    const doneId = idIn(5, 9);
    const doneFence = table.claim(doneId, payload(doneId), "m", { now: 0, ttlMs: 10 })!;
    table.complete(doneId, doneFence, 1);
    const before = table.stats.directorySyncs;
    const result = table.heartbeatMany(
      new Map([
        [A, current],
        [C, "m:0:1:ffffffffffffffff"],
        [doneId, doneFence],
        [idIn(7, 1), "never-claimed"],
        ["NOT-AN-ID", current],
        [idIn(5, 10), ""],
      ]),
      5,
    );
    assert.deepEqual(result.renewed, [A]);
    assert.deepEqual(new Set(result.lost), new Set([C, doneId, idIn(7, 1), "NOT-AN-ID", idIn(5, 10)]));
    assert.equal(table.stats.directorySyncs - before, 1, "only the renewed record's shard is synced");
    assert.equal(table.record(C)!.updated, 0);
    assert.equal(table.record(doneId)!.status, "done");
  });
});

/** Shared record files whose shard-directory fsync fails once `failing` is set: the OS fault the table must survive. */
class FailingDirSync extends SharedFilesStore {
  failing = false;
  protected override syncDir(dir: string): void {
    if (this.failing && !dir.endsWith("leases")) throw Object.assign(new Error(`fsync ${dir}: EIO (injected)`), { code: "EIO" });
    super.syncDir(dir);
  }
}
/** A table over FailingDirSync, and the switch that makes its directory fsyncs fail. */
function failingTable(): { table: LeaseTable; files: FailingDirSync } {
  const root = freshRoot();
  const files = new FailingDirSync({ root });
  return { table: new LeaseTable({ root }, files), files };
}

describe("a failing directory fsync", () => {
  it("heartbeatMany raises and acknowledges nothing, though the record files were renewed", () => {
    const { table, files } = failingTable();
    const fences = new Map([A, C].map((id) => [id, table.claim(id, payload(id), "m", { now: 0, ttlMs: 10 })!]));
    files.failing = true;
    assert.throws(() => table.heartbeatMany(fences, 6), /EIO \(injected\)/);
    assert.equal(table.stats.renewals, 0, "no renewal is acknowledged");
    for (const id of [A, C]) assert.equal(table.record(id)!.updated, 6, "the file contents were already renewed");
  });

  it("a claim whose directory sync fails leaves a fenced record, recoverable only after the TTL", () => {
    const { table, files } = failingTable();
    table.claim(B, payload(B), "m", { now: 0, ttlMs: 10 }); // the shard directory exists
    files.failing = true;
    assert.throws(() => table.claim(A, payload(A), "m", { now: 100, ttlMs: 10 }), /EIO \(injected\)/);
    files.failing = false;
    const left = table.record(A);
    assert.equal(left?.status, "leased", "the record survived the failed claim");
    assert.ok(left!.token.startsWith("m:"), "under a fence nobody was given");
    assert.equal(table.claim(A, payload(A), "other", { now: 105, ttlMs: 10 }), null, "not free before the TTL");
    assert.deepEqual(table.recoverExpired(105, 10).map((r) => r.id).filter((id) => id === A), []);
    assert.deepEqual(table.recoverExpired(110, 10).map((r) => r.id).filter((id) => id === A), [A]);
    const fence = table.claim(A, payload(A), "other", { now: 110, ttlMs: 10 });
    assert.ok(fence && fence !== left!.token, "after the TTL it is taken under a new fence");
  });
});

describe("commit fence", () => {
  it("committing is irreversible and cannot be stolen, even far past the TTL or with ttl 0", () => {
    const table = freshTable();
    const fence = table.claim(A, payload(A), "master-a", { now: 0, ttlMs: 10 })!;
    assert.equal(table.beginCommit(A, fence, manifest(), 5), true);
    for (const ttlMs of [10, 0]) {
      assert.equal(table.claim(A, payload(A), "master-b", { now: 1e12, ttlMs }), null, `ttl ${ttlMs}`);
      assert.deepEqual(table.recoverExpired(1e12, ttlMs), [], `ttl ${ttlMs}`);
    }
    assert.deepEqual(table.counts(1e12, 10), { leased: 0, committing: 1, expired: 0, done: 0 });
    assert.equal(table.abandon(A, fence), false, "a committing record cannot be abandoned");
    assert.equal(table.beginCommit(A, fence, manifest(), 6), true, "the holder may re-begin with the same manifest");
    assert.equal(table.complete(A, fence, 7), "completed");
    assert.deepEqual(table.counts(1e12, 10), { leased: 0, committing: 0, expired: 0, done: 1 });
  });

  it("fences passed in a deferred batch leave each shard directory's fsync to syncAsync, one per shard, in the pool", async () => {
    const table = freshTable();
    const fences = new Map([A, B, C].map((id) => [id, table.claim(id, payload(id), "m", { now: 0, ttlMs: 10 })!]));
    const before = table.stats.directorySyncs;
    table.deferredBatch(() => {
      for (const [id, fence] of fences) assert.equal(table.beginCommit(id, fence, manifest(), 1), true);
    });
    assert.equal(table.stats.directorySyncs, before, "no directory fsync on the loop");
    assert.deepEqual([A, B, C].map((id) => table.record(id)!.status), ["committing", "committing", "committing"], "each record written (and fsynced) at once");
    await table.syncAsync();
    assert.equal(table.stats.directorySyncs - before, 2, "three records in two shards: two directory syncs");
    table.sync();
    assert.equal(table.stats.directorySyncs - before, 2, "nothing left for sync()");
  });

  it("the commit manifest is durable and completion is classified once", () => {
    const table = freshTable();
    const fence = table.claim(A, payload(A), "master-a", { now: 0, ttlMs: 10 })!;
    assert.equal(table.beginCommit(A, fence, manifest(), 1), true);
    assert.equal(table.beginCommit(A, fence, manifest({ num_generated: 4 }), 2), false, "a different manifest is refused");
    assert.deepEqual(table.record(A)!.commit, canonicalManifest(manifest()), "the first manifest stands");

    const helper = new LeaseTable({ root: table.root }); // another master on the same directory
    assert.deepEqual(helper.recoverCommitting(), [{ id: A, payload: payload(A), fence: fence, commit: canonicalManifest(manifest()) }]);
    assert.equal(helper.complete(A, "m:0:1:0000000000000000", 3), "stale");
    assert.equal(helper.complete(A, fence, 3), "completed");
    assert.equal(table.complete(A, fence, 4), "already");
    assert.equal(table.complete(A, "m:0:1:0000000000000000", 4), "stale");
    assert.equal(table.complete(idIn(3, 3), fence, 4), "stale", "no record at all");
    assert.equal(table.record(A)!.completed, 3);
    assert.deepEqual(helper.recoverCommitting(), []);
  });

  it("commit manifests are canonical and strictly validated", () => {
    const h1 = "1".repeat(64);
    const h2 = "2".repeat(64);
    assert.deepEqual(canonicalManifest({ worker: "w", staging_id: "f".repeat(32), hashes: [h2, h1, h2], num_generated: 2 }), {
      hashes: [h1, h2],
      num_generated: 2,
      staging_id: "f".repeat(32),
      worker: "w",
    });
    assert.deepEqual(canonicalManifest({ worker: "w", staging_id: "", hashes: [], num_generated: 5 }).hashes, []);
    const bad: [string, unknown][] = [
      ["extra key", { ...manifest(), extra: 1 }],
      ["missing key", { worker: "w", staging_id: "", hashes: [] }],
      ["uppercase hash", manifest({ hashes: ["A".repeat(64)] })],
      ["short staging id", manifest({ staging_id: "abc" })],
      ["staging id without hashes", manifest({ hashes: [], num_generated: 0 })],
      ["hashes without staging id", manifest({ staging_id: "" })],
      ["fewer generated than hashes", manifest({ num_generated: 1 })],
      ["fractional count", manifest({ num_generated: 2.5 })],
      ["empty worker", manifest({ worker: "" })],
    ];
    for (const [what, m] of bad) assert.throws(() => canonicalManifest(m as CommitManifest), assert.AssertionError, what);
  });

  it("replayCommit publishes once, under the fence, and a failed publish leaves the record committing", () => {
    const table = freshTable();
    const fence = table.claim(A, payload(A), "master-a", { now: 0, ttlMs: 10 })!;
    const published: CommitManifest[] = [];
    assert.equal(table.replayCommit(A, fence, (m) => published.push(m), 1), "stale", "a leased record has no commit to replay");
    table.beginCommit(A, fence, manifest(), 1);
    assert.throws(
      () => table.replayCommit(A, fence, () => { throw new Error("disk full"); }, 2),
      /disk full/,
    );
    assert.equal(table.record(A)!.status, "committing");
    assert.equal(table.replayCommit(A, "m:0:1:0000000000000000", (m) => published.push(m), 3), "stale");
    assert.equal(table.replayCommit(A, fence, (m) => published.push(m), 3), "completed");
    assert.equal(table.replayCommit(A, fence, (m) => published.push(m), 4), "already");
    assert.deepEqual(published, [canonicalManifest(manifest())], "publish ran exactly once, with the stored manifest");
    assert.deepEqual([table.record(A)!.status, table.record(A)!.completed], ["done", 3]);
  });

  it("abandon requires the current pre-commit fence and is refused once committing", () => {
    const table = freshTable();
    const old = table.claim(A, payload(A), "master-a", { now: 0, ttlMs: 10 })!;
    const current = table.claim(A, payload(A), "master-b", { now: 20, ttlMs: 10 })!;
    assert.equal(table.abandon(A, old), false);
    assert.equal(table.record(A)!.token, current);
    assert.equal(table.abandon(A, current), true);
    assert.equal(table.record(A), null);
    assert.ok(existsSync(`${recordFile(table, A)}.lock`), "the lock file is never removed");
    const fresh = table.claim(A, payload(A), "master-a", { now: 21, ttlMs: 10 })!;
    assert.equal(table.record(A)!.attempts, 1, "an abandoned task starts over");
    table.beginCommit(A, fresh, manifest(), 22);
    assert.equal(table.abandon(A, fresh), false);
    assert.equal(table.record(A)!.status, "committing");
  });
});

describe("fail-closed records and arguments", () => {
  const corruptions: [string, (id: string) => string][] = [
    ["id differs from the file name", (id) => JSON.stringify(forged(id, { id: idIn(2, 99) }))],
    ["payload hash differs from the id", (id) => JSON.stringify(forged(id, { payload: { hash: idIn(2, 99), origin: "initial" } }))],
    ["unknown origin", (id) => JSON.stringify(forged(id, { payload: { hash: id, origin: "stolen" } }))],
    ["unknown status", (id) => JSON.stringify(forged(id, { status: "free" }))],
    ["negative timestamp", (id) => JSON.stringify(forged(id, { updated: -1 }))],
    ["empty token", (id) => JSON.stringify(forged(id, { token: "" }))],
    ["schema 2", (id) => JSON.stringify(forged(id, { schema: 2 }))],
    ["non-canonical manifest", (id) => JSON.stringify(forged(id, { status: "committing", commit: manifest() }))],
    ["truncated JSON", (id) => JSON.stringify(forged(id)).slice(0, 40)],
    ["empty file", () => ""],
  ];
  for (const [what, body] of corruptions) {
    it(`a record with ${what} blocks claim and makes recovery throw`, () => {
      const table = freshTable();
      const path = plant(table, A, body(A));
      const bytes = readFileSync(path, "utf8");
      for (const ttlMs of [10, 0]) assert.equal(table.claim(A, payload(A), "m", { now: 1e9, ttlMs }), null);
      assert.equal(readFileSync(path, "utf8"), bytes, "never overwritten");
      const named = (err: unknown) => err instanceof CorruptRecordError && err.path === path && err.message.includes(path);
      assert.throws(() => table.recoverExpired(1e9, 10), named);
      assert.throws(() => table.snapshot(), named);
      assert.throws(() => table.recoverCommitting(), named);
      assert.throws(() => table.record(A), named);
      assert.equal(table.complete(A, "forger:0:1:0000000000000000", 1), "stale");
    });
  }

  it("one corrupt record stops recovery before anything is returned", () => {
    const table = freshTable();
    table.claim(A, payload(A), "m", { now: 0, ttlMs: 10 });
    plant(table, C, JSON.stringify(forged(C, { payload: { hash: A, origin: "initial" } })));
    assert.throws(() => table.recoverExpired(100, 10, 1), CorruptRecordError);
  });

  it("a record in the wrong shard directory is corruption, not a free task", () => {
    const table = freshTable();
    mkdirSync(join(table.root, "007"), { recursive: true });
    writeFileSync(join(table.root, "007", `${A}.json`), JSON.stringify(forged(A)));
    assert.throws(() => table.snapshot(), /wrong shard/);
  });

  it("times and durations must be finite, and an invalid id is simply not a task", () => {
    const table = freshTable();
    const fence = table.claim(A, payload(A), "m", { now: 0, ttlMs: 10 })!;
    assert.throws(() => table.claim(B, payload(B), "m", { now: Number.NaN, ttlMs: 10 }), assert.AssertionError);
    assert.throws(() => table.claim(B, payload(B), "m", { now: 0, ttlMs: Number.POSITIVE_INFINITY }), assert.AssertionError);
    assert.throws(() => table.claim(B, payload(B), "m", { now: -1, ttlMs: 10 }), assert.AssertionError);
    assert.throws(() => table.heartbeatMany(new Map([[A, fence]]), Number.NaN), assert.AssertionError);
    assert.throws(() => table.recoverExpired(0, Number.POSITIVE_INFINITY), assert.AssertionError);
    assert.throws(() => table.counts(Number.NaN, 10), assert.AssertionError);
    assert.throws(() => table.complete(A, fence, Number.NaN), assert.AssertionError);
    assert.throws(() => table.claim(B, payload(A), "m", { now: 0, ttlMs: 10 }), assert.AssertionError, "payload hash must be the id");
    assert.equal(table.record(A)!.updated, 0, "a rejected call changed nothing");
    for (const bad of ["A".repeat(64), "a".repeat(63), `${"a".repeat(63)}g`, "../../etc/passwd"]) {
      assert.equal(table.claim(bad, { hash: bad, origin: "initial" }, "m", { now: 0, ttlMs: 10 }), null, bad);
      assert.equal(table.abandon(bad, fence), false);
      assert.equal(table.beginCommit(bad, fence, manifest(), 1), false);
      assert.equal(table.complete(bad, fence, 1), "stale");
      assert.equal(table.replayCommit(bad, fence, () => assert.fail("publish"), 1), "stale");
      assert.equal(table.record(bad), null);
    }
  });

  it("ttl-0 recovery takes a future-dated lease and the old fence can no longer complete", () => {
    const table = freshTable();
    const old = table.claim(A, payload(A), "master-a", { now: 1_000_000, ttlMs: 100 })!;
    assert.equal(table.claim(A, payload(A), "master-b", { now: 500, ttlMs: 100 }), null, "a future lease is not expired");
    assert.deepEqual(table.recoverExpired(500, 100), []);
    assert.deepEqual(table.recoverExpired(500, 0), [{ id: A, payload: payload(A), updated: 1_000_000 }]);
    assert.deepEqual(table.counts(500, 0), { leased: 0, committing: 0, expired: 1, done: 0 });
    const fresh = table.claim(A, payload(A), "master-b", { now: 500, ttlMs: 0 })!;
    assert.ok(fresh);
    assert.equal(table.complete(A, old, 501), "stale");
    assert.equal(table.beginCommit(A, old, manifest(), 501), false);
    assert.equal(table.beginCommit(A, fresh, manifest(), 502), true);
    assert.equal(table.complete(A, fresh, 503), "completed");
    const rec = table.record(A)!;
    assert.deepEqual([rec.attempts, rec.steals, rec.previous_owner], [2, 1, "master-a"]);
  });

  it("committing recovery fails closed without a durable manifest", () => {
    const table = freshTable();
    const path = plant(table, A, JSON.stringify(forged(A, { status: "committing" })));
    assert.throws(() => table.recoverCommitting(), (err) => err instanceof CorruptRecordError && err.message.includes(path));
    assert.equal(table.replayCommit(A, "forger:0:1:0000000000000000", () => assert.fail("publish"), 1), "stale");
    assert.equal(table.claim(A, payload(A), "m", { now: 1e9, ttlMs: 0 }), null, "still never stolen");
  });

  it("unbounded durations are rejected", () => {
    for (const lockTimeoutMs of [Number.POSITIVE_INFINITY, Number.NaN, 0, -5]) {
      assert.throws(() => new LeaseTable({ root: freshRoot(), lockTimeoutMs }), assert.AssertionError, String(lockTimeoutMs));
    }
    assert.throws(() => new LeaseTable({ root: freshRoot(), shardCount: 1001 }), assert.AssertionError);
    const lock = join(scratch, `unbounded-${++dirCount}.lock`);
    for (const timeout of [Number.POSITIVE_INFINITY, Number.NaN, 0]) {
      assert.throws(() => withFileLock(lock, timeout, () => assert.fail("ran")), assert.AssertionError, String(timeout));
    }
  });
});

describe("short record lock", () => {
  it("lock acquisition is bounded and never steals by age", async () => {
    const lock = join(scratch, `held-${++dirCount}.lock`);
    const holder = startChild(HOLDER, [lock]);
    try {
      assert.equal(await holder.next(), "held");
      const ancient = new Date("2001-01-01T00:00:00Z");
      utimesSync(lock, ancient, ancient);
      const started = performance.now();
      let ran = false;
      const err = captureThrow(() => withFileLock(lock, 300, () => (ran = true)));
      const waited = performance.now() - started;
      assert.ok(err instanceof LockTimeoutError, String(err));
      assert.equal(ran, false);
      assert.ok(waited >= 300, `waited ${waited} ms, less than the timeout`);
      assert.ok(waited < 10_000, `waited ${waited} ms: the deadline did not bound the wait`);
      assert.match(err.message, /never broken by age/);
      assert.ok(err.message.includes(lock));
      assert.match(err.message, /last taken \d+\.\d s ago/);
      assert.ok(lstatSync(lock).isFile(), "the lock file is still there");
      assert.equal(holder.child.exitCode, null, "the holder still runs");
    } finally {
      await holder.kill();
    }
  });

  it("a table operation on a held record times out instead of waiting forever", async () => {
    const table = freshTable({ lockTimeoutMs: 200 });
    const fence = table.claim(A, payload(A), "m", { now: 0, ttlMs: 10 })!;
    const holder = startChild(HOLDER, [`${recordFile(table, A)}.lock`]);
    try {
      assert.equal(await holder.next(), "held");
      assert.throws(() => table.complete(A, fence, 1), LockTimeoutError);
      assert.equal(table.record(A)!.status, "leased");
    } finally {
      await holder.kill();
    }
    assert.equal(table.complete(A, fence, 2), "completed");
  });

  it("the lock is exclusive even between two acquisitions in one process", () => {
    const lock = join(scratch, `nested-${++dirCount}.lock`);
    const inner = withFileLock(lock, 1_000, () => captureThrow(() => withFileLock(lock, 50, () => "inner ran")));
    assert.ok(inner instanceof LockTimeoutError);
  });

  it("the lock is released after an exception inside fn", () => {
    const lock = join(scratch, `throws-${++dirCount}.lock`);
    assert.throws(() => withFileLock(lock, 1_000, () => { throw new Error("boom"); }), /boom/);
    assert.equal(withFileLock(lock, 200, () => "again"), "again");
    assert.ok(lstatSync(lock).isFile());
  });

  it("the lock is released when its holder is SIGKILLed", async () => {
    const lock = join(scratch, `killed-${++dirCount}.lock`);
    const holder = startChild(HOLDER, [lock]);
    try {
      assert.equal(await holder.next(), "held");
      assert.ok(captureThrow(() => withFileLock(lock, 50, () => "too early")) instanceof LockTimeoutError);
    } finally {
      await holder.kill();
    }
    assert.equal(holder.child.signalCode, "SIGKILL");
    assert.equal(withFileLock(lock, 5_000, () => "taken"), "taken");
  });

  it("a directory or symlink at the lock path is rejected and left in place", () => {
    const dirLock = join(scratch, `dir-${++dirCount}.lock`);
    mkdirSync(dirLock);
    assert.throws(() => withFileLock(dirLock, 100, () => assert.fail("ran")), (err) => err instanceof RuntimeFailure && /is a directory/.test(err.message));
    assert.ok(lstatSync(dirLock).isDirectory());

    const target = join(scratch, `target-${dirCount}`);
    writeFileSync(target, "keep");
    const linkLock = join(scratch, `link-${dirCount}.lock`);
    symlinkSync(target, linkLock);
    assert.throws(() => withFileLock(linkLock, 100, () => assert.fail("ran")), /is a symlink/);
    assert.ok(lstatSync(linkLock).isSymbolicLink());
    assert.equal(readFileSync(target, "utf8"), "keep");

    const table = freshTable();
    table.claim(A, payload(A), "m", { now: 0, ttlMs: 10 });
    const recordLock = `${recordFile(table, B)}.lock`;
    mkdirSync(recordLock);
    assert.throws(() => table.claim(B, payload(B), "m", { now: 0, ttlMs: 10 }), /is a directory/);
    assert.ok(lstatSync(recordLock).isDirectory());
    assert.equal(table.record(B), null);
  });

  it("two processes racing to claim one id: exactly one gets a fence", async () => {
    const table = freshTable();
    const racers = [startChild(RACER, [table.root]), startChild(RACER, [table.root])];
    try {
      for (const r of racers) assert.equal(await r.next(), "ready");
      for (let round = 0; round < 6; round++) {
        const id = idIn(round, 1000 + round);
        const startAt = Date.now() + 150;
        for (const r of racers) r.child.stdin!.write(`claim ${id} ${startAt} ${Date.now()}\n`);
        const results = await Promise.all(racers.map((r) => r.next()));
        const winners = results.filter((line) => line.startsWith("fence "));
        assert.equal(winners.length, 1, `round ${round}: ${results.join(", ")}`);
        assert.equal(results.filter((line) => line === "null").length, 1, `round ${round}: ${results.join(", ")}`);
        assert.equal(table.record(id)!.token, winners[0].slice("fence ".length));
        assert.equal(table.record(id)!.attempts, 1);
      }
    } finally {
      for (const r of racers) await r.kill();
    }
  });
});

describe("durable file steps", () => {
  it("an atomic write that cannot replace its target leaves no temporary file", () => {
    const dir = join(scratch, `atomic-${++dirCount}`);
    mkdirSync(join(dir, "target", "occupied"), { recursive: true });
    assert.throws(() => writeFileAtomic(join(dir, "target"), "data"));
    assert.deepEqual(readdirSync(dir), ["target"]);
    writeFileAtomic(join(dir, "file"), "one");
    writeFileAtomic(join(dir, "file"), "two");
    assert.equal(readFileSync(join(dir, "file"), "utf8"), "two");
    assert.deepEqual(readdirSync(dir).sort(), ["file", "target"]);
  });

  it("mkdirDurable creates the missing chain and refuses a file in its place", () => {
    const base = join(scratch, `chain-${++dirCount}`);
    assert.equal(mkdirDurable(join(base, "a", "b")), 3);
    assert.ok(statSync(join(base, "a", "b")).isDirectory());
    assert.equal(mkdirDurable(join(base, "a", "b")), 0);
    writeFileSync(join(base, "f"), "");
    assert.throws(() => mkdirDurable(join(base, "f")), /not a directory/);
  });
});

interface Child {
  child: ChildProcess;
  next(): Promise<string>;
  kill(): Promise<void>;
}

/** Runs a fixture script under tsx; next() yields its stdout lines, failing after 30 s of silence. */
function startChild(script: string, args: string[]): Child {
  const child = spawn(process.execPath, ["--import", "tsx", script, ...args], { stdio: ["pipe", "pipe", "inherit"] });
  child.stdin!.on("error", () => {}); // a killed child closes its end; writes after that do not matter
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const waiter = waiting.shift();
    if (waiter) waiter(line);
    else lines.push(line);
  });
  const handle: Child = {
    child,
    next: () => {
      const line = lines.shift();
      if (line !== undefined) return Promise.resolve(line);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${script}: no output within 30 s`)), 30_000);
        waiting.push((l) => {
          clearTimeout(timer);
          resolve(l);
        });
      });
    },
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
      children.delete(handle);
    },
  };
  children.add(handle);
  return handle;
}

function captureThrow(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return undefined;
}
