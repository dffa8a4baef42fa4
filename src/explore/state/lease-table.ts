// The fenced lease table: who may execute and commit each explore task. One record per task id
// (the input's SHA-256).
//
// What a record may become, and under which fence, is decided by core/lease-record.ts (its state
// diagram is there): leased -> committing -> done, a fresh fence per claim, `committing` never
// stolen, a stale fence changes nothing. This file applies those decisions over a record store
// (lease-store/port.ts): every transition reads the record under the store's lock for it, decides,
// and writes the whole record back under the same lock. A record that exists but does not validate
// is never overwritten and never counts as free: transitions refuse it and scans throw
// CorruptRecordError.
//
// Which store holds the records:
//   shared files (lease-store/shared-files.ts)  the default: one file per record under its own
//                                               flock; every master of the campaign shares them
//   journal (lease-store/journal.ts)            after takeExclusive(): a table one process owns
//                                               alone, in memory, each transition one journal line
//   partitioned (lease-store/partitioned.ts)    after takePartition(): several masters, each
//                                               serving its share under a fenced partition lease
//                                               and journalling it as a lone master does
// A master that lost its share (ShareLostError) gets a stale fence's answer from every transition.
// Opening the table (shared files) absorbs a journal its writer left, so readers see one format.
import assert from "node:assert/strict";
import * as lease from "../../core/lease-record.ts";
import {
  assertClaimRequest,
  assertTime,
  canonicalManifest,
  isExpired,
  type CommitManifest,
  type LeaseRecord,
  type Transition,
  type WorkPayload,
} from "../../core/lease-record.ts";
import { randomHex } from "../../util/random-hex.ts";
import { byUpdated, CorruptRecordError, isId } from "./lease-files.ts";
import { JournalStore } from "./lease-store/journal.ts";
import type { Durability, ReadResult, RecordStore } from "./lease-store/port.ts";
import { SharedFilesStore } from "./lease-store/shared-files.ts";
import { PartitionedStore, ShareLostError, type PartitionedOptions } from "./lease-store/partitioned.ts";
import type { TakeoverResult } from "./lease-store/share-takeover.ts";

export type { CommitManifest, LeaseRecord, LeaseStatus, Origin, WorkPayload } from "../../core/lease-record.ts";
export { canonicalManifest } from "../../core/lease-record.ts";

export interface LeaseTableOptions {
  /** The table directory, e.g. `<corpus>/.fuzzfleet/work-<epoch>/leases`. */
  root: string;
  /** Default 64, at most 1000 (shard directories are named 000..999). */
  shardCount?: number;
  /** Bound on waiting for one record's lock, on the monotonic clock. Default 30 000. */
  lockTimeoutMs?: number;
  /**
   * "all" (default): every record write is durable before the table answers (or, in a batch,
   * before the batch ends).
   * "fence": only a commit fence that has children to publish is made durable. Every other write
   * is still atomic, so other processes see it at once; only a machine crash can lose it, and
   * each loss is redone: a lost claim or heartbeat is claimed again, a lost `done` leaves the
   * record `committing`, which is replayed idempotently from its manifest, and an empty commit
   * publishes nothing.
   */
  durability?: Durability;
  /** After takeExclusive(): the size below which the journal is never compacted (default 64 MiB). */
  journalCompactBytes?: number;
}

export type CompletionResult = "completed" | "already" | "stale";
export { CorruptRecordError } from "./lease-files.ts";

export class LeaseTable {
  readonly root: string;
  /** Which record writes are made durable; other durable files of the campaign follow the same rule. */
  readonly durability: Durability;
  private readonly counters = { heartbeatBatches: 0, renewals: 0 };
  /** The shared files the table was opened on, if so; after takeExclusive() no longer written. */
  private readonly files: SharedFilesStore | null;
  private store: RecordStore;
  private journal: JournalStore | null = null;
  private partitioned: PartitionedStore | null = null;
  private readonly journalCompactBytes: number | undefined;
  private readonly shardCount: number;

  /**
   * Opens the table on shared record files in `opts.root`, or on `store` (the simulation's store
   * in memory, or shared files a test made to fail), which must have the same durability.
   */
  constructor(opts: LeaseTableOptions, store?: RecordStore) {
    this.root = opts.root;
    this.durability = opts.durability ?? "all";
    this.journalCompactBytes = opts.journalCompactBytes;
    this.shardCount = opts.shardCount ?? 64;
    this.store = store ?? new SharedFilesStore(opts);
    assert.equal(this.store.durability, this.durability, "the store must have the table's durability");
    this.files = this.store instanceof SharedFilesStore ? this.store : null;
  }

  /** Directory fsyncs of the shared files, heartbeat batches and the renewals they acknowledged. */
  get stats(): { directorySyncs: number; heartbeatBatches: number; renewals: number } {
    return { directorySyncs: this.files?.stats.directorySyncs ?? 0, ...this.counters };
  }

  /**
   * Takes the table for this process alone (valid only while no other process writes it: a lone
   * master holds the campaign lock; a broadcast master's table is its own). Records then live in
   * memory, each transition one journal line; the durability policy is the same. Idempotent.
   */
  takeExclusive(): void {
    if (this.journal !== null) return;
    this.journal = new JournalStore({ root: this.root, durability: this.durability, records: this.store.scan(), compactMinBytes: this.journalCompactBytes });
    this.store = this.journal;
  }

  /**
   * Takes this master's share of a table several masters share (lease-store/partitioned.ts): from
   * then on it reads and writes only the records of the shares it serves, each in its own journal.
   * Throws when another master still serves the share. Idempotent.
   */
  takePartition(o: Omit<PartitionedOptions, "root" | "durability" | "shardCount">): void {
    if (this.partitioned !== null) return;
    assert.equal(this.journal, null, "a table taken exclusively is not partitioned");
    this.partitioned = new PartitionedStore({ ...o, root: this.root, durability: this.durability, shardCount: this.shardCount, compactMinBytes: this.journalCompactBytes });
    this.store = this.partitioned;
  }

  /** The partitioned store, once takePartition() was called. */
  get partition(): PartitionedStore | null { return this.partitioned; }

  /** Renews the leases of the shares this master serves; the ranks of those found lost (none unless partitioned). */
  renewShares(): number[] {
    return this.partitioned?.renewShares() ?? [];
  }

  /** Takes over every share whose lease expired (none unless partitioned). */
  takeOverShares(): TakeoverResult[] {
    return this.partitioned?.takeOverExpired() ?? [];
  }

  /** Whether takeExclusive() was called. */
  get exclusive(): boolean { return this.journal !== null; }

  /** The journal's counters (lines written, fdatasyncs; this generation), null unless exclusive. */
  get journalStats(): { lines: number; syncs: number; bytes: number } | null { return this.journal?.stats ?? null; }

  /**
   * Runs `fn` with the syncs the policy asks for deferred to its end (a journal: one fdatasync for
   * the batch). A publication inside it (replayCommit) still syncs first: fences before children.
   */
  batch<T>(fn: () => T): T {
    const store = this.store;
    store.enter("batch");
    try {
      return fn();
    } finally {
      store.leave("batch");
    }
  }

  /** Makes every transition durable: the journal, or the shard directories a deferred batch left. */
  sync(): void {
    this.store.sync();
  }

  /**
   * Runs `fn` like batch() but leaves the sync it asks for to the caller, who awaits syncAsync()
   * (libuv's pool) before it publishes; a publication that comes first (replayCommit) syncs then.
   */
  deferredBatch<T>(fn: () => T): T {
    const store = this.store;
    store.enter("deferred");
    try {
      return fn();
    } finally {
      store.leave("deferred");
    }
  }

  /** sync() in libuv's pool; what fails stays for sync() to redo. */
  syncAsync(): Promise<void> {
    return this.store.syncAsync();
  }

  /** Releases the store's files (a journal's descriptor and flock: the next opener absorbs it). */
  close(): void {
    this.store.close();
  }

  /**
   * Takes the task for `owner`: succeeds when there is no record, or a valid `leased` record
   * whose age `now - updated` is at least `ttlMs`, or any `leased` record when `ttlMs` is 0
   * (forced takeover, even of a lease dated in the future). Returns the new fence, or null:
   * invalid id, unexpired lease, `committing` or `done` record, or a corrupt record.
   */
  claim(id: string, payload: WorkPayload, owner: string, opts: { now: number; ttlMs: number; worker?: number }): string | null {
    const { now, ttlMs, worker = 0 } = opts;
    if (!isId(id)) {
      assertTime("now", now);
      assertTime("ttlMs", ttlMs);
      return null;
    }
    const request = { id, payload, owner, worker, now, ttlMs };
    assertClaimRequest(request);
    this.store.prepare(id);
    if (!this.store.mayHold(id)) return null;
    return this.locked(id, null, () => {
      const found = this.store.read(id);
      if (found.kind === "invalid") return null;
      const fence = `${owner}:${worker}:${process.pid}:${randomHex(8)}`;
      const step = lease.claim(found.kind === "valid" ? found.record : null, { ...request, fence });
      if ("refused" in step) return null;
      this.store.put(step.next, false);
      return fence;
    });
  }

  /**
   * Renews every (id, fence) whose record is `leased` or `committing` under that fence; the
   * rest are lost. The syncs the policy asks for wait for the end of the batch (shared files:
   * each shard directory once, in shard order, even when a later record failed). The first
   * error thrown propagates: a renewal is never acknowledged undurably.
   */
  heartbeatMany(fences: ReadonlyMap<string, string>, now: number): { renewed: string[]; lost: string[] } {
    assertTime("now", now);
    this.counters.heartbeatBatches++;
    const renewed: string[] = [];
    const lost: string[] = [];
    const store = this.store;
    let failure: { error: unknown } | null = null;
    store.enter("heartbeats");
    try {
      for (const [id, fence] of [...fences].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
        if (!isId(id) || typeof fence !== "string" || fence === "" || !store.mayHold(id)) {
          lost.push(id);
          continue;
        }
        const ok = this.locked(id, false, () => {
          const step = lease.renew(this.valid(id), fence, now);
          if ("refused" in step) return false;
          store.put(step.next, false);
          return true;
        });
        (ok ? renewed : lost).push(id);
      }
    } catch (error) {
      failure = { error };
    } finally {
      try {
        store.leave("heartbeats");
      } catch (error) {
        failure ??= { error };
      }
    }
    if (failure !== null) throw failure.error;
    this.counters.renewals += renewed.length;
    return { renewed, lost };
  }

  /** Deletes a `leased` record held under `fence` (e.g. its input vanished). Never once committing. */
  abandon(id: string, fence: string): boolean {
    if (!isId(id) || !this.store.mayHold(id)) return false;
    return this.locked(id, false, () => {
      if (lease.abandonable(this.valid(id), fence) !== null) return false;
      this.store.remove(id);
      return true;
    });
  }

  /**
   * Passes the commit fence: a `leased` or `committing` record held under `fence` becomes
   * `committing` with `manifest` stored durably. From then on no claim takes it, however old.
   * Repeating it with the same fence and an identical manifest succeeds; a different manifest
   * is refused.
   */
  beginCommit(id: string, fence: string, manifest: CommitManifest, now: number): boolean {
    assertTime("now", now);
    const commit = canonicalManifest(manifest);
    if (!isId(id) || !this.store.mayHold(id)) return false;
    return this.locked(id, false, () => {
      const step = lease.beginCommit(this.valid(id), fence, commit, now);
      if ("refused" in step) return false;
      this.store.put(step.next, commit.hashes.length > 0);
      return true;
    });
  }

  /** "completed": the record held under `fence` is now done; "already": it was; "stale": not ours. */
  complete(id: string, fence: string, now: number): CompletionResult {
    assertTime("now", now);
    if (!isId(id) || !this.store.mayHold(id)) return "stale";
    return this.locked(id, "stale", () => this.finish(lease.complete(this.valid(id), fence, now)));
  }

  /**
   * Re-applies a commit that passed its fence but may not have finished: if the record is
   * `committing` under `fence` with a manifest, calls `publish(manifest)` under the record lock,
   * then marks it done. "already" if it is done under `fence` (publish is not called); "stale"
   * otherwise. If publish throws, the record stays `committing` and the error propagates.
   */
  replayCommit(id: string, fence: string, publish: (m: CommitManifest) => void, now: number): CompletionResult {
    assertTime("now", now);
    if (!isId(id) || !this.store.mayHold(id)) return "stale";
    return this.locked(id, "stale", () => this.finish(lease.completeCommitted(this.valid(id), fence, now), publish));
  }

  /**
   * A result without children has nothing to publish, so its fence and its completion are one
   * step: a `leased` (or `committing`) record held under `fence` becomes `done` with the empty
   * manifest. "already" if it is done under `fence`; "stale" otherwise, or if `manifest` lists
   * children (those go through beginCommit and replayCommit).
   */
  commitEmpty(id: string, fence: string, manifest: CommitManifest, now: number): CompletionResult {
    assertTime("now", now);
    const commit = canonicalManifest(manifest);
    if (commit.hashes.length > 0 || !isId(id) || !this.store.mayHold(id)) return "stale";
    return this.locked(id, "stale", () => this.finish(lease.commitEmpty(this.valid(id), fence, commit, now)));
  }

  /**
   * The `leased` records at least `ttlMs` old (every one when `ttlMs` is 0), oldest first, by
   * (updated, id), at most `limit`. Reads only; the caller claims each with the same ttl.
   * Throws CorruptRecordError, before returning anything, if any record is invalid.
   */
  recoverExpired(now: number, ttlMs: number, limit = Number.POSITIVE_INFINITY): { id: string; payload: WorkPayload; updated: number }[] {
    assertTime("now", now);
    assertTime("ttlMs", ttlMs);
    assert.ok(limit === Number.POSITIVE_INFINITY || (Number.isSafeInteger(limit) && limit >= 0), `recoverExpired: limit must be an integer >= 0 (got ${limit})`);
    return this.snapshot()
      .filter((r) => r.status === "leased" && isExpired(r, now, ttlMs))
      .slice(0, limit)
      .map((r) => ({ id: r.id, payload: r.payload, updated: r.updated }));
  }

  /** Every `committing` record with its manifest, for redo after a crash. Throws if one lacks a manifest. */
  recoverCommitting(): { id: string; payload: WorkPayload; fence: string; commit: CommitManifest }[] {
    return this.snapshot()
      .filter((r) => r.status === "committing")
      .map((r) => {
        if (r.commit === undefined) throw new CorruptRecordError(this.store.where(r.id), "committing without a commit manifest");
        return { id: r.id, payload: r.payload, fence: r.token, commit: r.commit };
      });
  }

  /** Every record, by (updated, id). Throws CorruptRecordError on any invalid record. */
  snapshot(): LeaseRecord[] {
    return this.store.scan().sort(byUpdated);
  }

  /** Disjoint counts: leased (unexpired), committing, expired (leased, at least ttlMs old), done. */
  counts(now: number, ttlMs: number): { leased: number; committing: number; expired: number; done: number } {
    assertTime("now", now);
    assertTime("ttlMs", ttlMs);
    const counts = { leased: 0, committing: 0, expired: 0, done: 0 };
    for (const r of this.snapshot()) {
      if (r.status === "leased") counts[isExpired(r, now, ttlMs) ? "expired" : "leased"]++;
      else counts[r.status]++;
    }
    return counts;
  }

  /** The record of `id`, null if there is none (or the id is invalid). Throws on a corrupt record. */
  record(id: string): LeaseRecord | null {
    if (!isId(id)) return null;
    const found: ReadResult = this.store.read(id);
    if (found.kind === "invalid") throw new CorruptRecordError(this.store.where(id), found.reason);
    return found.kind === "valid" ? found.record : null;
  }

  /** Writes the outcome of a completing transition; "done" under the same fence means "already". */
  private finish(step: Transition, publish?: (m: CommitManifest) => void): CompletionResult {
    if ("refused" in step) return step.refused === "done" ? "already" : "stale";
    if (publish) {
      // The fence this publication follows must be durable first (a batch may still hold it).
      this.store.beforePublish(step.next.id);
      publish(step.next.commit!);
    }
    this.store.put(step.next, false);
    return "completed";
  }

  /** store.locked(), where a share this master lost answers `lost` (a stale fence's answer) and changes nothing. */
  private locked<T>(id: string, lost: T, fn: () => T): T {
    try {
      return this.store.locked(id, fn);
    } catch (err) {
      if (err instanceof ShareLostError) return lost;
      throw err;
    }
  }

  /** The record under the lock, for a transition: a missing or corrupt one is nobody's (null). */
  private valid(id: string): LeaseRecord | null {
    const found = this.store.read(id);
    return found.kind === "valid" ? found.record : null;
  }
}
