// Taking a share of a partitioned lease table under the next generation (partitioned.ts says
// when): with the share's short lock held, the holder's journals are locked (so no live writer
// appends meanwhile), replayed into a snapshot that starts a new journal (synced), the partition
// record names the new generation (synced), and only then are the old journals removed. A crash
// anywhere before the record is renamed in leaves the old generation whole; after it, the new
// journal holds every record, so removing the old ones is only tidying.
import { closeSync, unlinkSync } from "node:fs";
import type { LeaseRecord } from "../../../core/lease-record.ts";
import { randomHex } from "../../../util/random-hex.ts";
import { fsyncDir } from "../durable.ts";
import { JournalStore } from "./journal.ts";
import { highestJournalGeneration, journalFiles, lockAbandonedJournals, readPartition, replayShare, writePartitionSynced, type PartitionRecord } from "./partition-lease.ts";
import type { Durability } from "./port.ts";

/** What taking a share needs to know of the store that takes it. */
export interface ShareOptions {
  root: string;
  durability: Durability;
  /** Who this master is in the partition records (epoch prefix and rank, as lease owners are named). */
  holder: string;
  epoch: string;
  /** A share's lease expires this long after its holder's last renewal. */
  ttlMs: number;
  /** Wall-clock ms (records compare across hosts). */
  wallNow: () => number;
  /** The table's shard count: a share taken over starts from its records in the record files (a resumed campaign's, or a journal absorbed into them). */
  shardCount: number;
  compactMinBytes?: number;
  /**
   * Whether a takeover also needs the holder's journal lock free (default true). The simulation
   * turns it off to stand for a file system that drops a stalled holder's lock with its lease
   * (NFSv4): then the generation check alone fences the holder when it wakes.
   */
  needLockFree?: boolean;
}

/** A share this master serves. */
export interface Share {
  rank: number;
  generation: number;
  base: string;
  store: JournalStore;
  lost: boolean;
}

export type TakeoverResult =
  | { kind: "taken"; rank: number; generation: number; previous: PartitionRecord | null; records: LeaseRecord[] }
  | { kind: "live" | "busy" | "absent" | "held"; rank: number };

/**
 * Takes `rank`'s share under the next generation; the caller holds the share's short lock.
 * `own`: this is the opener's own rank (a missing record is created, generation 1).
 */
export function takeShareLocked(
  o: ShareOptions,
  rank: number,
  own: boolean,
  shareOf: (id: string) => number,
): { kind: "taken"; result: TakeoverResult; share: Share } | { kind: "not"; result: TakeoverResult } {
  const { root } = o;
  const now = o.wallNow();
  const prev = readPartition(root, rank);
  if (prev === null && !own) return { kind: "not", result: { kind: "absent", rank } };
  if (prev !== null && prev.holder !== "" && now - prev.heartbeat < o.ttlMs) return { kind: "not", result: { kind: "live", rank } };
  const old = prev === null ? [] : journalFiles(root, prev.journal);
  const fds = o.needLockFree === false ? [] : lockAbandonedJournals(old);
  if (fds === null) return { kind: "not", result: { kind: "busy", rank } };
  try {
    // Read now, with the old journals' locks held: a journal absorbed meanwhile is in the files.
    const records = replayShare(root, o.shardCount, old, (id) => shareOf(id) === rank);
    const base = `journal-${process.pid}-${randomHex(6)}`;
    const store = new JournalStore({
      root,
      durability: o.durability,
      records,
      compactMinBytes: o.compactMinBytes,
      journal: { base, generation: highestJournalGeneration(root) + 1 },
      snapshot: true,
    });
    const generation = (prev?.generation ?? 0) + 1;
    try {
      writePartitionSynced(root, { schema: 1, rank, epoch: o.epoch, generation, holder: o.holder, heartbeat: now, journal: base });
    } catch (err) {
      store.close();
      throw err;
    }
    for (const path of old) {
      try {
        unlinkSync(path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      }
    }
    if (old.length > 0) fsyncDir(root);
    return { kind: "taken", result: { kind: "taken", rank, generation, previous: prev, records }, share: { rank, generation, base, store, lost: false } };
  } finally {
    for (const fd of fds) closeSync(fd);
  }
}
