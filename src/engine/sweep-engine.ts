// SweepEngine: the one scheduler of sweep campaigns. It decides which lane and range a worker
// runs next, records every chunk in the store, and books the outcome. It does not run anything:
// an executor (LocalExecutor in-process, or remote workers over TCP) asks it for work with
// `assign` and reports back with `finish`. Lane picking, chunk sizing, deadlines, ingest and
// session bookkeeping therefore exist once, whatever the transport.
//
// Chunk life: assign -> (running | leased) -> finish -> complete | aborted:<why> | aborted:broken
//                                          -> reissue -> reissued (range queued again; a late
//                                             successful finish still counts, once)
// Coverage only moves through LaneState.complete, i.e. to the low-water mark, and only for a run
// that kept the generator contract (generator/contract.ts): a broken run is aborted, its range
// swept again, and BROKEN_IN_A_ROW of them disable the lane for the executor. A lane whose seeds
// run out at the last exact seed (core/ranges.ts) is exhausted: it gets no more chunks, and a
// session whose every lane is exhausted drains.
//
// The engine is the in-memory half of the books; its store writes run inside a CommitQueue
// transaction, and it implements Books so that a transaction the store refused puts its memory
// back (checkpoint / rollback). What must not happen before the commit — removing a chunk's files,
// printing its line — waits in `afterCommit` until the queue reports the commit.
//
// Minimize units, the second kind of unit, are `engine.minimize` (minimize-units.ts).
import assert from "node:assert/strict";
import { relative } from "node:path";
import { removeBelow } from "../files/pinned-dir.ts";
import type { LaneConfig } from "../config/schema.ts";
import { chunkTarget, deadlineFloor, halveRate, hardTimeout, pickLane, sizeChunk, updateRate } from "../core/schedule.ts";
import type { SweepStore } from "../store/port.ts";
import { chunkCommand, resultsDir } from "../generator/command.ts";
import { contractBreach, outputTail, resultsMissing } from "../generator/contract.ts";
import { LAST_SEED } from "../core/ranges.ts";
import { ingestChunk, type IngestResult } from "../generator/ingest.ts";
import type { Books } from "./commit-queue.ts";
import { chunkPaths, discardChunkFiles } from "./chunk-files.ts";
import { rememberWorker, restoreWorker, type EngineMark } from "./engine-memory.ts";
import { MinimizeUnits } from "./minimize-units.ts";
import {
  abortWording,
  type Assignment,
  type AssignResult,
  type ChunkReport,
  type DrainReason,
  type EngineLane,
  type EngineOptions,
  type FinishResult,
  type InFlight,
  type SessionCounts,
  type WorkerView,
} from "./sweep-types.ts";

// The engine's vocabulary lives in sweep-types.ts; its users import it from here, with the engine.
export * from "./sweep-types.ts";
export type { EngineMark } from "./engine-memory.ts";

/** Broken chunks in a row that disable a lane for an executor (a typo fails every chunk; a flaky run may fail one). */
export const BROKEN_IN_A_ROW = 3;

/** Thrown inside ingest's savepoint to take back what a broken run's results recorded. */
const TAKE_BACK = Symbol("broken chunk");

/** What booking a run's results came to (see SweepEngine.book). */
interface Booked {
  ingest: IngestResult;
  /** Why the run broke the generator contract, or null. */
  breach: string | null;
  clean: number;
  fresh: number;
}

export class SweepEngine implements Books<EngineMark> {
  readonly floorSeconds: number;
  counts: SessionCounts = {
    chunks: 0,
    seedsSwept: 0,
    finds: 0,
    newFailures: 0,
    newDistinct: 0,
    newPending: 0,
    newSignatures: 0,
    reopened: 0,
    unshrunk: 0,
    quarantine: 0,
    malformed: 0,
    minimizeUnits: 0,
    minimized: 0,
    minimizeFailed: 0,
    minimizeSeconds: 0,
    chunkSeconds: 0,
  };
  private readonly lanes = new Map<string, EngineLane>();
  private readonly lanesById = new Map<number, EngineLane>();
  /** The lanes pickLane chooses from: enabled in the config (fixed for the session). */
  private readonly enabledConfigs: LaneConfig[];
  private chunksRun = new Map<string, number>();
  private inFlight = new Map<number, InFlight>();
  private drainReason: DrainReason | null = null;
  /** The open checkpoint, while a CommitQueue transaction runs. */
  private mark: EngineMark | null = null;
  private afterCommit: (() => void)[] = [];
  /** The second kind of unit: finds pending minimization (minimize-units.ts). */
  readonly minimize: MinimizeUnits;

  /** The books this engine keeps in memory are the ones this store holds. */
  readonly store: SweepStore;

  constructor(private readonly o: EngineOptions) {
    this.store = o.store;
    for (const lane of o.lanes) {
      this.lanes.set(lane.config.name, lane);
      this.lanesById.set(lane.laneId, lane);
    }
    const engine = this;
    this.minimize = new MinimizeUnits(o, this.store, this.lanesById, {
      get draining() {
        return engine.drainReason;
      },
      get counts() {
        return engine.counts;
      },
      get floorSeconds() {
        return engine.floorSeconds;
      },
      remainingSeconds: () => this.remainingSeconds(),
      whenCommitted: (action) => this.whenCommitted(action),
      touch: (worker) => this.touch(worker),
      laneDisabled: (lane, worker, why) => this.whenCommitted(() => o.events.laneDisabled(lane, worker, why)),
    });
    this.enabledConfigs = o.lanes.filter((l) => l.config.enabled).map((l) => l.config);
    this.floorSeconds = deadlineFloor(o.config.defaults.chunkSeconds);
  }

  get draining(): DrainReason | null {
    return this.drainReason;
  }

  drain(reason: DrainReason): void {
    this.drainReason ??= reason;
  }

  // ---- Books ---------------------------------------------------------------------------------

  checkpoint(): EngineMark {
    assert.ok(this.mark === null, "checkpoint inside an open checkpoint");
    this.mark = {
      lanes: [...this.lanes.values()].map((lane) => ({ lane, state: lane.state.snapshot(), rate: lane.rate })),
      chunksRun: new Map(this.chunksRun),
      inFlight: new Map(this.inFlight),
      minimizing: new Map(this.minimize.inFlight),
      counts: { ...this.counts },
      workers: new Map(),
    };
    return this.mark;
  }

  rollback(mark: EngineMark): void {
    assert.ok(this.mark === mark, "rollback of a checkpoint that is not the open one");
    for (const { lane, state, rate } of mark.lanes) {
      lane.state.restore(state);
      lane.rate = rate;
    }
    this.chunksRun = mark.chunksRun;
    this.inFlight = mark.inFlight;
    this.minimize.inFlight = mark.minimizing;
    this.counts = mark.counts;
    for (const [worker, m] of mark.workers) restoreWorker(worker, m);
    this.afterCommit = [];
    this.mark = null;
  }

  committed(): () => void {
    this.mark = null;
    const actions = this.afterCommit;
    this.afterCommit = [];
    return () => {
      for (const action of actions) action();
    };
  }

  /** Runs `action` once the open transaction committed (at once outside one). */
  private whenCommitted(action: () => void): void {
    if (this.mark === null) action();
    else this.afterCommit.push(action);
  }

  /** Remembers `worker`'s scheduling memory before the first change inside the open checkpoint. */
  private touch(worker: WorkerView): void {
    if (this.mark === null || this.mark.workers.has(worker)) return;
    this.mark.workers.set(worker, rememberWorker(worker));
  }

  // ---- scheduling ------------------------------------------------------------------------------

  remainingSeconds(): number {
    return (this.o.deadlineMs - this.o.now()) / 1000;
  }

  inFlightChunks(): InFlight[] {
    return [...this.inFlight.values()];
  }

  engineLanes(): EngineLane[] {
    return [...this.lanes.values()];
  }

  /** The next chunk for `worker`, or why there is none. */
  assign(worker: WorkerView): AssignResult {
    if (this.drainReason) return { kind: "drain", reason: this.drainReason };
    const remaining = this.remainingSeconds();
    if (remaining < this.floorSeconds) {
      this.drain("deadline");
      return { kind: "drain", reason: "deadline" };
    }
    const spent = this.enabledConfigs.filter((l) => !this.lanes.get(l.name)!.state.hasWork()).map((l) => l.name);
    const laneName = pickLane(this.enabledConfigs, this.chunksRun, spent.length === 0 ? worker.disabled : new Set([...worker.disabled, ...spent]));
    if (laneName === undefined) {
      if (spent.length === this.enabledConfigs.length) {
        // Chunks in flight may still fail and give seeds back; with none, nothing ever will.
        if (this.inFlight.size > 0) return { kind: "idle", why: "every lane's last seeds are handed out" };
        this.drain("every lane exhausted");
        return { kind: "drain", reason: "every lane exhausted" };
      }
      if (this.o.transport === "local") {
        this.drain("all lanes disabled");
        return { kind: "drain", reason: "all lanes disabled" };
      }
      return { kind: "idle", why: "every lane is disabled for this worker" };
    }
    const lane = this.lanes.get(laneName)!;
    const c = this.o.config.defaults;
    const target = chunkTarget(c.chunkSeconds, remaining);
    const rate = worker.rates.get(laneName) ?? null;
    const n = sizeChunk(rate, worker.lastCount.get(laneName) ?? null, target, c.bootstrapSeeds);
    const [seedFrom, seedTo] = lane.state.take(n);
    const chunkId = this.store.bookChunk({
      sessionId: this.o.sessionId,
      laneId: lane.laneId,
      seedFrom,
      seedTo,
      appBuild: this.o.appBuild,
      status: this.o.transport === "local" ? "running" : "leased",
      workerId: worker.workerId,
    });
    this.chunksRun.set(laneName, (this.chunksRun.get(laneName) ?? 0) + 1);
    // Whoever runs the chunk starts from an empty scratch directory (local.ts, the worker's
    // sweep runner): clearing it here would put file-system work on the coordinator's hot path.
    const { scratchDir, logPath } = chunkPaths(this.o.outDir, chunkId);
    const argv = chunkCommand(this.o.config.generator.command, lane.config.args, {
      seedFrom,
      seedTo,
      jobs: this.o.transport === "local" ? lane.config.jobs : worker.jobs,
      out: scratchDir,
      maxShrinks: c.maxShrinks,
    });
    const assignment: Assignment = {
      chunkId,
      lane: laneName,
      laneId: lane.laneId,
      seedFrom,
      seedTo,
      argv,
      cwd: this.o.config.dir,
      scratchDir,
      logPath,
      targetSeconds: target,
      hardTimeoutSeconds: hardTimeout(target, c.hardTimeoutFloor),
      nice: c.nice,
      idleIo: c.idleIo,
    };
    const now = this.o.now();
    this.inFlight.set(chunkId, { chunkId, lane: laneName, laneId: lane.laneId, seedFrom, seedTo, worker, logPath, scratchDir, startedMs: now, lastBeatMs: now });
    this.whenCommitted(() => this.o.events.chunkStarted(assignment, worker, remaining));
    return { kind: "chunk", assignment };
  }

  /** Books the outcome of a chunk. Idempotent on chunk id. */
  finish(worker: WorkerView, chunkId: number, report: ChunkReport): FinishResult {
    const flight = this.inFlight.get(chunkId);
    const row = this.store.chunk(chunkId);
    // A worker may only report chunks it was given: a done for someone else's chunk is ignored.
    if (!row || row.session_id !== this.o.sessionId || row.worker_id !== worker.workerId) return { note: "unknown chunk", seeds: 0 };
    if (row.status === "complete") {
      this.inFlight.delete(chunkId);
      return { note: "already recorded", seeds: 0 };
    }
    const lane = this.lanesById.get(row.lane_id);
    const { scratchDir, logPath } = flight ?? chunkPaths(this.o.outDir, chunkId);
    const info: InFlight = flight ?? {
      chunkId,
      lane: lane?.config.name ?? "?",
      laneId: row.lane_id,
      seedFrom: row.seed_from,
      seedTo: row.seed_to,
      worker,
      logPath,
      scratchDir,
      startedMs: this.o.now(),
      lastBeatMs: this.o.now(),
    };
    this.inFlight.delete(chunkId);
    this.counts.chunkSeconds += report.seconds;
    if (!lane) {
      this.store.endChunk(chunkId, "aborted:lane-gone", report.seconds);
      this.whenCommitted(() => discardChunkFiles(this.o.outDir, { scratchDir, logPath }, true));
      return { note: "lane no longer active", seeds: 0 };
    }
    const ok = report.outcome === "complete" && (report.exitCode === 0 || report.exitCode === 1);
    if (!ok) {
      this.abort(lane, info, worker, report, row.status === "reissued");
      return { note: "aborted", seeds: 0 };
    }
    if (!this.record(lane, info, worker, report.exitCode!, report.seconds, row.status === "reissued")) return { note: "aborted", seeds: 0 };
    return { note: "recorded", seeds: info.seedTo - info.seedFrom + 1 };
  }

  /** Takes a chunk back from whoever held it (lease expired, worker gone, drain grace over). */
  reissue(chunkId: number, why: string): void {
    const flight = this.inFlight.get(chunkId);
    if (!flight) return;
    this.inFlight.delete(chunkId);
    const row = this.store.chunk(chunkId);
    if (!row || row.status === "complete") return;
    this.store.endChunk(chunkId, "reissued", null);
    this.lanes.get(flight.lane)?.state.requeue(flight.seedFrom, flight.seedTo);
    this.whenCommitted(() => this.o.events.chunkReissued(flight, why));
  }

  /**
   * Books a chunk that ran to completion: its results, its coverage, its rate. Returns false when
   * its results could not be read safely (ingest refused them): the chunk is then aborted
   * instead, since booking it complete would cover seeds whose failures were never recorded.
   */
  private record(lane: EngineLane, f: InFlight, worker: WorkerView, exitCode: number, seconds: number, alreadyQueued: boolean): boolean {
    const n = f.seedTo - f.seedFrom + 1;
    const results = resultsDir(this.o.config, f.scratchDir);
    const missing = resultsMissing(f.scratchDir, results);
    if (missing !== null) {
      this.breakChunk(lane, f, worker, seconds, missing, 0, alreadyQueued);
      return false;
    }
    let booked!: Booked;
    try {
      // A savepoint inside the caller's transaction: a broken run's rows are taken back alone.
      this.store.transaction(() => {
        booked = this.book(lane, f, n, results, seconds, exitCode);
        if (booked.breach !== null) throw TAKE_BACK;
      });
    } catch (err) {
      if (err !== TAKE_BACK) throw err;
    }
    const { ingest, breach, clean, fresh } = booked;
    if (breach !== null) {
      this.breakChunk(lane, f, worker, seconds, breach, ingest.malformed.length, alreadyQueued);
      return false;
    }
    if (ingest.refused !== null) {
      this.refuseResults(lane, f, worker, seconds, ingest, alreadyQueued);
      return false;
    }
    this.touch(worker);
    const rate = updateRate(worker.rates.get(f.lane) ?? null, n, seconds);
    worker.rates.set(f.lane, rate);
    if (worker.workerId !== null) this.store.saveWorkerRate(worker.workerId, lane.laneId, rate);
    worker.lastCount.set(f.lane, n);
    worker.strikes.set(f.lane, 0);
    worker.broken.set(f.lane, 0);
    this.counts.chunks++;
    this.counts.seedsSwept += fresh;
    this.counts.finds += ingest.finds;
    this.counts.newFailures += ingest.newFailures;
    this.counts.newDistinct += ingest.newDistinct;
    this.counts.newPending += ingest.newFailures - ingest.newDistinct;
    this.counts.newSignatures += ingest.newSignatures;
    this.counts.reopened += ingest.reopened;
    this.counts.unshrunk += ingest.unshrunk;
    this.counts.quarantine += ingest.quarantine;
    this.counts.malformed += ingest.malformed.length;
    const exhausted = lane.state.exhausted();
    this.whenCommitted(() => {
      discardChunkFiles(this.o.outDir, f, false);
      this.o.events.chunkRecorded(f, worker, ingest, seconds, n / Math.max(seconds, 0.001), clean);
      if (exhausted && f.seedTo === LAST_SEED) this.o.events.laneExhausted?.(f.lane, LAST_SEED);
    });
    return true;
  }

  /**
   * The store side of booking a run that exited 0 or 1: ingest its results, check them against
   * the contract, and when they keep it mark the chunk complete and move the cursor. A breach
   * changes no memory; the caller takes its rows back (TAKE_BACK).
   */
  private book(lane: EngineLane, f: InFlight, n: number, results: string, seconds: number, exitCode: number): Booked {
    const ingest = ingestChunk(this.store, {
      generationId: this.o.generationId,
      genHash: this.o.genHash,
      laneId: lane.laneId,
      chunkId: f.chunkId,
      seedFrom: f.seedFrom,
      seedTo: f.seedTo,
      resultsDir: results,
      outDir: this.o.outDir,
      appBuild: this.o.appBuild,
    });
    if (ingest.refused !== null) return { ingest, breach: null, clean: 0, fresh: 0 };
    const breach = contractBreach({ exitCode, seeds: n, finds: ingest.finds, quarantine: ingest.quarantine, malformed: ingest.malformed.length });
    if (breach !== null) return { ingest, breach, clean: 0, fresh: 0 };
    const clean = Math.max(0, n - ingest.finds - ingest.quarantine - ingest.malformed.length);
    this.store.completeChunk(f.chunkId, seconds, {
      clean,
      finds: ingest.finds,
      quarantine: ingest.quarantine,
      unshrunk: ingest.unshrunk,
    });
    const fresh = lane.state.complete(f.seedFrom, f.seedTo);
    lane.rate = updateRate(lane.rate, n, seconds);
    this.store.saveLaneProgress(lane.laneId, lane.state.cursor, lane.rate);
    return { ingest, breach: null, clean, fresh };
  }

  /**
   * A run that exited 0 or 1 but broke the generator contract: nothing of it is booked, its range
   * is swept again, its log is kept and its last meaningful line shown; BROKEN_IN_A_ROW such
   * chunks in a row disable the lane for this executor.
   */
  private breakChunk(lane: EngineLane, f: InFlight, worker: WorkerView, seconds: number, breach: string, malformed: number, alreadyQueued: boolean): void {
    this.store.endChunk(f.chunkId, "aborted:broken", seconds);
    if (!alreadyQueued) lane.state.requeue(f.seedFrom, f.seedTo);
    this.counts.chunks++;
    this.counts.malformed += malformed;
    this.touch(worker);
    const inRow = (worker.broken.get(f.lane) ?? 0) + 1;
    worker.broken.set(f.lane, inRow);
    if (inRow >= BROKEN_IN_A_ROW) worker.disabled.add(f.lane);
    this.whenCommitted(() => {
      const tail = outputTail(this.o.outDir, f.logPath);
      const said = tail === null ? "" : `; its last output: ${tail}`;
      discardChunkFiles(this.o.outDir, f, true);
      this.o.events.chunkAborted(f, worker, `broken: ${breach}${said}`, seconds, true);
      if (inRow >= BROKEN_IN_A_ROW) {
        this.o.events.laneDisabled(f.lane, worker, `${inRow} chunks in a row broke the generator contract (${breach}${said}); nothing of them was counted — fix the generator command and run again`);
      }
    });
  }

  /** A chunk whose results were refused (a symlink where a directory belongs): aborted, swept again, the lane disabled for this executor. */
  private refuseResults(lane: EngineLane, f: InFlight, worker: WorkerView, seconds: number, ingest: IngestResult, alreadyQueued: boolean): void {
    const reason = ingest.refused!;
    this.store.endChunk(f.chunkId, "aborted:results refused", seconds);
    if (!alreadyQueued) lane.state.requeue(f.seedFrom, f.seedTo);
    this.counts.chunks++;
    this.counts.malformed += ingest.malformed.length;
    this.touch(worker);
    worker.disabled.add(f.lane);
    this.whenCommitted(() => {
      discardChunkFiles(this.o.outDir, f, true);
      this.o.events.chunkAborted(f, worker, `results refused: ${reason}`, seconds, true);
      this.o.events.laneDisabled(f.lane, worker, `the chunk's results could not be read: ${reason}`);
    });
  }

  private abort(lane: EngineLane, f: InFlight, worker: WorkerView, r: ChunkReport, alreadyQueued: boolean): void {
    const { why, status, generatorDid } = abortWording(r);
    this.store.endChunk(f.chunkId, status, r.seconds);
    if (!alreadyQueued) lane.state.requeue(f.seedFrom, f.seedTo);
    this.counts.chunks++;
    const keepLog = r.outcome !== "interrupted";
    this.whenCommitted(() => {
      discardChunkFiles(this.o.outDir, f, keepLog);
      this.o.events.chunkAborted(f, worker, why, r.seconds, keepLog);
    });

    this.touch(worker);
    if (r.outcome === "timeout") {
      const n = f.seedTo - f.seedFrom + 1;
      const halved = halveRate(worker.rates.get(f.lane) ?? null, n, r.seconds);
      worker.rates.set(f.lane, halved);
      if (this.o.transport === "local") {
        lane.rate = halved;
        this.store.saveLaneRate(lane.laneId, halved);
      }
      const strikes = (worker.strikes.get(f.lane) ?? 0) + 1;
      worker.strikes.set(f.lane, strikes);
      if (strikes >= 2) {
        worker.disabled.add(f.lane);
        this.whenCommitted(() =>
          this.o.events.laneDisabled(
            f.lane,
            worker,
            `two consecutive chunks timed out (the last started at seed ${f.seedFrom}); investigate that seed by hand`,
          ),
        );
      }
    } else if (r.outcome === "complete" || r.outcome === "error") {
      worker.disabled.add(f.lane);
      this.whenCommitted(() => this.o.events.laneDisabled(f.lane, worker, `the generator ${generatorDid}; see ${f.logPath}`));
    }
  }

  /** Empties the scratch directory of a chunk about to run, never following a symlink below <out>. */
  clearScratch(a: Assignment): void {
    removeBelow(this.o.outDir, relative(this.o.outDir, a.scratchDir));
  }

  /** Chunks `worker` holds right now. */
  heldBy(worker: WorkerView): InFlight[] {
    return [...this.inFlight.values()].filter((f) => f.worker === worker);
  }

  /** Marks the chunk's lease as alive. Returns whether `worker` still holds it. */
  heartbeat(worker: WorkerView, chunkId: number): boolean {
    const f = this.inFlight.get(chunkId);
    if (!f || f.worker !== worker) return false;
    f.lastBeatMs = this.o.now();
    return true;
  }

  /** Chunks whose holder has not sent a heartbeat for `leaseSeconds`. */
  expiredLeases(leaseSeconds: number): InFlight[] {
    const limit = this.o.now() - leaseSeconds * 1000;
    return [...this.inFlight.values()].filter((f) => f.lastBeatMs < limit);
  }
}
