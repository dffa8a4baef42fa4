// The fenced lease table: who may execute and commit each explore task, shared by every master
// through the file system. One JSON record per task id (the input's SHA-256):
//
//   <root>/<shard>/<id>.json        the record; shard = first 32 bits of the id mod shardCount
//   <root>/<shard>/<id>.json.lock   its short lock (file-lock.ts), never removed
//
// What a record may become, and under which fence, is decided by core/lease-record.ts (its state
// diagram is there): leased -> committing -> done, a fresh fence per claim, `committing` never
// stolen, a stale fence changes nothing. This file does the disk work around those decisions:
// every transition runs under the record's lock and re-reads the record there; a record is
// written as a whole (temp file + fsync + rename + directory fsync, as the durability policy
// says). A record that exists but does not validate is never overwritten and never counts as
// free: transitions refuse it and scans throw CorruptRecordError.
//
// A table one process owns alone (takeExclusive: a lone master, a broadcast master) keeps its
// records in memory and writes each transition as one line of its journal (lease-journal.ts)
// instead: no lock, no temp file, no rename, one fdatasync per batch. Whoever opens the table
// next absorbs a journal its writer left into the record files, so readers see one format.
import assert from "node:assert/strict";
import { lstatSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import * as lease from "../../core/lease-record.ts";
import {
  assertClaimRequest,
  assertTime,
  canonicalManifest,
  isExpired,
  recordText,
  type CommitManifest,
  type LeaseRecord,
  type Transition,
  type WorkPayload,
} from "../../core/lease-record.ts";
import { randomHex } from "../../util/random-hex.ts";
import { fsyncDir, fsyncDirAsync, mkdirDurable, replaceFile, replaceFileSynced, unlinkDurable } from "./durable.ts";
import { withFileLock } from "./file-lock.ts";
import { byUpdated, CorruptRecordError, isId, readRecordFile, readRecordFiles, shardName, type ReadResult } from "./lease-files.ts";
import { absorbStaleJournals, type JournalState } from "./lease-journal.ts";
import { OwnedRecords } from "./owned-records.ts";

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
   * "all" (default): every record write is fsynced (file and shard directory).
   * "fence": only a commit fence that has children to publish is fsynced. Every other write is
   * still atomic (temp + rename), so other processes see it at once; only a machine crash can
   * lose it, and each loss is redone: a lost claim or heartbeat is claimed again, a lost `done`
   * leaves the record `committing`, which is replayed idempotently from its manifest, and an
   * empty commit publishes nothing.
   */
  durability?: "all" | "fence";
}

export type CompletionResult = "completed" | "already" | "stale";
export { CorruptRecordError } from "./lease-files.ts";

export class LeaseTable {
  readonly root: string;
  readonly stats = { directorySyncs: 0, heartbeatBatches: 0, renewals: 0 };
  private readonly shardCount: number;
  private readonly lockTimeoutMs: number;
  private readonly readyShards = new Set<number>();
  /** Which record writes are fsynced; other durable files of the campaign follow the same rule. */
  readonly durability: "all" | "fence";
  /** Owned alone (takeExclusive): every record in memory, every transition a line of the journal. */
  private own: OwnedRecords | null = null;
  /** Open deferred batches: a shared table's synced writes leave their shard directories to sync(). */
  private deferring = 0;
  private readonly unsyncedShards = new Set<number>();

  constructor(opts: LeaseTableOptions) {
    const { root, shardCount = 64, lockTimeoutMs = 30_000, durability = "all" } = opts;
    this.durability = durability;
    assert.ok(typeof root === "string" && root !== "", "lease table root must be a non-empty path");
    assert.ok(Number.isSafeInteger(shardCount) && shardCount >= 1 && shardCount <= 1000, `lease table shardCount must be an integer from 1 to 1000 (got ${shardCount})`);
    assert.ok(Number.isFinite(lockTimeoutMs) && lockTimeoutMs > 0, `lease table lockTimeoutMs must be a finite number of milliseconds > 0 (got ${lockTimeoutMs})`);
    this.root = root;
    this.shardCount = shardCount;
    this.lockTimeoutMs = lockTimeoutMs;
    this.stats.directorySyncs += mkdirDurable(root);
    absorbStaleJournals(root, (state, path) => this.absorb(state, path));
  }

  /**
   * Takes the table for this process alone (valid only while no other process writes it: a lone
   * master holds the campaign lock; a broadcast master's table is its own). Records then live in
   * memory, each transition one journal line; the durability policy is the same. Idempotent.
   */
  takeExclusive(): void {
    if (this.own === null) this.own = new OwnedRecords(this.root, this.snapshot(), this.durability);
  }

  /** Whether takeExclusive() was called. */
  get exclusive(): boolean { return this.own !== null; }

  /** The journal's counters (lines written, fdatasyncs; this generation), null unless exclusive. */
  get journalStats(): { lines: number; syncs: number; bytes: number } | null { return this.own?.stats ?? null; }

  /**
   * Runs `fn` with the journal syncs the policy asks for deferred to its end: one fdatasync for the
   * batch. A publication inside it (replayCommit) still syncs first: fences before children.
   */
  batch<T>(fn: () => T): T {
    this.own?.enter();
    try {
      return fn();
    } finally {
      this.own?.leave();
    }
  }

  /** Makes every transition durable: the journal, or the shard directories a deferred batch left. */
  sync(): void {
    this.own?.sync();
    // A failure leaves them all for the next sync(): syncing a directory again costs only time.
    for (const shard of [...this.unsyncedShards].sort((a, b) => a - b)) this.syncDir(join(this.root, shardName(shard)));
    this.unsyncedShards.clear();
  }

  /**
   * Runs `fn` like batch() but leaves the sync it asks for to the caller, who awaits syncAsync()
   * (libuv's pool) before it publishes; a publication that comes first (replayCommit) syncs then.
   */
  deferredBatch<T>(fn: () => T): T {
    this.own?.enter();
    this.deferring++;
    try {
      return fn();
    } finally {
      this.deferring--;
      this.own?.leave(true);
    }
  }

  /** sync() in libuv's pool, the directories all at once; what fails stays for sync() to redo. */
  async syncAsync(): Promise<void> {
    await this.own?.syncAsync();
    await Promise.all([...this.unsyncedShards].map(async (shard) => {
      await fsyncDirAsync(join(this.root, shardName(shard)));
      this.unsyncedShards.delete(shard);
      this.stats.directorySyncs++;
    }));
  }

  /** A stale journal's states, written into the record files as durable writes (under their locks). */
  private absorb(state: JournalState, path: string): void {
    const dirty = new Set<number>();
    for (const [id, rec] of state) {
      this.prepareShard(id);
      this.locked(id, () => {
        const found = this.read(id);
        if (found.kind === "invalid") throw new CorruptRecordError(this.recordPath(id), `${found.reason}; the lease journal ${path} holds a newer state`);
        if (rec === null) {
          if (unlinkDurable(this.recordPath(id))) this.stats.directorySyncs++;
        } else {
          this.write(rec, true, dirty);
        }
      });
    }
    for (const shard of [...dirty].sort((a, b) => a - b)) this.syncDir(join(this.root, shardName(shard)));
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
    this.prepareShard(id);
    return this.locked(id, () => {
      const found = this.read(id);
      if (found.kind === "invalid") return null;
      const fence = `${owner}:${worker}:${process.pid}:${randomHex(8)}`;
      const step = lease.claim(found.kind === "valid" ? found.record : null, { ...request, fence });
      if ("refused" in step) return null;
      this.write(step.next);
      return fence;
    });
  }

  /**
   * Renews every (id, fence) whose record is `leased` or `committing` under that fence; the
   * rest are lost. Each record file is fsynced as it is written, each affected shard directory
   * once at the end, in shard order, even when a later record failed. The first error thrown
   * (a record's or a directory's) propagates: a renewal is never acknowledged undurably.
   */
  heartbeatMany(fences: ReadonlyMap<string, string>, now: number): { renewed: string[]; lost: string[] } {
    assertTime("now", now);
    this.stats.heartbeatBatches++;
    const renewed: string[] = [];
    const lost: string[] = [];
    const dirty = new Set<number>();
    let failure: { error: unknown } | null = null;
    try {
      this.own?.enter();
      for (const [id, fence] of [...fences].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
        if (!isId(id) || typeof fence !== "string" || fence === "" || !this.shardExists(id)) {
          lost.push(id);
          continue;
        }
        const ok = this.locked(id, () => {
          const step = lease.renew(this.valid(id), fence, now);
          if ("refused" in step) return false;
          this.write(step.next, false, dirty);
          return true;
        });
        (ok ? renewed : lost).push(id);
      }
    } catch (error) {
      failure = { error };
    } finally {
      try {
        this.own?.leave();
      } catch (error) {
        failure ??= { error };
      }
    }
    for (const shard of [...dirty].sort((a, b) => a - b)) {
      try {
        this.syncDir(join(this.root, shardName(shard)));
      } catch (error) {
        failure ??= { error };
      }
    }
    if (failure !== null) throw failure.error;
    this.stats.renewals += renewed.length;
    return { renewed, lost };
  }

  /** Deletes a `leased` record held under `fence` (e.g. its input vanished). Never once committing. */
  abandon(id: string, fence: string): boolean {
    if (!isId(id) || !this.shardExists(id)) return false;
    return this.locked(id, () => {
      if (lease.abandonable(this.valid(id), fence) !== null) return false;
      if (this.own !== null) this.own.del(id);
      else if (unlinkDurable(this.recordPath(id))) this.stats.directorySyncs++;
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
    if (!isId(id) || !this.shardExists(id)) return false;
    return this.locked(id, () => {
      const step = lease.beginCommit(this.valid(id), fence, commit, now);
      if ("refused" in step) return false;
      this.write(step.next, commit.hashes.length > 0);
      return true;
    });
  }

  /** "completed": the record held under `fence` is now done; "already": it was; "stale": not ours. */
  complete(id: string, fence: string, now: number): CompletionResult {
    assertTime("now", now);
    if (!isId(id) || !this.shardExists(id)) return "stale";
    return this.locked(id, () => this.finish(lease.complete(this.valid(id), fence, now)));
  }

  /**
   * Re-applies a commit that passed its fence but may not have finished: if the record is
   * `committing` under `fence` with a manifest, calls `publish(manifest)` under the record lock,
   * then marks it done. "already" if it is done under `fence` (publish is not called); "stale"
   * otherwise. If publish throws, the record stays `committing` and the error propagates.
   */
  replayCommit(id: string, fence: string, publish: (m: CommitManifest) => void, now: number): CompletionResult {
    assertTime("now", now);
    if (!isId(id) || !this.shardExists(id)) return "stale";
    return this.locked(id, () => this.finish(lease.completeCommitted(this.valid(id), fence, now), publish));
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
    if (commit.hashes.length > 0 || !isId(id) || !this.shardExists(id)) return "stale";
    return this.locked(id, () => this.finish(lease.commitEmpty(this.valid(id), fence, commit, now)));
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
        if (r.commit === undefined) throw new CorruptRecordError(this.recordPath(r.id), "committing without a commit manifest");
        return { id: r.id, payload: r.payload, fence: r.token, commit: r.commit };
      });
  }

  /** Every record, by (updated, id). Throws CorruptRecordError on any invalid record. */
  snapshot(): LeaseRecord[] {
    if (this.own !== null) return [...this.own.records.values()].sort(byUpdated);
    return readRecordFiles(this.root, (id) => shardName(this.shardOf(id))).sort(byUpdated);
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
    const found = this.read(id);
    if (found.kind === "invalid") throw new CorruptRecordError(this.recordPath(id), found.reason);
    return found.kind === "valid" ? found.record : null;
  }

  /** Writes the outcome of a completing transition; "done" under the same fence means "already". */
  private finish(step: Transition, publish?: (m: CommitManifest) => void): CompletionResult {
    if ("refused" in step) return step.refused === "done" ? "already" : "stale";
    if (publish) {
      // The fence this publication follows must be durable first (a batch may still hold it).
      this.own?.beforePublish(step.next.id);
      publish(step.next.commit!);
    }
    this.write(step.next);
    return "completed";
  }

  private locked<T>(id: string, fn: () => T): T {
    // Owned alone: no other process reads or writes a record, so there is nothing to lock against.
    if (this.own !== null) return fn();
    return withFileLock(`${this.recordPath(id)}.lock`, this.lockTimeoutMs, fn);
  }

  /** The record under the lock, for a transition: a missing or corrupt one is nobody's (null). */
  private valid(id: string): LeaseRecord | null {
    const found = this.read(id);
    return found.kind === "valid" ? found.record : null;
  }

  private read(id: string): ReadResult {
    if (this.own !== null) {
      const record = this.own.records.get(id);
      return record === undefined ? { kind: "absent" } : { kind: "valid", record };
    }
    return readRecordFile(this.recordPath(id), id);
  }

  /**
   * Writes a whole record atomically; fsyncs it, and its shard directory, unless the durability
   * policy says it may be redone. With `deferDirSync` the shard is added to that set instead, for
   * the caller to sync once for a whole batch.
   */
  private write(record: LeaseRecord, fence = false, deferDirSync?: Set<number>): void {
    if (this.own !== null) return this.own.put(record, fence);
    const path = this.recordPath(record.id);
    if (this.durability === "fence" && !fence) {
      replaceFile(path, recordText(record));
      return;
    }
    replaceFileSynced(path, recordText(record));
    // In a deferred batch the caller syncs the directory (syncAsync in the pool) before it publishes.
    if (deferDirSync) deferDirSync.add(this.shardOf(record.id));
    else if (this.deferring > 0) this.unsyncedShards.add(this.shardOf(record.id));
    else this.syncDir(join(this.root, shardName(this.shardOf(record.id))));
  }

  /** Overridable so that tests can inject a failing directory fsync (an OS fault). */
  protected syncDir(dir: string): void {
    fsyncDir(dir);
    this.stats.directorySyncs++;
  }

  /** Creates the shard directory on first use in this process, and makes its name durable. */
  private prepareShard(id: string): void {
    if (this.own !== null) return;
    const shard = this.shardOf(id);
    if (this.readyShards.has(shard)) return;
    try {
      mkdirSync(join(this.root, shardName(shard)));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    // Synced even if another process created it: it may not have synced the root yet.
    this.syncDir(this.root);
    this.readyShards.add(shard);
  }

  /** Without its shard directory a record cannot exist; transitions then need no lock. */
  private shardExists(id: string): boolean {
    if (this.own !== null) return true;
    if (this.readyShards.has(this.shardOf(id))) return true;
    try {
      return lstatSync(join(this.root, shardName(this.shardOf(id)))).isDirectory();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw err;
    }
  }

  private shardOf(id: string): number {
    return Number.parseInt(id.slice(0, 8), 16) % this.shardCount;
  }

  private recordPath(id: string): string {
    return join(this.root, shardName(this.shardOf(id)), `${id}.json`);
  }
}
