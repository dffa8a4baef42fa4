// Partitioned shares of the lease table (lease-store/partitioned.ts) with real files: a share is
// served by one master at a time; it is taken over only once its lease expired and its holder's
// journal lock is free, under a new generation, with every record its holder acknowledged; the
// holder that lost it commits nothing more; content of another master's share is never claimed.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { describe, it } from "node:test";
import { owner } from "../../src/core/rendezvous.ts";
import { CorruptPartitionError, partitionPath, readPartition } from "../../src/explore/state/lease-store/partition-lease.ts";
import { canonicalManifest, LeaseTable, type CommitManifest, type WorkPayload } from "../../src/explore/state/lease-table.ts";
import { scratchDirs, sha256 } from "../helpers/scratch.ts";

const { freshDir } = scratchDirs("partition-takeover");

const TTL = 5_000;
const RANKS = [0, 1];
/** Content hashes whose rendezvous owner among RANKS is `rank`. */
function idsOf(rank: number, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) {
    const h = sha256(`content ${i}`);
    if (owner(h, RANKS) === rank) out.push(h);
  }
  return out;
}
const payload = (id: string): WorkPayload => ({ hash: id, origin: "initial" });
function manifest(children: string[]): CommitManifest {
  return canonicalManifest({ worker: "w", staging_id: children.length ? "b".repeat(32) : "", hashes: children, num_generated: children.length });
}

function master(root: string, rank: number, clock: { now: number }, needLockFree = true): LeaseTable {
  const t = new LeaseTable({ root, durability: "fence" });
  t.takePartition({ rank, ranks: RANKS, holder: `e:${rank}`, epoch: "e", ttlMs: TTL, wallNow: () => clock.now, needLockFree });
  return t;
}

describe("partitioned lease table", () => {
  it("each master claims only content of its own share; the other's is refused without a record", () => {
    const root = `${freshDir()}/leases`;
    const clock = { now: 1_000_000 };
    const a = master(root, 0, clock);
    const b = master(root, 1, clock);
    const [mine] = idsOf(0, 1);
    const [theirs] = idsOf(1, 1);
    assert.ok(a.claim(mine!, payload(mine!), "e:0", { now: clock.now, ttlMs: TTL }));
    assert.equal(a.claim(theirs!, payload(theirs!), "e:0", { now: clock.now, ttlMs: TTL }), null);
    assert.equal(b.record(mine!), null, "a share's records are its holder's alone");
    assert.deepEqual(readPartition(root, 0), { schema: 1, rank: 0, epoch: "e", generation: 1, holder: "e:0", heartbeat: clock.now, journal: readPartition(root, 0)!.journal });
    a.close();
    b.close();
  });

  it("a dead master's share is taken over only after its lease expired, under generation 2, with every acknowledged record; committing is finished once, leased runs again", () => {
    const root = `${freshDir()}/leases`;
    const clock = { now: 1_000_000 };
    const a = master(root, 0, clock);
    const b = master(root, 1, clock);
    const [leased, committing, done] = idsOf(0, 3) as [string, string, string];
    const child = idsOf(1, 1)[0]!;
    const fl = a.claim(leased, payload(leased), "e:0", { now: clock.now, ttlMs: TTL })!;
    const fc = a.claim(committing, payload(committing), "e:0", { now: clock.now, ttlMs: TTL })!;
    const fd = a.claim(done, payload(done), "e:0", { now: clock.now, ttlMs: TTL })!;
    assert.equal(a.deferredBatch(() => a.beginCommit(committing, fc, manifest([child]), clock.now)), true);
    a.sync();
    assert.equal(a.commitEmpty(done, fd, manifest([]), clock.now), "completed");
    a.partition!.abandon(); // SIGKILL: descriptors gone, the record still names e:0

    clock.now += TTL - 1;
    assert.deepEqual(b.takeOverShares().map((r) => r.kind), [], "no takeover while the lease is live");
    clock.now += 1;
    const taken = b.takeOverShares();
    assert.equal(taken.length, 1);
    assert.equal(taken[0]!.kind, "taken");
    assert.equal(readPartition(root, 0)!.generation, 2);
    assert.equal(readPartition(root, 0)!.holder, "e:1");
    assert.deepEqual(b.partition!.served, [0, 1]);
    assert.deepEqual(b.record(leased)!.token, fl);
    assert.equal(b.record(done)!.status, "done");
    const replay = b.recoverCommitting();
    assert.deepEqual(replay.map((c) => [c.id, c.fence]), [[committing, fc]]);
    const published: string[] = [];
    assert.equal(b.replayCommit(committing, fc, (m) => published.push(...m.hashes), clock.now), "completed");
    assert.equal(b.replayCommit(committing, fc, (m) => published.push(...m.hashes), clock.now), "already");
    assert.deepEqual(published, [child], "published once");
    const again = b.claim(leased, payload(leased), "e:1", { now: clock.now, ttlMs: 0 });
    assert.ok(again && again !== fl, "the leased record runs again under a new fence");
    assert.equal(readdirSync(root).filter((n) => n.startsWith("journal-")).length, 2, "rank 0's old journal removed; one journal per share");
    b.close();
  });

  it("a stalled master keeps its share while its journal lock is held, even past its lease", () => {
    const root = `${freshDir()}/leases`;
    const clock = { now: 1_000_000 };
    const a = master(root, 0, clock);
    const b = master(root, 1, clock);
    clock.now += 10 * TTL;
    assert.deepEqual(b.takeOverShares().map((r) => [r.kind, r.rank]), [["busy", 0]]);
    assert.equal(readPartition(root, 0)!.generation, 1);
    const [id] = idsOf(0, 1);
    assert.ok(a.claim(id!, payload(id!), "e:0", { now: clock.now, ttlMs: TTL }), "it wakes and goes on");
    assert.deepEqual(a.renewShares(), []);
    a.close();
    b.close();
  });

  it("a master whose share was taken over while it stalled (its lock dropped with its lease) commits nothing more and learns it at its heartbeat", () => {
    const root = `${freshDir()}/leases`;
    const clock = { now: 1_000_000 };
    const a = master(root, 0, clock, false);
    const b = master(root, 1, clock, false);
    const [x, y] = idsOf(0, 2) as [string, string];
    const fx = a.claim(x, payload(x), "e:0", { now: clock.now, ttlMs: TTL })!;
    const fy = a.claim(y, payload(y), "e:0", { now: clock.now, ttlMs: TTL })!;
    clock.now += TTL;
    assert.equal(b.takeOverShares()[0]!.kind, "taken");
    // a wakes with its old fences: every commit is refused, nothing of its share changes.
    assert.equal(a.beginCommit(x, fx, manifest([idsOf(1, 1)[0]!]), clock.now), false);
    assert.equal(a.commitEmpty(y, fy, manifest([]), clock.now), "stale");
    assert.equal(a.batch(() => a.complete(x, fx, clock.now)), "stale");
    assert.deepEqual(a.renewShares(), [], "already known lost: nothing left to renew");
    assert.equal(a.claim(x, payload(x), "e:0", { now: clock.now, ttlMs: 0 }), null);
    assert.deepEqual(a.partition!.served, [], "it serves no share any more");
    assert.equal(b.record(x)!.status, "leased");
    assert.equal(b.record(x)!.token, fx);
    assert.equal(readPartition(root, 0)!.holder, "e:1");
    a.close();
    b.close();
  });

  it("a stalled master that wakes learns at its first heartbeat that its share is gone", () => {
    const root = `${freshDir()}/leases`;
    const clock = { now: 1_000_000 };
    const a = master(root, 0, clock, false);
    const b = master(root, 1, clock, false);
    clock.now += TTL;
    assert.equal(b.takeOverShares()[0]!.kind, "taken");
    assert.deepEqual(a.renewShares(), [0]);
    assert.equal(readPartition(root, 0)!.holder, "e:1", "the stale heartbeat wrote nothing");
    a.close();
    assert.equal(readPartition(root, 0)!.holder, "e:1", "nor did its close");
    b.close();
  });
  it("a claim outside a batch reads its share's record only once half a lease has passed since its master renewed it, renews a share whose lease is half spent, and is refused after a takeover", () => {
    const root = `${freshDir()}/leases`;
    const clock = { now: 1_000_000 };
    const a = master(root, 0, clock, false);
    const b = master(root, 1, clock, false);
    const [x, y, z, v, w] = idsOf(0, 5) as [string, string, string, string, string];
    assert.ok(a.claim(x, payload(x), "e:0", { now: clock.now, ttlMs: TTL }));
    // The record made unreadable shows whether a claim reads it.
    const record = readFileSync(partitionPath(root, 0));
    writeFileSync(partitionPath(root, 0), "not json");
    clock.now += TTL / 2 - 1;
    assert.ok(a.claim(y, payload(y), "e:0", { now: clock.now, ttlMs: TTL }), "within half a lease of the renewal: no read");
    clock.now += 1;
    assert.throws(() => a.claim(z, payload(z), "e:0", { now: clock.now, ttlMs: TTL }), CorruptPartitionError);
    writeFileSync(partitionPath(root, 0), record);
    // The record read shows the lease half spent: the share is renewed before the claim, so what
    // is claimed cannot be taken over under it (a claim that only read could be, a moment later).
    assert.ok(a.claim(z, payload(z), "e:0", { now: clock.now, ttlMs: TTL }));
    assert.equal(readPartition(root, 0)!.heartbeat, clock.now, "renewed by the claim");
    clock.now += TTL - 1;
    assert.deepEqual(b.takeOverShares(), [], "not taken while the lease the claim renewed runs");
    // The lease expires; b takes the share over; a's next claim reads the record and learns it.
    clock.now += 1;
    assert.equal(b.takeOverShares()[0]!.kind, "taken");
    assert.equal(a.claim(v, payload(v), "e:0", { now: clock.now, ttlMs: TTL }), null);
    assert.deepEqual(a.partition!.served, []);
    // A renewal is what makes reads unnecessary: b's claim right after its takeover reads nothing.
    const taken = readFileSync(partitionPath(root, 0));
    writeFileSync(partitionPath(root, 0), "not json");
    assert.ok(b.claim(w, payload(w), "e:1", { now: clock.now, ttlMs: TTL }));
    writeFileSync(partitionPath(root, 0), taken);
    a.close();
    b.close();
  });
});
