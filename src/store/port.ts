// The sweep store port: every operation the sweep engine, the generator contract, the reports and
// the commands need of a campaign's books, in the sweep's own words. The domain talks to a
// SweepStore and never to a database: SQLite is one adapter of it (sqlite/), and another backend
// would be a new folder beside it implementing this interface.
//
// Contracts every backend keeps:
// - A write is atomic only inside `atomically` or `transaction`; memory may run ahead of nothing
//   (ARCHITECTURE.md §7.7): a unit that throws leaves the books as they were before it.
// - When the backend refuses a write (another process holds its lock, the disk is full, …) the
//   error it throws is classified by `refusalOf` into one of the port's RefusalCodes; the commit
//   queue retries those and nothing else.
// - Records are plain values (records.ts); timestamps are the store's own (isoNow).
import type {
  ChunkCounts,
  ChunkRecord,
  ChunkTotals,
  FailureFilter,
  FailureGroup,
  FailureListRow,
  FailureRow,
  GenerationRow,
  LaneRow,
  MinimizeProgress,
  MinimizeUnitRow,
  NewChunk,
  NewFailure,
  NewSession,
  NewWorker,
  PendingFind,
  PendingGroup,
  QuarantineGroup,
  QuarantineReason,
  RepairedRange,
  SeedLane,
  SessionEnd,
  SessionRow,
  SessionWorker,
  TimedChunk,
} from "./records.ts";
import type { ChunkRow } from "../core/lane-state.ts";
import type { SweepHistory } from "./history.ts";
import type { IncidenceCounts, LaneTally } from "./tallies.ts";
import type { LaneBuilds } from "./build-ranges.ts";

export type * from "./records.ts";
export type { BuildRange, LaneBuilds } from "./build-ranges.ts";
export type { SweepHistory } from "./history.ts";
export type { IncidenceCounts, LaneTally } from "./tallies.ts";
export { FAILURE_STATES, isoNow, reasonList, UNRECORDED_REASON } from "./records.ts";

/**
 * Why the store refused a write, in the port's words: "busy" (another process holds the lock),
 * "full" (no space left), "readonly" (the file or its mount turned read-only), "io" (the disk or
 * the file failed), "corrupt" (the books are damaged: never retried).
 */
export type RefusalCode = "busy" | "full" | "readonly" | "io" | "corrupt";

export interface StoreRefusal {
  code: RefusalCode;
  /** The backend's own name for it (SQLite: "SQLITE_FULL"), for the operator's message only. */
  detail: string;
}

/** Units of work: how changes to the books are made atomic, and how refusals are told apart. */
export interface StoreTransactions {
  /**
   * Runs `fn` atomically: in a transaction of its own, or simply inside the caller's when one is
   * open already (the caller's transaction then makes it atomic, at no extra cost).
   */
  atomically<T>(fn: () => T): T;
  /**
   * Runs `fn` in a transaction of its own, or nested in the open one so that a throw undoes `fn`'s
   * writes alone (the commit queue: one transaction per batch, one nested unit per handler).
   * Returns when the outermost unit committed (durable unless the store syncs separately).
   */
  transaction<T>(fn: () => T): T;
  /** Whether a unit of work is open now (a reader must not take its half-done state for the books). */
  readonly inTransaction: boolean;
  /** How long a write waits for another process's lock before it is refused as "busy" (ms). */
  setLockWait(ms: number): void;
  /** The refusal `err` stands for, or null when it is not the store refusing (a bug, a constraint). */
  refusalOf(err: unknown): StoreRefusal | null;
}

/** Generations: one per version of the generator; a new one makes the old one's open failures stale. */
export interface GenerationBook {
  currentGeneration(): GenerationRow | undefined;
  /** Starts a generation, closing `previousId` first (open failures stale, lanes retired). Returns its id. */
  startGeneration(previousId: number | null, genHash: string, note: string): number;
  /** Distinct seeds covered by complete chunks of every lane of the generation (read from the cursors and the chunks ahead of them). */
  seedsSwept(generationId: number): number;
}

/** Lanes and their coverage: `[base_seed, cursor)`. */
export interface LaneBook {
  activeLane(generationId: number, name: string): LaneRow | undefined;
  activeLanes(generationId: number): LaneRow[];
  /** Retires `previousId` (when given) and starts the lane afresh at `baseSeed`. Returns the new lane's id. */
  restartLane(previousId: number | null, generationId: number, name: string, paramsJson: string, baseSeed: number): number;
  saveCursor(laneId: number, cursor: number): void;
  /** Cursor and rate together: what every completed chunk changes. */
  saveLaneProgress(laneId: number, cursor: number, seedsPerSec: number | null): void;
  saveLaneRate(laneId: number, seedsPerSec: number | null): void;
  /** Every chunk of a lane, any session and status: what the lane's state is rebuilt from. */
  laneChunks(laneId: number): ChunkRow[];
  /** Size of the lane's most recent complete chunk (the 3x cap of chunk sizing). */
  lastCompleteCount(laneId: number): number | null;
  /** Seeds of complete chunks at or above the cursor: shown, never counted as coverage. */
  doneAheadOfCursor(laneId: number, cursor: number): number;
  laneSeedsSwept(laneId: number): number;
  /** Clamps cursors stored past `limit` back to it; returns the lanes changed. */
  repairLaneCursors(limit: number): { laneId: number; name: string; cursor: number }[];
}

/** Chunks: the booking of seed ranges, from handed out to complete or aborted. */
export interface ChunkBook {
  /** Books a chunk in flight ("running" here, or "leased" to a worker). Returns its id. */
  bookChunk(c: NewChunk): number;
  chunk(chunkId: number): ChunkRecord | undefined;
  completeChunk(chunkId: number, seconds: number, counts: ChunkCounts): void;
  /** Ends a chunk that did not complete: `status` is "reissued" or "aborted:<why>". */
  endChunk(chunkId: number, status: string, seconds: number | null): void;
  chunkHeartbeat(chunkId: number): void;
  /** Marks every chunk still in flight "aborted:lost" (a dead process's); returns how many. Lock held. */
  abortLostChunks(): number;
  /** Repairs chunks whose seed range no engine could hand out; returns what changed. Lock held. */
  repairChunkRanges(lastSeed: number): RepairedRange[];
  sessionChunkIds(sessionId: number): number[];
  chunkTotals(generationId: number): ChunkTotals;
  /** Complete chunks of a generation with their times, in booking order (the timeline). */
  completeTimedChunks(generationId: number): TimedChunk[];
  completeTotals(generationId: number): { chunks: number; finds: number };
  /** Failing seeds found by each lane's complete chunks, by lane id. */
  findsByLane(): Map<number, number>;
}

/** Failures: distinct failures, finds pending minimization, and the seeds that hit them. */
export interface FailureBook {
  failureByKey(generationId: number, dedupKey: string): FailureRow | undefined;
  failureById(id: number): FailureRow | undefined;
  /** Records a failure with no hits yet (the first addFailureSeed makes it 1). Returns its id. */
  recordFailure(f: NewFailure): number;
  signatureSeen(generationId: number, signature: string): boolean;
  /** Records that `seed` hit the failure; true only when this (failure, seed) pair is new. */
  addFailureSeed(failureId: number, seed: number, chunkId: number | null): boolean;
  failureSeeds(failureId: number, limit?: number): number[];
  failureSeedLanes(failureId: number, limit: number): SeedLane[];
  markFailureFixed(failureId: number, appBuild: string | null): void;
  reopenFailure(failureId: number): void;
  /** A re-check still fails: the failure was seen again now, under `appBuild` when given. */
  touchFailure(failureId: number, appBuild?: string | null): void;
  listFailures(filter: FailureFilter): FailureListRow[];
  failureGroups(generationId: number): FailureGroup[];
  pendingGroups(filter: FailureFilter): PendingGroup[];
  /** The finds pending minimization in `filter` and the seeds they hit, without grouping them (what a dashboard totals). */
  pendingTotals(filter: FailureFilter): { finds: number; hits: number };
  staleFailureCount(): number;
  openFailureCount(generationId: number): number;
  /** When each failure of a generation was first seen, earliest first. */
  failureFirstSeen(generationId: number): string[];
}

/** Minimization: units over finds pending minimization, and what became of each find. */
export interface MinimizeBook {
  nextPendingFinds(generationId: number, laneIds: readonly number[], limit: number): PendingFind[];
  /** Books a minimize unit holding `findIds`. Returns its id. */
  bookMinimizeUnit(u: { sessionId: number; laneId: number; workerId: number | null; findIds: readonly number[]; status: "running" | "leased" }): number;
  minimizeUnit(unitId: number): MinimizeUnitRow | undefined;
  /** The finds a unit still holds, with their seeds. */
  unitFinds(unitId: number): { id: number; seed: number }[];
  endMinimizeUnit(unitId: number, status: string, seconds: number | null, counts: { merged: number; newFailures: number; failed: number }): void;
  /** A unit that did not complete gives its finds back; returns how many. */
  releaseUnitFinds(unitId: number): number;
  /** Units of a dead process become aborted:lost, their finds pending again; returns how many finds. Lock held. */
  releaseLostUnits(): number;
  markFindFailed(findId: number, note: string): void;
  /** The find was minimized into `targetId`; true when that target was fixed (a regression). */
  mergeFind(findId: number, targetId: number): boolean;
  /** A pending find whose own input was minimal becomes a distinct failure itself. */
  promoteFind(findId: number): void;
  sessionUnitIds(sessionId: number): number[];
  minimizeProgress(generationId: number): MinimizeProgress;
}

/** Quarantined tests: the generator's self-failures, per reason. */
export interface QuarantineBook {
  saveQuarantineReasons(chunkId: number, reasons: readonly QuarantineReason[]): void;
  quarantineGroups(generationId: number): QuarantineGroup[];
  sessionQuarantineGroups(sessionId: number): QuarantineGroup[];
}

/** Sessions and the workers attached to them. */
export interface SessionBook {
  startSession(s: NewSession): number;
  endSession(sessionId: number, status: SessionEnd): void;
  /** Marks every session still "running" as "crashed"; returns their ids. Lock held. */
  markCrashedSessions(): number[];
  setSessionPort(sessionId: number, port: number): void;
  recentSessions(limit: number): SessionRow[];
  /** Records a worker that joined. Returns its id. */
  joinWorker(w: NewWorker): number;
  workerGone(workerId: number): void;
  workerSeen(workerId: number): void;
  saveWorkerRate(workerId: number, laneId: number, seedsPerSec: number): void;
  /** Rates measured by earlier workers of this host with the same -j, by lane name. */
  earlierRates(host: string, jobs: number, beforeWorkerId: number): Map<string, number>;
  /** The workers of a session, each with the chunks it holds now. */
  sessionWorkers(sessionId: number): SessionWorker[];
}

/**
 * What the views read: aggregates the books keep up to date in the same unit of work that changes
 * them, so that a view costs what it shows (lanes, distinct failures, rows of a page), never what
 * the campaign has accumulated (chunks, hits).
 */
export interface ViewBook {
  /** Per lane of the generation (retired ones included) and app build: what its chunks add up to. */
  laneTallies(generationId: number): LaneTally[];
  /**
   * Which app builds swept which seeds of the lane: its `shown` highest ranges (merged where
   * contiguous, lowest first), how many lie below them, and the seeds of its covered prefix swept
   * under `currentBuild`. Costs the lane's ranges (one per build change), never its chunks.
   */
  laneBuilds(lane: { id: number; base_seed: number; cursor: number }, currentBuild: string | null, shown: number): LaneBuilds;
  /** The generation's history at a bounded number of points; null before anything was recorded. */
  sweepHistory(generationId: number): SweepHistory | null;
  /** Distinct failures and their singletons and doubletons, for the campaign and by lane id. */
  incidenceCounts(generationId: number): { campaign: IncidenceCounts; lanes: Map<number, IncidenceCounts> };
  /** One page of listFailures' order. */
  failurePage(filter: FailureFilter, limit: number, offset: number): FailureListRow[];
  /** How many distinct failures the filter selects, their hits, and how many per state. */
  countFailures(filter: FailureFilter): { distinct: number; hits: number; byState: Record<string, number> };
}

/** A campaign's books. */
export interface SweepStore extends StoreTransactions, GenerationBook, LaneBook, ChunkBook, FailureBook, MinimizeBook, QuarantineBook, SessionBook, ViewBook {
  /** Closes the store; a store obtained from a connection someone else owns leaves it open. */
  close(): void;
}

/** Makes commits durable off the event loop, for a store whose commits do not sync themselves. */
export interface StoreDurability {
  /** Resolves once every commit made before the call is on disk; rejects with a StoreError when that fails. */
  sync(): Promise<void>;
}

/**
 * The books as a sweep session writes them (the one writer the campaign lock admits): once the
 * session is set up, a backend may defer the durability of its commits, and the session's commit
 * queue then settles a commit's handlers only once `sync()` says the commit is on disk.
 */
export interface SessionStore extends SweepStore {
  /**
   * From now on a commit may return before it is durable, where the backend makes commits durable
   * more cheaply off the event loop: returns how to wait for that, or null when every commit stays
   * durable when it returns. Called once, after the session's opening writes.
   */
  deferDurability(): StoreDurability | null;
  /**
   * Before the session's last writes: every commit so far made durable, each later one durable
   * when it returns, and a write waits for another process's lock as long as when the store
   * opened. Rejects when the store cannot be made durable (the session's end is then not recorded).
   */
  settle(): Promise<void>;
}
