// SweepEngine: the one scheduler of sweep campaigns. It decides which lane and range a worker
// runs next, records every chunk in the store, and books the outcome. It does not run anything:
// an executor (the local slots in-process, or remote workers over TCP) asks it for work with
// `assign` and reports back with `finish`. Lane picking, chunk sizing, deadlines, ingest and
// session bookkeeping therefore exist once, whatever the transport.
//
// Chunk life: assign -> (running | leased) -> finish -> complete | aborted:<why> | aborted:broken
//                                          -> reissue -> reissued (range queued again; a late
//                                             successful finish still counts, once)
// Coverage only moves through LaneState.complete, i.e. to the low-water mark, and only for a run
// that kept the generator contract (sweep/generator/contract.ts); how each ending of a chunk is booked
// is chunk-endings.ts. A lane whose seeds run out at the last exact seed (core/ranges.ts) is
// exhausted: it gets no more chunks, and a session whose every lane is exhausted drains. Who
// holds which chunk, and whether their lease is alive, is leases.ts.
//
// The engine is the in-memory half of the books; its store writes run inside a CommitQueue
// transaction, and it implements Books so that a transaction the store refused puts its memory
// back (checkpoint / rollback). What must not happen before the commit — removing a chunk's files,
// printing its line — waits in `afterCommit` until the queue reports the commit.
//
// Minimize units, the second kind of unit, are `engine.minimize` (minimize-units.ts).
import assert from "node:assert/strict";
import { relative } from "node:path";
import { removeBelow } from "../../files/pinned-dir.ts";
import type { LaneConfig } from "../../config/schema.ts";
import { chunkKillTime, chunkTarget, deadlineFloor, hardTimeout, pickLane, sizeChunk } from "../../core/schedule.ts";
import type { SweepStore } from "../../store/port.ts";
import { chunkCommand } from "../generator/command.ts";
import type { Books } from "./commit-queue.ts";
import { ChunkEndings } from "./chunk-endings.ts";
import { chunkPaths, discardChunkFiles } from "./chunk-files.ts";
import { rememberWorker, restoreWorker, type EngineBooks, type EngineMark } from "./engine-memory.ts";
import { Leases } from "./leases.ts";
import { MinimizeUnits } from "./minimize-units.ts";
import {
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
  /** The chunks executors hold. */
  private readonly inFlight: Leases<InFlight>;
  private drainReason: DrainReason | null = null;
  /** The open checkpoint, while a CommitQueue transaction runs. */
  private mark: EngineMark | null = null;
  private afterCommit: (() => void)[] = [];
  /** The second kind of unit: finds pending minimization (minimize-units.ts). */
  readonly minimize: MinimizeUnits;
  /** How a chunk that ran ends, booked (chunk-endings.ts). */
  private readonly endings: ChunkEndings;

  /** The books this engine keeps in memory are the ones this store holds. */
  readonly store: SweepStore;

  constructor(private readonly o: EngineOptions) {
    this.store = o.store;
    this.inFlight = new Leases(o.now);
    for (const lane of o.lanes) {
      this.lanes.set(lane.config.name, lane);
      this.lanesById.set(lane.laneId, lane);
    }
    const engine = this;
    const books: EngineBooks = {
      get counts() {
        return engine.counts;
      },
      whenCommitted: (action) => this.whenCommitted(action),
      touch: (worker) => this.touch(worker),
    };
    this.endings = new ChunkEndings(o, books);
    this.minimize = new MinimizeUnits(o, this.lanesById, {
      get counts() {
        return engine.counts;
      },
      whenCommitted: books.whenCommitted,
      touch: books.touch,
      get draining() {
        return engine.drainReason;
      },
      get floorSeconds() {
        return engine.floorSeconds;
      },
      remainingSeconds: () => this.remainingSeconds(),
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
      inFlight: this.inFlight.snapshot(),
      minimizing: this.minimize.inFlight.snapshot(),
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
    this.inFlight.restore(mark.inFlight);
    this.minimize.inFlight.restore(mark.minimizing);
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
    // Killed no later than the drain grace after the session's end: the budget holds (chunkKillTime).
    const kill = chunkKillTime(hardTimeout(target, c.hardTimeoutFloor), remaining, this.o.config.distributed.drainGraceMinutes * 60);
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
      hardTimeoutSeconds: kill.seconds,
      nice: c.nice,
      idleIo: c.idleIo,
    };
    const now = this.o.now();
    this.inFlight.hold(chunkId, { chunkId, lane: laneName, laneId: lane.laneId, seedFrom, seedTo, worker, logPath, scratchDir, startedMs: now, cutBySessionEnd: kill.cutBySessionEnd, lastBeatMs: now });
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
      this.inFlight.release(chunkId);
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
      cutBySessionEnd: false,
      lastBeatMs: this.o.now(),
    };
    this.inFlight.release(chunkId);
    this.counts.chunkSeconds += report.seconds;
    if (!lane) {
      this.store.endChunk(chunkId, "aborted:lane-gone", report.seconds);
      this.whenCommitted(() => discardChunkFiles(this.o.outDir, { scratchDir, logPath }, true));
      return { note: "lane no longer active", seeds: 0 };
    }
    const ok = report.outcome === "complete" && (report.exitCode === 0 || report.exitCode === 1);
    if (!ok) {
      this.endings.aborted(lane, info, worker, report, row.status === "reissued");
      return { note: "aborted", seeds: 0 };
    }
    if (!this.endings.record(lane, info, worker, report.exitCode!, report.seconds, row.status === "reissued")) return { note: "aborted", seeds: 0 };
    return { note: "recorded", seeds: info.seedTo - info.seedFrom + 1 };
  }

  /** Takes a chunk back from whoever held it (lease expired, worker gone, drain grace over). */
  reissue(chunkId: number, why: string): void {
    const flight = this.inFlight.release(chunkId);
    if (!flight) return;
    const row = this.store.chunk(chunkId);
    if (!row || row.status === "complete") return;
    this.store.endChunk(chunkId, "reissued", null);
    this.lanes.get(flight.lane)?.state.requeue(flight.seedFrom, flight.seedTo);
    this.whenCommitted(() => this.o.events.chunkReissued(flight, why));
  }

  /** Empties the scratch directory of a chunk about to run, never following a symlink below <out>. */
  clearScratch(a: Assignment): void {
    removeBelow(this.o.outDir, relative(this.o.outDir, a.scratchDir));
  }

  /** Chunks `worker` holds right now. */
  heldBy(worker: WorkerView): InFlight[] {
    return this.inFlight.heldBy(worker);
  }

  /** Marks the chunk's lease as alive. Returns whether `worker` still holds it. */
  heartbeat(worker: WorkerView, chunkId: number): boolean {
    return this.inFlight.heartbeat(worker, chunkId);
  }

  /** Chunks whose holder has not sent a heartbeat for `leaseSeconds`. */
  expiredLeases(leaseSeconds: number): InFlight[] {
    return this.inFlight.expired(leaseSeconds);
  }
}
