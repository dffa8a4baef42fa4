// The lease table's store for several masters without a file per record: each master serves its
// share of the content (the hashes rendezvous ownership gives its rank) under a partition lease
// (partition-lease.ts), and journals that share's records in a journal of its own, exactly as a
// lone master does (journal.ts: records in memory, one line per transition, group commit). A record
// of a share this master does not serve reads as absent and cannot be written: content another
// master owns is handed to it through the corpus and the hint files, never claimed by the finder.
//
//   open        takes this rank's share: creates generation 1, or takes it over from a holder
//               that released it (a resumed campaign) or died and whose lease expired
//   takeOver    (share-takeover.ts) a share whose lease expired and whose holder's journal lock is free becomes this
//               master's under the next generation: the holder's journal is replayed into a
//               snapshot that opens a new journal (synced), the record names the new generation
//               (synced), and only then is the old journal removed. The caller finishes the
//               share's `committing` records from their manifests and runs its `leased` ones again.
//   renewShares every held share's heartbeat, under its short lock, after checking that the
//               record still names this holder and generation; a share found under another is lost
//   claims      a write of a `leased` record (a claim, a renewal) reads the share's record first
//               (without the lock; once per span), unless this master renewed the share less than
//               half a lease ago: no other master may take it before the lease expires, so a
//               master claiming between its renewals reads nothing, and one woken from a stall
//               long enough to lose its share reads it at its first claim and hands out no task of
//               it. Claims commit nothing; the commit check below is what fences.
//   commits     a write past `leased` (a commit fence, a completion) and a publication check the
//               share's record under its short lock first, once per outermost span (held to the
//               span's end, so a takeover waits for the batch): a master that lost its share gets
//               ShareLostError, which the table answers as a stale fence. It commits nothing more.
//   close       releases every share (holder ""), so that the next opener need not wait a lease
//   abandon     what a crash leaves: descriptors closed, shares still named as held
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { owner as rendezvousOwner } from "../../../core/rendezvous.ts";
import type { LeaseRecord } from "../../../core/lease-record.ts";
import { RuntimeFailure } from "../../../errors.ts";
import { fsyncDir } from "../durable.ts";
import { holdFileLock, LockTimeoutError, withFileLock } from "../file-lock.ts";
import type { ReadResult } from "../lease-files.ts";
import { partitionDir, partitionLockPath, readPartition, writePartition, type PartitionRecord } from "./partition-lease.ts";
import type { Durability, RecordStore, Span } from "./port.ts";
import { takeShareLocked, type Share, type ShareOptions, type TakeoverResult } from "./share-takeover.ts";

/** This master no longer serves the share of a record it tried to commit: another took it over. */
export class ShareLostError extends RuntimeFailure {
  readonly rank: number;
  constructor(rank: number, why: string) {
    super(`the share of rank ${rank} was taken over by another master (${why}); this master commits nothing more of it`);
    this.rank = rank;
  }
}

export interface PartitionedOptions extends ShareOptions {
  /** This master's rank: the share it opens with. */
  rank: number;
  /** Every master's rank: a record's share is its rendezvous owner among them. */
  ranks: readonly number[];
  /** Bound on waiting for a share's short lock. Default 30 000; a takeover waits at most 1 000. */
  lockTimeoutMs?: number;
  /** A deliberately broken variant for the simulation: false skips every generation check. */
  checkGeneration?: boolean;
  /**
   * "required" (default): opening fails when another master still serves this rank's share.
   * "if-free": the store opens serving nothing then (a restarted master whose share was taken over).
   */
  ownShare?: "required" | "if-free";
}

const TAKEOVER_LOCK_MS = 1_000;

export class PartitionedStore implements RecordStore {
  readonly durability: Durability;
  private readonly shares = new Map<number, Share>();
  private readonly owners = new Map<string, number>();
  private readonly lockTimeoutMs: number;
  private spans = 0;
  /** Shares checked in the open span, and the release of the short lock held until its end. */
  private readonly checked = new Map<number, () => void>();
  /** Shares whose record was read (without the lock) in the open span. */
  private readonly glanced = new Set<number>();
  /**
   * The heartbeat (wall-clock ms) this master last wrote into each share's record. Until half a
   * lease after it nobody may take the share over (takeOverExpired waits a whole lease), so a
   * claim need not read the record; the half is the margin for clocks of different hosts.
   */
  private readonly renewedAt = new Map<number, number>();

  constructor(private readonly o: PartitionedOptions) {
    assert.ok(o.ranks.includes(o.rank), `rank ${o.rank} is not among the ranks ${o.ranks.join(",")}`);
    this.durability = o.durability;
    this.lockTimeoutMs = o.lockTimeoutMs ?? 30_000;
    mkdirSync(partitionDir(o.root), { recursive: true, mode: 0o700 });
    fsyncDir(o.root);
    const own = this.takeShare(o.rank, true);
    if (own.kind !== "taken" && o.ownShare !== "if-free") {
      const rec = readPartition(o.root, o.rank);
      throw new RuntimeFailure(
        `the share of rank ${o.rank} in ${o.root} is still served by ${rec?.holder ?? "another master"} (generation ${rec?.generation ?? "?"}, ` +
          `last renewed ${rec ? ((o.wallNow() - rec.heartbeat) / 1000).toFixed(1) : "?"} s ago): start this rank once that master is gone`,
      );
    }
  }

  /** The ranks whose shares this master serves. */
  get served(): number[] {
    return [...this.shares.values()].filter((s) => !s.lost).map((s) => s.rank).sort((a, b) => a - b);
  }

  /** The share (rank) record `id` belongs to. */
  shareOf(id: string): number {
    let r = this.owners.get(id);
    if (r === undefined) {
      r = rendezvousOwner(id, this.o.ranks);
      this.owners.set(id, r);
    }
    return r;
  }

  /** Whether this master serves `id`'s share (as far as it knows: a commit checks it). */
  mayHold(id: string): boolean {
    return this.live(id) !== null;
  }

  prepare(): void {}

  /** A served share's records are this master's alone: nobody else reads or writes them meanwhile. */
  locked<T>(_id: string, fn: () => T): T {
    return fn();
  }

  read(id: string): ReadResult {
    return this.live(id)?.store.read(id) ?? { kind: "absent" };
  }

  put(record: LeaseRecord, fence: boolean): void {
    const share = this.need(record.id);
    if (record.status === "leased") {
      // A claim or a renewal commits nothing: the record alone is read (no lock), so that a woken
      // master learns at its first claim that its share is gone and hands out no task of it.
      this.glance(share);
      return share.store.put(record, fence);
    }
    const release = this.check(share);
    try {
      share.store.put(record, fence);
    } finally {
      release();
    }
  }

  remove(id: string): void {
    this.need(id).store.remove(id);
  }

  enter(span: Span): void {
    this.spans++;
    for (const s of this.shares.values()) s.store.enter(span);
  }

  leave(span: Span): void {
    let failure: { error: unknown } | null = null;
    for (const s of this.shares.values()) {
      try {
        s.store.leave(span);
      } catch (error) {
        failure ??= { error };
      }
    }
    if (--this.spans === 0) {
      for (const release of this.checked.values()) release();
      this.checked.clear();
      this.glanced.clear();
    }
    if (failure !== null) throw failure.error;
  }

  /** A publication follows the current generation's fence: the share is checked first. */
  beforePublish(id: string): void {
    const share = this.need(id);
    const release = this.check(share);
    try {
      share.store.beforePublish(id);
    } finally {
      release();
    }
  }

  sync(): void {
    for (const s of this.shares.values()) s.store.sync();
  }

  async syncAsync(): Promise<void> {
    await Promise.all([...this.shares.values()].map((s) => s.store.syncAsync()));
  }

  scan(): LeaseRecord[] {
    return [...this.shares.values()].filter((s) => !s.lost).flatMap((s) => s.store.scan());
  }

  where(id: string): string {
    const s = this.shares.get(this.shareOf(id));
    return s ? s.store.where(id) : `share r${this.shareOf(id)} (record ${id}), not served here`;
  }

  /** Releases every share still held (holder ""), then closes the journals: the next opener takes them at once. */
  close(): void {
    for (const s of this.shares.values()) {
      if (!s.lost) {
        try {
          this.update(s, (rec) => ({ ...rec, holder: "", heartbeat: 0 }));
        } catch {
          // Not released: the share is taken over once its lease expires, as after a crash.
        }
      }
      s.store.close();
    }
    this.shares.clear();
  }

  /** What a crash leaves: the journals' descriptors (and their locks) gone, the records still naming this holder. */
  abandon(): void {
    for (const release of this.checked.values()) release();
    this.checked.clear();
    for (const s of this.shares.values()) s.store.close();
    this.shares.clear();
  }

  /**
   * Renews every held share's lease (its heartbeat, under its short lock) after checking that the
   * record still names this holder and generation. Returns the ranks of shares found lost.
   */
  renewShares(): number[] {
    const lost: number[] = [];
    for (const s of this.shares.values()) {
      if (s.lost) continue;
      try {
        this.renew(s);
      } catch (err) {
        if (!(err instanceof ShareLostError)) throw err;
        lost.push(s.rank);
      }
    }
    return lost;
  }

  /** Every share this master does not serve whose lease expired, taken over (the others left as they are). */
  takeOverExpired(): TakeoverResult[] {
    const out: TakeoverResult[] = [];
    for (const rank of new Set(this.o.ranks)) {
      const mine = this.shares.get(rank);
      if (mine && !mine.lost) continue;
      const rec = readPartition(this.o.root, rank);
      if (rec === null) continue;
      if (rec.holder !== "" && this.o.wallNow() - rec.heartbeat < this.o.ttlMs) continue;
      out.push(this.takeShare(rank, false));
    }
    return out;
  }

  /**
   * Every share's record (for quiescence, the views and the failover): who serves it (the holder's
   * name and rank; null: nobody) and whether its lease is live.
   */
  partitions(): { rank: number; holder: string; holderRank: number | null; generation: number; live: boolean }[] {
    const now = this.o.wallNow();
    return [...new Set(this.o.ranks)].sort((a, b) => a - b).map((rank) => {
      const rec = readPartition(this.o.root, rank);
      const holder = rec?.holder ?? "";
      return { rank, holder, holderRank: holderRank(holder), generation: rec?.generation ?? 0, live: rec !== null && holder !== "" && now - rec.heartbeat < this.o.ttlMs };
    });
  }

  // ---- internals ---------------------------------------------------------------------------

  private live(id: string): Share | null {
    const s = this.shares.get(this.shareOf(id));
    return s !== undefined && !s.lost ? s : null;
  }

  private need(id: string): Share {
    const s = this.shares.get(this.shareOf(id));
    if (s === undefined) throw new ShareLostError(this.shareOf(id), "never served here");
    if (s.lost) throw new ShareLostError(s.rank, "found lost earlier");
    return s;
  }

  /**
   * Checks under the share's short lock that its record still names this holder and generation;
   * returns the lock's release (a no-op inside a span: the span's end releases it).
   */
  private check(s: Share): () => void {
    if (this.o.checkGeneration === false) return () => {};
    if (this.spans > 0 && this.checked.has(s.rank)) return () => {};
    const release = holdFileLock(partitionLockPath(this.o.root, s.rank), this.lockTimeoutMs);
    try {
      this.current(s);
    } catch (err) {
      release();
      throw err;
    }
    if (this.spans === 0) return release;
    this.checked.set(s.rank, release);
    return () => {};
  }

  /**
   * current() without the lock: once per span, and outside spans unless the share was renewed here
   * less than half a lease ago. A record read without the lock proves the share is still this
   * master's only while the lease it shows has more than half to run: a takeover needs the
   * holder's last heartbeat a whole lease old, and only this master writes that heartbeat, so even
   * an outdated copy (a shared file system's client cache) that shows it recent rules a takeover
   * out. Otherwise the share is renewed first, under its lock: what is claimed next cannot be
   * taken over under the claim.
   */
  private glance(s: Share): void {
    if (this.o.checkGeneration === false || (this.spans > 0 && (this.checked.has(s.rank) || this.glanced.has(s.rank)))) return;
    const now = this.o.wallNow();
    const renewed = this.renewedAt.get(s.rank);
    // A clock that went back reads again.
    if (this.spans === 0 && renewed !== undefined && now >= renewed && now - renewed < this.o.ttlMs / 2) return;
    const rec = this.current(s);
    if (now < rec.heartbeat || now - rec.heartbeat >= this.o.ttlMs / 2) this.renew(s);
    if (this.spans > 0) this.glanced.add(s.rank);
  }

  /** A new heartbeat on the share's record, under its lock, after checking that it is still this master's. */
  private renew(s: Share): void {
    const heartbeat = this.o.wallNow();
    this.update(s, (rec) => ({ ...rec, heartbeat }));
    this.renewedAt.set(s.rank, heartbeat);
  }

  /** Throws ShareLostError (and marks the share lost) unless its record names this holder and generation. */
  private current(s: Share): PartitionRecord {
    const rec = readPartition(this.o.root, s.rank);
    if (rec !== null && rec.generation === s.generation && rec.holder === this.o.holder) return rec;
    s.lost = true;
    throw new ShareLostError(s.rank, rec === null ? "its record is gone" : `generation ${rec.generation} held by ${rec.holder || "nobody"}, this master's was ${s.generation}`);
  }

  private update(s: Share, change: (rec: PartitionRecord) => PartitionRecord): void {
    withFileLock(partitionLockPath(this.o.root, s.rank), this.lockTimeoutMs, () => {
      if (this.o.checkGeneration === false) {
        const rec = readPartition(this.o.root, s.rank)!;
        if (rec.generation === s.generation) writePartition(this.o.root, change(rec));
        return;
      }
      writePartition(this.o.root, change(this.current(s)));
    });
  }

  /** Takes `rank`'s share under the next generation, under its short lock (see the header). */
  private takeShare(rank: number, own: boolean): TakeoverResult {
    assert.equal(this.spans, 0, "a share is taken between spans, never inside one");
    try {
      return withFileLock(partitionLockPath(this.o.root, rank), own ? this.lockTimeoutMs : TAKEOVER_LOCK_MS, () => this.takeLocked(rank, own));
    } catch (err) {
      if (err instanceof LockTimeoutError) return { kind: "busy", rank };
      throw err;
    }
  }

  private takeLocked(rank: number, own: boolean): TakeoverResult {
    const taken = takeShareLocked(this.o, rank, own, (id) => this.shareOf(id));
    if (taken.kind === "taken") {
      this.shares.get(rank)?.store.close();
      this.shares.set(rank, taken.share);
      // Still under the share's lock: the heartbeat the takeover wrote is this master's renewal.
      const rec = readPartition(this.o.root, rank);
      if (rec !== null && rec.holder === this.o.holder && rec.generation === taken.share.generation) this.renewedAt.set(rank, rec.heartbeat);
      else this.renewedAt.delete(rank);
    }
    return taken.result;
  }
}

/** The rank in a holder's name (`<epoch prefix>:<rank>:<pid>`), null for nobody's. */
export function holderRank(holder: string): number | null {
  const field = holder.split(":")[1];
  const rank = Number(field);
  return field === undefined || field === "" || !Number.isSafeInteger(rank) ? null : rank;
}
