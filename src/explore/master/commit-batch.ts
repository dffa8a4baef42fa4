// Group commit of verified results. Results with children are queued as they are verified and
// committed a batch at a time, on the next turn of the event loop, in the same order of steps as
// one commit (commits.ts) but with the durable work shared:
//
//   pass the fences    beginCommit of every result: for a table a master owns alone, journal
//                      lines, then ONE fdatasync; for a table masters share, the record files,
//                      each fsynced as written, their shard directories once per batch
//                      (lease-table.ts); both syncs in libuv's pool, awaited below
//   sync the children  every staged child of the batch fsynced at once in libuv's pool (async:
//                      the loop goes on reading frames meanwhile)
//   promote            moves into the corpus (never over a name), then ONE directory fsync in the
//                      pool (the loop goes on reading frames), then each moved child re-hashed
//   complete           done records, children claimed, stages removed
//
// A fence is durable before any child of the batch becomes public; a child's name is durable
// before its parent's `done` is written. What a crash interrupts is what an interrupted single
// commit leaves: a `committing` record, replayed from its manifest (replayCommits), or a `leased`
// one, executed again under a new fence. A fence passed in a batch can no longer be taken over, so
// a batch of a shared table needs nothing more of the other masters. close() (drainSync) finishes
// everything synchronously.
import type { CommitManifest } from "../state/lease-table.ts";
import { fsyncDir, fsyncDirAsync } from "../state/durable.ts";
import { verifyPublic } from "../state/corpus.ts";
import { promoteChildren } from "../state/promotion.ts";
import type { OpenStage } from "../state/staging.ts";
import { syncStagedChildren, type FileIdentity } from "../state/child-sync.ts";
import type { TaskResult } from "../task.ts";
import type { CommitContext, CommitOutcome } from "./commits.ts";
import type { ActiveTask } from "./dispatch.ts";

/** The executor keys of the command's local slots (command/local-slots.ts). */
const LOCAL_SLOT = /^local-[0-9]+$/;

/**
 * Whether `executor`'s result joins a batch: a remote worker's always (it asks again on its own);
 * a local slot's only when the loop is woken once a batch settled (`woken`: the master's
 * onCommitted is set), or the slot would idle until the loop's next turn.
 */
export function batchable(executor: string, woken: boolean): boolean {
  return woken || !LOCAL_SLOT.test(executor);
}

/** Results queued or in flight beyond which a new result commits the backlog at once (back-pressure). */
export const MAX_QUEUED_COMMITS = 512;

export interface QueuedCommit {
  task: ActiveTask;
  result: TaskResult;
  /** The verified stage, pinned; closed by the batch. */
  stage: OpenStage;
  manifest: CommitManifest;
}

interface Flight {
  passed: QueuedCommit[];
  /**
   * syncing: the fences' and children's fsyncs run in the pool; promoted: the children are in the
   * corpus and its directory's fsync runs in the pool; done: completed and settled (by run(), or
   * by drainSync while one of those waits was still running).
   */
  phase: "syncing" | "promoted" | "done";
  promotion: Promotion | null;
}

/** What promotion left for completion. */
interface Promotion {
  promoted: QueuedCommit[];
  moved: string[];
  /** A child entered the corpus, or one was there but not yet trusted: the directory needs its fsync. */
  dirSync: boolean;
}

export interface CommitBatchOptions {
  ctx: CommitContext;
  /** The public object is known to hold its bytes (promotion need not read it again). */
  isVerified: (hash: string) => boolean;
  /** How a queued commit came out (master.ts counts it, claims the children). */
  settle: (c: QueuedCommit, outcome: CommitOutcome) => void;
  problem: (message: string) => void;
  /** After each batch settled. */
  settled: () => void;
}

export class CommitBatches {
  readonly stats = { batches: 0, commits: 0, largest: 0 };
  private queue: QueuedCommit[] = [];
  private flight: Flight | null = null;
  private scheduled = false;

  constructor(private readonly o: CommitBatchOptions) {}

  /** Results queued or in flight: the master is not idle while there are any. */
  get size(): number {
    return this.queue.length + (this.flight && this.flight.phase !== "done" ? this.flight.passed.length : 0);
  }

  add(c: QueuedCommit): void {
    this.queue.push(c);
    if (this.size >= MAX_QUEUED_COMMITS) this.drainSync();
    else this.schedule();
  }

  /** Commits everything queued or in flight, synchronously (close, back-pressure). */
  drainSync(): void {
    if (this.flight) this.finishSync(this.flight);
    while (this.queue.length > 0) this.finishSync({ passed: this.passFences(this.queue.splice(0)), phase: "syncing", promotion: null });
  }

  /** Whatever a flight still has to do, done now on the loop (complete() skips a finished one). */
  private finishSync(flight: Flight): void {
    // The fences first, as in run(): its syncAsync may not have started, or not returned.
    if (flight.phase === "syncing" && this.fencesDurable(flight)) this.promote(flight, []);
    this.complete(flight, false);
  }

  /**
   * Makes the journal durable on the loop (a no-op when it is); if it cannot be, no child of the
   * flight may become public: every result of it is deferred (its record stays `committing`, to
   * be replayed) and the flight is settled. Returns whether promotion may go on.
   */
  private fencesDurable(flight: Flight): boolean {
    try {
      this.o.ctx.leases.sync();
      return true;
    } catch (err) {
      flight.phase = "done";
      for (const c of flight.passed) this.end(c, { kind: "deferred", error: err as Error }, false);
      this.o.settled();
      return false;
    }
  }

  private schedule(): void {
    if (this.scheduled || this.flight) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.run().catch((err: unknown) => this.o.problem(`group commit failed: ${(err as Error).message}`));
    });
  }

  private async run(): Promise<void> {
    while (this.queue.length > 0 && this.flight === null) {
      const flight: Flight = { passed: this.passFences(this.queue.splice(0)), phase: "syncing", promotion: null };
      this.flight = flight;
      let synced: Map<string, FileIdentity>[] = [];
      // The fences' fdatasync and the children's fsyncs run together, off the loop.
      const fences = this.o.ctx.leases.syncAsync().then(() => true, () => false);
      try {
        synced = await syncStagedChildren(
          flight.passed.map((c) => ({ stage: c.stage.dir, hashes: c.manifest.hashes })),
          this.o.ctx.corpusDir,
          this.o.isVerified,
        );
      } catch {
        // Promotion fsyncs each child itself then, and reports what fails.
      }
      // A failed async sync is tried again on the loop before anything is published.
      const fencesSynced = await fences;
      if (flight.phase === "syncing" && (fencesSynced || this.fencesDurable(flight))) {
        const { dirSync } = this.promote(flight, synced);
        // A failed async fsync is done again on the loop by complete(), which reports its error.
        const dirSynced = dirSync ? await fsyncDirAsync(this.o.ctx.corpusDir).then(() => true, () => false) : true;
        // drainSync may have completed the flight meanwhile; complete() then does nothing.
        this.complete(flight, dirSynced);
      }
      this.flight = null;
    }
  }

  /** beginCommit of each, one journal fdatasync for all; the ones that passed. */
  private passFences(items: QueuedCommit[]): QueuedCommit[] {
    const { leases, wallNow } = this.o.ctx;
    const passed: QueuedCommit[] = [];
    this.stats.batches++;
    this.stats.largest = Math.max(this.stats.largest, items.length);
    // drainSync syncs the fences on the loop before it publishes; run() awaits syncAsync first.
    leases.deferredBatch(() => {
      for (const c of items) {
        let ok: boolean;
        try {
          ok = leases.beginCommit(c.task.hash, c.task.fence, c.manifest, wallNow());
        } catch (err) {
          this.end(c, { kind: "deferred", error: err as Error }, false);
          continue;
        }
        if (ok) passed.push(c);
        else this.end(c, { kind: "stale", note: "stale" }, true);
      }
    });
    return passed;
  }

  /** Moves each passed result's children into the corpus; `synced[i]`: what syncStagedChildren synced of item i's stage. */
  private promote(flight: Flight, synced: readonly ReadonlyMap<string, FileIdentity>[]): Promotion {
    const { ctx } = this.o;
    const moved: string[] = [];
    let existing = 0;
    const promoted: QueuedCommit[] = [];
    for (const [i, c] of flight.passed.entries()) {
      try {
        existing += promoteChildren(c.stage.dir, ctx.corpusDir, c.manifest.hashes, { maxBytes: ctx.maxInputBytes, trusted: this.o.isVerified, synced: synced[i], moved });
        promoted.push(c);
      } catch (err) {
        this.end(c, { kind: "deferred", error: err as Error }, false);
      }
    }
    flight.phase = "promoted";
    flight.promotion = { promoted, moved, dirSync: moved.length > 0 || existing > 0 };
    return flight.promotion;
  }

  /** The corpus directory durable (`dirSynced`: already, in the pool), the moved children re-hashed, then the done records; settles the flight. */
  private complete(flight: Flight, dirSynced: boolean): void {
    if (flight.phase !== "promoted") return;
    flight.phase = "done";
    const { ctx } = this.o;
    const promotion = flight.promotion!;
    let { promoted } = promotion;
    try {
      if (promotion.dirSync && !dirSynced) fsyncDir(ctx.corpusDir);
      for (const hash of promotion.moved) verifyPublic(ctx.corpusDir, hash, ctx.maxInputBytes);
    } catch (err) {
      // Which child failed does not matter: every record stays `committing` and is replayed.
      for (const c of promoted) this.end(c, { kind: "deferred", error: err as Error }, false);
      promoted = [];
    }
    ctx.leases.batch(() => {
      for (const c of promoted) {
        let outcome: CommitOutcome;
        try {
          const r = ctx.leases.replayCommit(c.task.hash, c.task.fence, () => {}, ctx.wallNow());
          outcome = r === "completed" ? { kind: "committed", children: c.manifest.hashes } : { kind: "stale", note: r };
        } catch (err) {
          outcome = { kind: "deferred", error: err as Error };
        }
        this.end(c, outcome, outcome.kind !== "deferred");
      }
    });
    this.o.settled();
  }

  private end(c: QueuedCommit, outcome: CommitOutcome, removeStage: boolean): void {
    this.stats.commits++;
    try {
      if (removeStage) void c.stage.removeAndClose();
      else c.stage.close();
    } finally {
      this.o.settle(c, outcome);
    }
  }
}
