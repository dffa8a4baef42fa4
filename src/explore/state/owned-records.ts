// The records of a lease table one process owns alone (LeaseTable.takeExclusive): all in memory,
// every change one line of the process's journal (lease-journal.ts), with the table's durability
// policy applied to the journal instead of to record files:
//
//   a change the policy wants durable (a commit fence with children; every change under
//   --sync all) is fdatasynced at once, or at the end of the current batch (group commit), or —
//   in a deferred batch — by the caller's syncAsync() in libuv's pool; a publication that comes
//   first syncs on the spot (beforePublish), so a fence is always durable before its children.
//
// The journal is compacted once it is well past the records it describes.
import type { LeaseRecord } from "../../core/lease-record.ts";
import { compactMinBytes, LeaseJournal } from "./lease-journal.ts";

export class OwnedRecords {
  readonly records: Map<string, LeaseRecord>;
  private journal: LeaseJournal;
  /** Open batches: syncs the policy asks for wait for the end of the outermost one. */
  private batching = 0;
  private syncWanted = false;
  /** fdatasyncs running in the pool: no compaction (which closes the descriptor) meanwhile. */
  private asyncSyncs = 0;
  /** Records whose commit fence was journaled, and the journal offset it must be synced through. */
  private readonly unsyncedFences = new Map<string, number>();

  constructor(root: string, records: readonly LeaseRecord[], private readonly durability: "all" | "fence") {
    this.journal = LeaseJournal.create(root);
    this.records = new Map(records.map((r) => [r.id, r]));
  }

  /** This generation's counters. */
  get stats(): { lines: number; syncs: number; bytes: number } {
    return this.journal.stats;
  }

  put(record: LeaseRecord, fence: boolean): void {
    this.records.set(record.id, record);
    this.journal.put([record]);
    if (fence) this.unsyncedFences.set(record.id, this.journal.end);
    if (this.durability === "all" || fence) this.wantSync();
    this.compactIfDue();
  }

  /** A deletion (abandon): durable at once, as an unlink with its directory fsync was. */
  del(id: string): void {
    this.records.delete(id);
    this.journal.del(id);
    this.wantSync();
  }

  enter(): void {
    this.batching++;
  }

  /** Ends a batch; the outermost one syncs what it deferred (unless `deferred`) and may compact. */
  leave(deferred = false): void {
    this.batching--;
    if (this.batching > 0 || deferred) return;
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

  private wantSync(): void {
    if (this.batching > 0) this.syncWanted = true;
    else this.sync();
  }

  /** Rewrites the journal once it holds far more than its records (about 8 lines a record, and 64 MiB). */
  private compactIfDue(): void {
    const j = this.journal;
    if (this.batching > 0 || this.asyncSyncs > 0 || j.stats.bytes < Math.max(compactMinBytes(), this.records.size * 8 * 512)) return;
    this.journal = j.compact([...this.records.values()]);
    this.unsyncedFences.clear();
    this.syncWanted = false;
  }
}
