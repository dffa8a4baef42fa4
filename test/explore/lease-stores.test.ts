// One conformance suite for every record store of the lease table (lease-store/port.ts), as the
// worker protocols share one (test/net/worker-protocols.test.ts): the contract of each transition
// — claim, heartbeat, the commit fence, completion, a stale fence refused, `committing` never
// stolen, an expired `leased` record reclaimable, and what a reopened table holds — checked
// against the LeaseTable over each store — the real ones with real files in temporary
// directories, and the simulation's store in memory. Only how a store is opened and reopened is
// named per store.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MemoryDisk, MemoryStore } from "../../src/explore/state/lease-store/memory.ts";
import { canonicalManifest, LeaseTable, type CommitManifest, type LeaseRecord, type WorkPayload } from "../../src/explore/state/lease-table.ts";
import { scratchDirs, sha256 } from "../helpers/scratch.ts";

const { freshDir } = scratchDirs("lease-stores");

/** How a store is opened over a directory, and reopened as the next process would. */
interface StoreKind {
  name: string;
  open(root: string, durability: "all" | "fence"): LeaseTable;
  /** `table` closed as its process would leave it at exit, and a table opened on the same directory. */
  reopen(table: LeaseTable, root: string, durability: "all" | "fence"): LeaseTable;
}

const sharedFiles: StoreKind = {
  name: "shared record files",
  open: (root, durability) => new LeaseTable({ root, durability }),
  reopen(table, root, durability) {
    table.close();
    return new LeaseTable({ root, durability });
  },
};

const journal: StoreKind = {
  name: "lone master's journal",
  open(root, durability) {
    const t = new LeaseTable({ root, durability });
    t.takeExclusive();
    return t;
  },
  reopen(table, root, durability) {
    table.close();
    const t = new LeaseTable({ root, durability });
    t.takeExclusive();
    return t;
  },
};

/**
 * Partitioned shares (two ranks): rank 1's master opens its share and releases it; rank 0's takes
 * its own and then rank 1's over, so the table serves every record from two journals. A reopening
 * is the next process of rank 0, which takes both shares again from the released records.
 */
function openPartitioned(root: string, durability: "all" | "fence"): LeaseTable {
  const opts = (rank: number) => ({ rank, ranks: [0, 1], holder: `e:${rank}`, epoch: "e", ttlMs: 60_000, wallNow: Date.now });
  const other = new LeaseTable({ root, durability });
  other.takePartition(opts(1));
  other.close();
  const t = new LeaseTable({ root, durability });
  t.takePartition(opts(0));
  assert.deepEqual(t.takeOverShares().map((r) => [r.kind, r.rank]), [["taken", 1]]);
  assert.deepEqual(t.partition!.served, [0, 1]);
  return t;
}
const partitioned: StoreKind = {
  name: "partitioned shares",
  open: openPartitioned,
  reopen(table, root, durability) {
    table.close();
    return openPartitioned(root, durability);
  },
};

/** The simulation's store: a reopening is a new process on the same simulated disk. */
const disks = new Map<string, MemoryDisk>();
const memory: StoreKind = {
  name: "memory (the simulation's store)",
  open(root, durability) {
    disks.set(root, new MemoryDisk());
    return new LeaseTable({ root, durability }, new MemoryStore(disks.get(root)!, durability));
  },
  reopen(table, root, durability) {
    table.close();
    return new LeaseTable({ root, durability }, new MemoryStore(disks.get(root)!, durability));
  },
};

const id = (n: number) => sha256(`task ${n}`);
const payload = (n: number): WorkPayload => ({ hash: id(n), origin: n % 2 === 0 ? "initial" : "generated" });
const child = (n: number) => sha256(`child ${n}`);
function manifest(children: number[], worker = "w1"): CommitManifest {
  return canonicalManifest({ worker, staging_id: children.length === 0 ? "" : "a".repeat(32), hashes: children.map(child), num_generated: children.length });
}
const TTL = 1_000;
const T0 = 1_700_000_000_000;

function conformance(kind: StoreKind): void {
  for (const durability of ["all", "fence"] as const) {
    describe(`lease table over ${kind.name} (--sync ${durability})`, () => {
      const open = () => {
        const root = `${freshDir()}/leases`;
        return { root, table: kind.open(root, durability) };
      };

      it("claim: a fresh task gets a fence bound to its owner; a held one is refused until its lease expires", () => {
        const { table } = open();
        const fence = table.claim(id(1), payload(1), "m:0", { now: T0, ttlMs: TTL, worker: 3 });
        assert.ok(fence !== null && fence.startsWith("m:0:3:"), `fence ${fence}`);
        assert.deepEqual(table.record(id(1)), {
          schema: 1, id: id(1), status: "leased", payload: payload(1), owner: "m:0", previous_owner: "", worker: 3,
          token: fence, updated: T0, attempts: 1, steals: 0,
        });
        assert.equal(table.claim(id(1), payload(1), "m:1", { now: T0 + TTL - 1, ttlMs: TTL }), null, "held");
        assert.equal(table.record(id(1))!.token, fence, "a refused claim changes nothing");
        assert.equal(table.claim("not-an-id", payload(1), "m:1", { now: T0, ttlMs: TTL }), null, "an invalid id is not a task");
      });

      it("heartbeat: the current fence renews (leased or committing); a stale, unknown or done fence is lost and changes nothing", () => {
        const { table } = open();
        const a = table.claim(id(1), payload(1), "m:0", { now: T0, ttlMs: TTL })!;
        const b = table.claim(id(2), payload(2), "m:0", { now: T0, ttlMs: TTL })!;
        const d = table.claim(id(3), payload(3), "m:0", { now: T0, ttlMs: TTL })!;
        assert.equal(table.beginCommit(id(2), b, manifest([1]), T0), true);
        assert.equal(table.complete(id(3), d, T0), "completed");
        const doneBefore = table.record(id(3));
        const r = table.heartbeatMany(new Map([[id(1), a], [id(2), b], [id(3), d], [id(4), "m:0:0:1:00"]]), T0 + 500);
        assert.deepEqual(new Set(r.renewed), new Set([id(1), id(2)]));
        assert.deepEqual(new Set(r.lost), new Set([id(3), id(4)]));
        assert.equal(table.record(id(1))!.updated, T0 + 500);
        assert.equal(table.record(id(2))!.status, "committing", "a heartbeat keeps a commit's status");
        assert.deepEqual(table.record(id(3)), doneBefore);
        assert.equal(table.record(id(4)), null);
        assert.equal(table.claim(id(1), payload(1), "m:1", { now: T0 + TTL, ttlMs: TTL }), null, "the renewal moved the expiry");
        assert.deepEqual(table.heartbeatMany(new Map([[id(1), "m:9:0:1:ff"]]), T0 + 600), { renewed: [], lost: [id(1)] });
        assert.equal(table.record(id(1))!.updated, T0 + 500);
      });

      it("beginCommit: under the fence a record becomes committing with the canonical manifest; repeatable with the same manifest only", () => {
        const { table } = open();
        const fence = table.claim(id(1), payload(1), "m:0", { now: T0, ttlMs: TTL })!;
        assert.equal(table.beginCommit(id(1), "m:0:0:1:00", manifest([1, 2]), T0 + 1), false, "a wrong fence");
        assert.equal(table.record(id(1))!.status, "leased");
        assert.equal(table.beginCommit(id(1), fence, manifest([2, 1]), T0 + 2), true);
        const rec = table.record(id(1))!;
        assert.equal(rec.status, "committing");
        assert.deepEqual(rec.commit, manifest([1, 2]), "stored canonical: hashes sorted");
        assert.equal(rec.updated, T0 + 2);
        assert.equal(table.beginCommit(id(1), fence, manifest([1, 2]), T0 + 3), true, "the same manifest again");
        assert.equal(table.beginCommit(id(1), fence, manifest([1, 3]), T0 + 4), false, "another manifest");
        assert.deepEqual(table.record(id(1))!.commit, manifest([1, 2]));
        assert.deepEqual(table.recoverCommitting(), [{ id: id(1), payload: payload(1), fence, commit: manifest([1, 2]) }]);
      });

      it("complete: completed once, then already; done is terminal and never claimed again", () => {
        const { table } = open();
        const fence = table.claim(id(1), payload(1), "m:0", { now: T0, ttlMs: TTL })!;
        assert.equal(table.complete(id(1), fence, T0 + 5), "completed");
        assert.equal(table.complete(id(1), fence, T0 + 6), "already");
        const rec = table.record(id(1))!;
        assert.equal(rec.status, "done");
        assert.equal(rec.completed, T0 + 5);
        for (const ttlMs of [TTL, 0]) assert.equal(table.claim(id(1), payload(1), "m:1", { now: T0 + 10 * TTL, ttlMs }), null);
        assert.deepEqual(table.counts(T0 + 10 * TTL, TTL), { leased: 0, committing: 0, expired: 0, done: 1 });
      });

      it("replayCommit publishes a committing record's manifest once, then completes it; commitEmpty fences and completes a result without children", () => {
        const { table } = open();
        const f1 = table.claim(id(1), payload(1), "m:0", { now: T0, ttlMs: TTL })!;
        const f2 = table.claim(id(2), payload(2), "m:0", { now: T0, ttlMs: TTL })!;
        assert.equal(table.replayCommit(id(1), f1, () => assert.fail("a leased record has nothing to publish"), T0 + 1), "stale");
        assert.equal(table.beginCommit(id(1), f1, manifest([7]), T0 + 1), true);
        const published: CommitManifest[] = [];
        assert.throws(() => table.replayCommit(id(1), f1, () => { throw new Error("publish failed"); }, T0 + 2), /publish failed/);
        assert.equal(table.record(id(1))!.status, "committing", "a failed publication leaves it committing");
        assert.equal(table.replayCommit(id(1), f1, (m) => published.push(m), T0 + 3), "completed");
        assert.equal(table.replayCommit(id(1), f1, (m) => published.push(m), T0 + 4), "already");
        assert.deepEqual(published, [manifest([7])], "published exactly once");
        assert.equal(table.commitEmpty(id(2), f2, manifest([3]), T0 + 5), "stale", "a manifest with children is not empty");
        assert.equal(table.commitEmpty(id(2), f2, manifest([]), T0 + 5), "completed");
        assert.equal(table.commitEmpty(id(2), f2, manifest([]), T0 + 6), "already");
        assert.deepEqual(table.record(id(2))!.commit, manifest([]));
        assert.equal(table.record(id(2))!.status, "done");
      });

      it("a stale fence is refused by every transition and changes nothing", () => {
        const { table } = open();
        const old = table.claim(id(1), payload(1), "m:0", { now: T0, ttlMs: TTL })!;
        const current = table.claim(id(1), payload(1), "m:1", { now: T0 + TTL, ttlMs: TTL })!;
        assert.notEqual(current, old);
        const before = table.record(id(1));
        assert.deepEqual(table.heartbeatMany(new Map([[id(1), old]]), T0 + TTL + 1), { renewed: [], lost: [id(1)] });
        assert.equal(table.beginCommit(id(1), old, manifest([1]), T0 + TTL + 2), false);
        assert.equal(table.commitEmpty(id(1), old, manifest([]), T0 + TTL + 3), "stale");
        assert.equal(table.complete(id(1), old, T0 + TTL + 4), "stale");
        assert.equal(table.replayCommit(id(1), old, () => assert.fail("never published under a stale fence"), T0 + TTL + 5), "stale");
        assert.equal(table.abandon(id(1), old), false);
        assert.deepEqual(table.record(id(1)), before);
        assert.equal(table.complete(id(1), current, T0 + TTL + 6), "completed", "the current fence still works");
      });

      it("committing is never stolen: not by a claim far past the lease, not with ttl 0, not by recovery, not by abandon", () => {
        const { table } = open();
        const fence = table.claim(id(1), payload(1), "m:0", { now: T0, ttlMs: TTL })!;
        assert.equal(table.beginCommit(id(1), fence, manifest([1]), T0 + 1), true);
        const before = table.record(id(1));
        for (const ttlMs of [TTL, 0]) {
          assert.equal(table.claim(id(1), payload(1), "m:1", { now: T0 + 1e9, ttlMs }), null, `ttl ${ttlMs}`);
          assert.deepEqual(table.recoverExpired(T0 + 1e9, ttlMs), []);
        }
        assert.equal(table.abandon(id(1), fence), false);
        assert.deepEqual(table.record(id(1)), before);
        assert.deepEqual(table.counts(T0 + 1e9, TTL), { leased: 0, committing: 1, expired: 0, done: 0 });
      });

      it("an expired leased record is listed oldest first and reclaimed under a new fence that counts the steal; abandon frees a leased one", () => {
        const { table } = open();
        const f2 = table.claim(id(2), payload(2), "m:0", { now: T0 + 10, ttlMs: TTL })!;
        table.claim(id(1), payload(1), "m:0", { now: T0, ttlMs: TTL });
        table.claim(id(3), payload(3), "m:0", { now: T0 + 500, ttlMs: TTL });
        assert.deepEqual(table.recoverExpired(T0 + TTL + 10, TTL).map((r) => r.id), [id(1), id(2)]);
        assert.deepEqual(table.recoverExpired(T0 + TTL + 10, TTL, 1), [{ id: id(1), payload: payload(1), updated: T0 }]);
        assert.deepEqual(table.counts(T0 + TTL + 10, TTL), { leased: 1, committing: 0, expired: 2, done: 0 });
        const fence = table.claim(id(1), payload(1), "m:1", { now: T0 + TTL + 10, ttlMs: TTL })!;
        const rec = table.record(id(1))!;
        assert.deepEqual(
          { owner: rec.owner, previous_owner: rec.previous_owner, attempts: rec.attempts, steals: rec.steals, token: rec.token },
          { owner: "m:1", previous_owner: "m:0", attempts: 2, steals: 1, token: fence },
        );
        assert.ok(table.claim(id(3), payload(3), "m:1", { now: T0 + 501, ttlMs: 0 }), "ttl 0 takes any leased record over");
        assert.equal(table.abandon(id(2), "m:0:0:1:00"), false);
        assert.equal(table.abandon(id(2), f2), true);
        assert.equal(table.record(id(2)), null);
        assert.ok(table.claim(id(2), payload(2), "m:1", { now: T0 + 20, ttlMs: TTL }), "an abandoned task is free at once");
      });

      it("reopened, the table holds every record as it was acknowledged, and recovery finishes what was left", () => {
        const { root, table } = open();
        const leased = table.claim(id(1), payload(1), "m:0", { now: T0, ttlMs: TTL })!;
        const committing = table.claim(id(2), payload(2), "m:0", { now: T0, ttlMs: TTL })!;
        const done = table.claim(id(3), payload(3), "m:0", { now: T0, ttlMs: TTL })!;
        const abandoned = table.claim(id(4), payload(4), "m:0", { now: T0, ttlMs: TTL })!;
        const fenced = table.claim(id(5), payload(5), "m:0", { now: T0, ttlMs: TTL })!;
        table.batch(() => assert.equal(table.beginCommit(id(2), committing, manifest([1, 2]), T0 + 1), true));
        table.deferredBatch(() => assert.equal(table.beginCommit(id(5), fenced, manifest([5]), T0 + 1), true));
        table.sync();
        assert.equal(table.complete(id(3), done, T0 + 2), "completed");
        assert.equal(table.abandon(id(4), abandoned), true);
        assert.deepEqual(table.heartbeatMany(new Map([[id(1), leased]]), T0 + 3).renewed, [id(1)]);
        const before: LeaseRecord[] = table.snapshot();

        const again = kind.reopen(table, root, durability);
        assert.deepEqual(again.snapshot(), before);
        assert.deepEqual(again.recoverCommitting().map((c) => [c.id, c.fence]), [[id(2), committing], [id(5), fenced]]);
        const published: string[] = [];
        for (const c of again.recoverCommitting()) {
          assert.equal(again.replayCommit(c.id, c.fence, (m) => published.push(...m.hashes), T0 + 4), "completed");
        }
        assert.deepEqual(published.sort(), [child(1), child(2), child(5)].sort());
        assert.equal(again.claim(id(1), payload(1), "m:1", { now: T0 + 3 + TTL - 1, ttlMs: TTL }), null, "its renewal survived");
        assert.ok(again.claim(id(1), payload(1), "m:1", { now: T0 + 3 + TTL, ttlMs: TTL }), "then it expires and is taken over");
        assert.ok(again.claim(id(4), payload(4), "m:1", { now: T0 + 4, ttlMs: TTL }), "the abandoned task is free");
        assert.equal(again.complete(id(1), leased, T0 + 5), "stale", "the fence of the previous opening is stale");
        const third = kind.reopen(again, root, durability);
        assert.deepEqual(third.counts(T0 + 5, TTL), { leased: 2, committing: 0, expired: 0, done: 3 });
        third.close();
      });
    });
  }
}

conformance(sharedFiles);
conformance(journal);
conformance(memory);
conformance(partitioned);
