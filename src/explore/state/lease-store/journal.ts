// The lease table's store for a table one process owns alone (a lone master holds the campaign
// lock; a broadcast master's table is its own): every record in memory, every change one line of
// the process's journal (lease-journal.ts), with the durability policy applied to the journal
// instead of to record files. No lock, no temp file, no rename:
//
//   a change the policy wants durable (a commit fence with children; every change under "all")
//   is fdatasynced at once, or at the end of the outermost batch or heartbeats span (group
//   commit), or — in a deferred span — by the caller's syncAsync() in libuv's pool; a publication
//   that comes first syncs on the spot (beforePublish), so a fence is always durable before its
//   children.
//
// The journal is compacted once it is well past the records it describes. Whoever opens the
// table next (shared-files.ts) absorbs a journal its writer left into the record files.
import assert from "node:assert/strict";
import type { LeaseRecord } from "../../../core/lease-record.ts";
import type { ReadResult } from "../lease-files.ts";
import { LeaseJournal } from "../lease-journal.ts";
import type { Durability, RecordStore, Span } from "./port.ts";

/** A journal smaller than this is never compacted, unless the store is told otherwise. */
export const COMPACT_MIN_BYTES = 64 * 2 ** 20;

export interface JournalStoreOptions {
  root: string;
  durability: Durability;
  /** The records the table holds when this process takes it over (from the record files). */
  records: readonly LeaseRecord[];
  /** The size below which the journal is never compacted (default COMPACT_MIN_BYTES; tests lower it). */
  compactMinBytes?: number;
  /** The journal's name and first generation (default: a fresh name, generation 0). */
  journal?: { base: string; generation: number };
  /**
   * Writes `records` as the journal's first lines and syncs them before the store is used: the
   * journal alone then holds the table (a share taken over, whose previous journal is removed).
   */
  snapshot?: boolean;
}

export class JournalStore implements RecordStore {
  readonly durability: Durability;
  private readonly records: Map<string, LeaseRecord>;
  private journal: LeaseJournal;
  private readonly compactMinBytes: number;
  /** Open spans: syncs the policy asks for wait for the end of the outermost one. */
  private spans = 0;
  private syncWanted = false;
  /** fdatasyncs running in the pool: no compaction (which closes the descriptor) meanwhile. */
  private asyncSyncs = 0;
  /** Records whose commit fence was journaled, and the journal offset it must be synced through. */
  private readonly unsyncedFences = new Map<string, number>();

  constructor(opts: JournalStoreOptions) {
    const { compactMinBytes = COMPACT_MIN_BYTES } = opts;
    assert.ok(Number.isSafeInteger(compactMinBytes) && compactMinBytes > 0, `journal compactMinBytes must be an integer > 0 (got ${compactMinBytes})`);
    this.durability = opts.durability;
    this.compactMinBytes = compactMinBytes;
    this.journal = opts.journal ? LeaseJournal.create(opts.root, opts.journal.base, opts.journal.generation) : LeaseJournal.create(opts.root);
    this.records = new Map(opts.records.map((r) => [r.id, r]));
    if (opts.snapshot) {
      try {
        this.journal.put(opts.records);
        this.journal.sync();
      } catch (err) {
        this.journal.close();
        throw err;
      }
    }
  }

  /** This generation's counters. */
  get stats(): { lines: number; syncs: number; bytes: number } {
    return this.journal.stats;
  }

  /** The journal file being written. */
  get path(): string {
    return this.journal.path;
  }

  /** Every record is in memory: no other process writes it. */
  mayHold(): boolean {
    return true;
  }

  prepare(): void {}

  /** Owned alone: no other process reads or writes a record, so there is nothing to lock against. */
  locked<T>(_id: string, fn: () => T): T {
    return fn();
  }

  read(id: string): ReadResult {
    const record = this.records.get(id);
    return record === undefined ? { kind: "absent" } : { kind: "valid", record };
  }

  put(record: LeaseRecord, fence: boolean): void {
    this.records.set(record.id, record);
    this.journal.put([record]);
    if (fence) this.unsyncedFences.set(record.id, this.journal.end);
    if (this.durability === "all" || fence) this.wantSync();
    this.compactIfDue();
  }

  /** A deletion (abandon): durable at once, as an unlink with its directory fsync is. */
  remove(id: string): void {
    this.records.delete(id);
    this.journal.del(id);
    this.wantSync();
  }

  enter(_span: Span): void {
    this.spans++;
  }

  /** Ends a span; the outermost one syncs what it deferred (unless it is a deferred span) and may compact. */
  leave(span: Span): void {
    this.spans--;
    if (this.spans > 0 || span === "deferred") return;
    if (this.syncWanted) this.sync();
    this.compactIfDue();
  }

  sync(): void {
    this.syncWanted = false;
    this.journal.sync();
    this.unsyncedFences.clear();
  }

  /** Makes everything journaled so far durable, in libuv's pool. */
  async syncAsync(): Promise<void> {
    const j = this.journal;
    this.syncWanted = false;
    this.asyncSyncs++;
    try {
      await j.syncAsync();
    } finally {
      this.asyncSyncs--;
    }
    for (const [id, end] of this.unsyncedFences) if (end <= j.syncedThrough) this.unsyncedFences.delete(id);
  }

  /** Before the children of `id` are published: its fence must be durable. */
  beforePublish(id: string): void {
    if ((this.unsyncedFences.get(id) ?? 0) > this.journal.syncedThrough) this.sync();
  }

  scan(): LeaseRecord[] {
    return [...this.records.values()];
  }

  where(id: string): string {
    return `${this.journal.path} (record ${id})`;
  }

  /** Closes the journal (its flock with it): the next opener absorbs it. Lines written stay. */
  close(): void {
    this.journal.close();
  }

  private wantSync(): void {
    if (this.spans > 0) this.syncWanted = true;
    else this.sync();
  }

  /** Rewrites the journal once it holds far more than its records (about 8 lines a record, and compactMinBytes). */
  private compactIfDue(): void {
    const j = this.journal;
    if (this.spans > 0 || this.asyncSyncs > 0 || j.stats.bytes < Math.max(this.compactMinBytes, this.records.size * 8 * 512)) return;
    this.journal = j.compact([...this.records.values()]);
    this.unsyncedFences.clear();
    this.syncWanted = false;
  }
}
