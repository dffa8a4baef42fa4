// The record store of the lease table: what the transitions of core/lease-record.ts, applied by
// explore/state/lease-table.ts, need of the place the records live. Each store is one file here:
//
//   shared-files.ts   one file per record under a per-record flock; any number of masters share it
//   journal.ts        a table one process owns alone: records in memory, one journal line each
//   partitioned.ts    several masters, each serving its share under a fenced partition lease
//                     (partition-lease.ts) and journalling it as journal.ts does
//   memory.ts         records in memory only (the deterministic simulation's store)
//
// The contract every store keeps (test/explore/lease-stores.test.ts checks it against each):
//
//   locked(id, fn)   fn runs with record `id` to itself: no other writer of the table reads or
//                    writes it until fn returns or throws. A transition is read, decide, write
//                    inside one locked() call.
//   read(id)         the record as last written (in this process or any other sharing the
//                    store); a record that does not validate is "invalid", never free.
//   put(rec, fence)  replaces the whole record; a reader sees the old one or the new one. The
//                    store's durability policy says which puts are made durable: every one
//                    ("all"), or only a commit fence with children to publish (`fence`) under
//                    "fence". Once put() returns, a process crash loses nothing; a machine crash
//                    loses only what the policy let wait.
//   remove(id)       deletes the record, durably at once.
//   spans            enter(span) ... leave(span) bracket writes whose syncs may wait; what a
//                    span lets wait is the store's, documented in each store (see Span).
//   beforePublish    before the children of `id`'s commit become public: its fence is durable.
//   sync/syncAsync   everything a span let wait is made durable (syncAsync in libuv's pool;
//                    what it fails to sync stays for sync()).
//   scan()           every record, in no particular order; throws on an invalid one.
//   close()          releases what the store holds (files, locks); a crash is a close without it.
import type { LeaseRecord } from "../../../core/lease-record.ts";
import type { ReadResult } from "../lease-files.ts";

export type { ReadResult } from "../lease-files.ts";

export type Durability = "all" | "fence";

/**
 * What a span lets wait:
 *   batch       a group commit: syncs may wait for the end of the outermost span
 *   deferred    syncs wait for the caller's sync() or syncAsync(), which it awaits before it
 *               publishes anything those writes fence
 *   heartbeats  a batch of renewals: syncs wait for the end of the span, which tries them all
 *               and throws the first failure
 */
export type Span = "batch" | "deferred" | "heartbeats";

export interface RecordStore {
  readonly durability: Durability;
  /** Whether record `id` may exist; false lets a transition on it refuse without a lock. */
  mayHold(id: string): boolean;
  /** Before the first write of `id` in this process (a shard directory to create). */
  prepare(id: string): void;
  locked<T>(id: string, fn: () => T): T;
  read(id: string): ReadResult;
  put(record: LeaseRecord, fence: boolean): void;
  remove(id: string): void;
  enter(span: Span): void;
  leave(span: Span): void;
  beforePublish(id: string): void;
  sync(): void;
  syncAsync(): Promise<void>;
  scan(): LeaseRecord[];
  /** Where record `id` lives, for an error that names it. */
  where(id: string): string;
  close(): void;
}
