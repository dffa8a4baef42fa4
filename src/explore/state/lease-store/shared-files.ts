// The lease table's store that any number of masters share through the file system: one JSON
// file per record, each behind its own short lock.
//
//   <root>/<shard>/<id>.json        the record; shard = first 32 bits of the id mod shardCount
//   <root>/<shard>/<id>.json.lock   its short lock (file-lock.ts), never removed
//
// A record is written as a whole (temp file + rename), fsynced with its shard directory when the
// durability policy asks: every write under "all", only a commit fence with children under
// "fence" (every other write is still atomic, so other processes see it at once; only a machine
// crash can lose it, and each loss is redone: a lost claim or heartbeat is claimed again, a lost
// `done` leaves the record `committing`, replayed idempotently from its manifest). A record that
// exists but does not validate is never overwritten and never counts as free.
//
// Spans (port.ts): a batch syncs each write at once; a deferred span leaves the shard directories
// to sync()/syncAsync(); a heartbeats span syncs each shard it touched once at its end, in shard
// order, all of them even when one fails.
//
// Opening the store absorbs every lease journal whose writer is gone (lease-journal.ts) into the
// record files, so readers see one format.
import assert from "node:assert/strict";
import { lstatSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { recordText, type LeaseRecord } from "../../../core/lease-record.ts";
import { fsyncDir, fsyncDirAsync, mkdirDurable, replaceFile, replaceFileSynced, unlinkDurable } from "../durable.ts";
import { withFileLock } from "../file-lock.ts";
import { CorruptRecordError, readRecordFile, readRecordFiles, shardName, type ReadResult } from "../lease-files.ts";
import { absorbStaleJournals, type JournalState } from "../lease-journal.ts";
import type { Durability, RecordStore, Span } from "./port.ts";

export interface SharedFilesOptions {
  root: string;
  /** Default 64, at most 1000 (shard directories are named 000..999). */
  shardCount?: number;
  /** Bound on waiting for one record's lock, on the monotonic clock. Default 30 000. */
  lockTimeoutMs?: number;
  durability?: Durability;
}

export class SharedFilesStore implements RecordStore {
  readonly root: string;
  readonly durability: Durability;
  readonly stats = { directorySyncs: 0 };
  private readonly shardCount: number;
  private readonly lockTimeoutMs: number;
  private readonly readyShards = new Set<number>();
  /** Open deferred spans: their synced writes leave their shard directories to sync(). */
  private deferring = 0;
  private readonly unsyncedShards = new Set<number>();
  /** Open heartbeats spans, and the shard directories they leave to their end. */
  private heartbeats = 0;
  private readonly heartbeatShards = new Set<number>();

  constructor(opts: SharedFilesOptions) {
    const { root, shardCount = 64, lockTimeoutMs = 30_000, durability = "all" } = opts;
    assert.ok(typeof root === "string" && root !== "", "lease table root must be a non-empty path");
    assert.ok(Number.isSafeInteger(shardCount) && shardCount >= 1 && shardCount <= 1000, `lease table shardCount must be an integer from 1 to 1000 (got ${shardCount})`);
    assert.ok(Number.isFinite(lockTimeoutMs) && lockTimeoutMs > 0, `lease table lockTimeoutMs must be a finite number of milliseconds > 0 (got ${lockTimeoutMs})`);
    this.root = root;
    this.durability = durability;
    this.shardCount = shardCount;
    this.lockTimeoutMs = lockTimeoutMs;
    this.stats.directorySyncs += mkdirDurable(root);
    absorbStaleJournals(root, (state, path) => this.absorb(state, path));
  }

  /** A stale journal's states, written into the record files as durable writes (under their locks). */
  private absorb(state: JournalState, path: string): void {
    const dirty = new Set<number>();
    for (const [id, rec] of state) {
      this.prepare(id);
      this.locked(id, () => {
        const found = this.read(id);
        if (found.kind === "invalid") throw new CorruptRecordError(this.where(id), `${found.reason}; the lease journal ${path} holds a newer state`);
        if (rec === null) {
          if (unlinkDurable(this.where(id))) this.stats.directorySyncs++;
        } else {
          replaceFileSynced(this.where(id), recordText(rec));
          dirty.add(this.shardOf(id));
        }
      });
    }
    for (const shard of [...dirty].sort((a, b) => a - b)) this.syncDir(this.shardDir(shard));
  }

  /** Without its shard directory a record cannot exist; transitions then need no lock. */
  mayHold(id: string): boolean {
    if (this.readyShards.has(this.shardOf(id))) return true;
    try {
      return lstatSync(this.shardDir(this.shardOf(id))).isDirectory();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw err;
    }
  }

  /** Creates the shard directory on first use in this process, and makes its name durable. */
  prepare(id: string): void {
    const shard = this.shardOf(id);
    if (this.readyShards.has(shard)) return;
    try {
      mkdirSync(this.shardDir(shard));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    // Synced even if another process created it: it may not have synced the root yet.
    this.syncDir(this.root);
    this.readyShards.add(shard);
  }

  locked<T>(id: string, fn: () => T): T {
    return withFileLock(`${this.where(id)}.lock`, this.lockTimeoutMs, fn);
  }

  read(id: string): ReadResult {
    return readRecordFile(this.where(id), id);
  }

  put(record: LeaseRecord, fence: boolean): void {
    const path = this.where(record.id);
    if (this.durability === "fence" && !fence) {
      replaceFile(path, recordText(record));
      return;
    }
    replaceFileSynced(path, recordText(record));
    const shard = this.shardOf(record.id);
    if (this.heartbeats > 0) this.heartbeatShards.add(shard);
    // In a deferred span the caller syncs the directory (syncAsync in the pool) before it publishes.
    else if (this.deferring > 0) this.unsyncedShards.add(shard);
    else this.syncDir(this.shardDir(shard));
  }

  remove(id: string): void {
    if (unlinkDurable(this.where(id))) this.stats.directorySyncs++;
  }

  enter(span: Span): void {
    if (span === "deferred") this.deferring++;
    else if (span === "heartbeats") this.heartbeats++;
  }

  leave(span: Span): void {
    if (span === "deferred") this.deferring--;
    if (span !== "heartbeats" || --this.heartbeats > 0) return;
    const shards = [...this.heartbeatShards].sort((a, b) => a - b);
    this.heartbeatShards.clear();
    let failure: { error: unknown } | null = null;
    for (const shard of shards) {
      try {
        this.syncDir(this.shardDir(shard));
      } catch (error) {
        failure ??= { error };
      }
    }
    if (failure !== null) throw failure.error;
  }

  /** Each record file is fsynced as written; a deferred span's directories wait for sync(), as the caller awaits. */
  beforePublish(): void {}

  sync(): void {
    // A failure leaves them all for the next sync(): syncing a directory again costs only time.
    for (const shard of [...this.unsyncedShards].sort((a, b) => a - b)) this.syncDir(this.shardDir(shard));
    this.unsyncedShards.clear();
  }

  /** sync() in libuv's pool, the directories all at once; what fails stays for sync() to redo. */
  async syncAsync(): Promise<void> {
    await Promise.all([...this.unsyncedShards].map(async (shard) => {
      await fsyncDirAsync(this.shardDir(shard));
      this.unsyncedShards.delete(shard);
      this.stats.directorySyncs++;
    }));
  }

  scan(): LeaseRecord[] {
    return readRecordFiles(this.root, (id) => shardName(this.shardOf(id)));
  }

  where(id: string): string {
    return join(this.shardDir(this.shardOf(id)), `${id}.json`);
  }

  close(): void {}

  /** Overridable so that tests can inject a failing directory fsync (an OS fault). */
  protected syncDir(dir: string): void {
    fsyncDir(dir);
    this.stats.directorySyncs++;
  }

  private shardOf(id: string): number {
    return Number.parseInt(id.slice(0, 8), 16) % this.shardCount;
  }

  private shardDir(shard: number): string {
    return join(this.root, shardName(shard));
  }
}
