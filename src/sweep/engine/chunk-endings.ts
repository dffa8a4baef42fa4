// How a chunk that ran ends, booked: SweepEngine.finish decides which way a report goes, and this
// books it — in the store (inside the open CommitQueue transaction) and in the engine's memory.
//
//   exit 0 or 1, contract kept     -> recorded: results ingested, chunk complete, cursor to the
//                                     low-water mark, rate measured
//   exit 0 or 1, contract broken   -> aborted:broken: nothing of it booked (its rows taken back),
//                                     range swept again; BROKEN_IN_A_ROW in a row disable the lane
//   exit 0 or 1, results refused   -> aborted:results refused (a symlink where a directory
//                                     belongs): range swept again, the lane disabled at once
//   killed at the session's end    -> aborted:session ended: range swept again, nothing else (the
//   (+ the drain grace)               budget cut it short, as Ctrl-C does)
//   anything else                  -> aborted:<why>: range swept again; two timeouts in a row, an
//                                     unexpected exit or a run that could not start disable the
//                                     lane (for the executor: the session locally, the worker
//                                     remotely)
//
// A chunk already reissued has its range queued again: its late ending requeues nothing. What
// must wait for the commit (removing the chunk's files, the console's line) goes to whenCommitted.
import { halveRate, updateRate } from "../../core/schedule.ts";
import { LAST_SEED } from "../../core/ranges.ts";
import { resultsDir } from "../generator/command.ts";
import { contractBreach, outputTail, resultsMissing } from "../generator/contract.ts";
import { ingestChunk, type IngestResult } from "../generator/ingest.ts";
import { discardChunkFiles } from "./chunk-files.ts";
import type { EngineBooks } from "./engine-memory.ts";
import { abortWording, type ChunkReport, type EngineLane, type EngineOptions, type InFlight, type WorkerView } from "./sweep-types.ts";

/** Broken chunks in a row that disable a lane for an executor (a typo fails every chunk; a flaky run may fail one). */
export const BROKEN_IN_A_ROW = 3;

/** Thrown inside ingest's savepoint to take back what a broken run's results recorded. */
const TAKE_BACK = Symbol("broken chunk");

/** What booking a run's results came to (see ChunkEndings.book). */
interface Booked {
  ingest: IngestResult;
  /** Why the run broke the generator contract, or null. */
  breach: string | null;
  clean: number;
  fresh: number;
}

export class ChunkEndings {
  constructor(
    private readonly o: EngineOptions,
    private readonly engine: EngineBooks,
  ) {}

  /**
   * Books a chunk that ran to completion: its results, its coverage, its rate. Returns false when
   * it was aborted instead: its results could not be read safely, or broke the generator contract
   * (booking it complete would cover seeds whose failures were never recorded).
   */
  record(lane: EngineLane, f: InFlight, worker: WorkerView, exitCode: number, seconds: number, alreadyQueued: boolean): boolean {
    const n = f.seedTo - f.seedFrom + 1;
    const results = resultsDir(this.o.config, f.scratchDir);
    const missing = resultsMissing(f.scratchDir, results);
    if (missing !== null) {
      this.broken(lane, f, worker, seconds, missing, 0, alreadyQueued);
      return false;
    }
    let booked!: Booked;
    try {
      // A savepoint inside the caller's transaction: a broken run's rows are taken back alone.
      this.o.store.transaction(() => {
        booked = this.book(lane, f, n, results, seconds, exitCode);
        if (booked.breach !== null) throw TAKE_BACK;
      });
    } catch (err) {
      if (err !== TAKE_BACK) throw err;
    }
    const { ingest, breach, clean, fresh } = booked;
    if (breach !== null) {
      this.broken(lane, f, worker, seconds, breach, ingest.malformed.length, alreadyQueued);
      return false;
    }
    if (ingest.refused !== null) {
      this.refused(lane, f, worker, seconds, ingest, alreadyQueued);
      return false;
    }
    this.engine.touch(worker);
    const rate = updateRate(worker.rates.get(f.lane) ?? null, n, seconds);
    worker.rates.set(f.lane, rate);
    if (worker.workerId !== null) this.o.store.saveWorkerRate(worker.workerId, lane.laneId, rate);
    worker.lastCount.set(f.lane, n);
    worker.strikes.set(f.lane, 0);
    worker.broken.set(f.lane, 0);
    const counts = this.engine.counts;
    counts.chunks++;
    counts.seedsSwept += fresh;
    counts.finds += ingest.finds;
    counts.newFailures += ingest.newFailures;
    counts.newDistinct += ingest.newDistinct;
    counts.newPending += ingest.newFailures - ingest.newDistinct;
    counts.newSignatures += ingest.newSignatures;
    counts.reopened += ingest.reopened;
    counts.unshrunk += ingest.unshrunk;
    counts.quarantine += ingest.quarantine;
    counts.malformed += ingest.malformed.length;
    const exhausted = lane.state.exhausted();
    this.engine.whenCommitted(() => {
      discardChunkFiles(this.o.outDir, f, false);
      this.o.events.chunkRecorded(f, worker, ingest, seconds, n / Math.max(seconds, 0.001), clean);
      if (exhausted && f.seedTo === LAST_SEED) this.o.events.laneExhausted?.(f.lane, LAST_SEED);
    });
    return true;
  }

  /** A run that did not exit 0 or 1 (or did not complete): aborted, swept again, and maybe the lane disabled. */
  aborted(lane: EngineLane, f: InFlight, worker: WorkerView, r: ChunkReport, alreadyQueued: boolean): void {
    // Killed at the session's end plus the drain grace, before its own timeout: the budget cut it,
    // like Ctrl-C; nothing was learnt of the generator (no strike, the rate kept).
    const sessionEnded = r.outcome === "timeout" && f.cutBySessionEnd;
    const { why, status, generatorDid } = sessionEnded ? { why: "session ended", status: "aborted:session ended", generatorDid: "" } : abortWording(r);
    this.o.store.endChunk(f.chunkId, status, r.seconds);
    if (!alreadyQueued) lane.state.requeue(f.seedFrom, f.seedTo);
    this.engine.counts.chunks++;
    const keepLog = r.outcome !== "interrupted" && !sessionEnded;
    this.engine.whenCommitted(() => {
      discardChunkFiles(this.o.outDir, f, keepLog);
      this.o.events.chunkAborted(f, worker, why, r.seconds, keepLog);
    });
    if (sessionEnded) return;

    this.engine.touch(worker);
    if (r.outcome === "timeout") {
      const n = f.seedTo - f.seedFrom + 1;
      const halved = halveRate(worker.rates.get(f.lane) ?? null, n, r.seconds);
      worker.rates.set(f.lane, halved);
      if (this.o.transport === "local") {
        lane.rate = halved;
        this.o.store.saveLaneRate(lane.laneId, halved);
      }
      const strikes = (worker.strikes.get(f.lane) ?? 0) + 1;
      worker.strikes.set(f.lane, strikes);
      if (strikes >= 2) {
        worker.disabled.add(f.lane);
        this.engine.whenCommitted(() =>
          this.o.events.laneDisabled(
            f.lane,
            worker,
            `two consecutive chunks timed out (the last started at seed ${f.seedFrom}); investigate that seed by hand`,
          ),
        );
      }
    } else if (r.outcome === "complete" || r.outcome === "error") {
      worker.disabled.add(f.lane);
      this.engine.whenCommitted(() => this.o.events.laneDisabled(f.lane, worker, `the generator ${generatorDid}; see ${f.logPath}`));
    }
  }

  /**
   * The store side of booking a run that exited 0 or 1: ingest its results, check them against
   * the contract, and when they keep it mark the chunk complete and move the cursor. A breach
   * changes no memory; the caller takes its rows back (TAKE_BACK).
   */
  private book(lane: EngineLane, f: InFlight, n: number, results: string, seconds: number, exitCode: number): Booked {
    const ingest = ingestChunk(this.o.store, {
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
    this.o.store.completeChunk(f.chunkId, seconds, {
      clean,
      finds: ingest.finds,
      quarantine: ingest.quarantine,
      unshrunk: ingest.unshrunk,
    });
    const fresh = lane.state.complete(f.seedFrom, f.seedTo);
    lane.rate = updateRate(lane.rate, n, seconds);
    this.o.store.saveLaneProgress(lane.laneId, lane.state.cursor, lane.rate);
    return { ingest, breach: null, clean, fresh };
  }

  /**
   * A run that exited 0 or 1 but broke the generator contract: nothing of it is booked, its range
   * is swept again, its log is kept and its last meaningful line shown; BROKEN_IN_A_ROW such
   * chunks in a row disable the lane for this executor.
   */
  private broken(lane: EngineLane, f: InFlight, worker: WorkerView, seconds: number, breach: string, malformed: number, alreadyQueued: boolean): void {
    this.o.store.endChunk(f.chunkId, "aborted:broken", seconds);
    if (!alreadyQueued) lane.state.requeue(f.seedFrom, f.seedTo);
    this.engine.counts.chunks++;
    this.engine.counts.malformed += malformed;
    this.engine.touch(worker);
    const inRow = (worker.broken.get(f.lane) ?? 0) + 1;
    worker.broken.set(f.lane, inRow);
    if (inRow >= BROKEN_IN_A_ROW) worker.disabled.add(f.lane);
    this.engine.whenCommitted(() => {
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
  private refused(lane: EngineLane, f: InFlight, worker: WorkerView, seconds: number, ingest: IngestResult, alreadyQueued: boolean): void {
    const reason = ingest.refused!;
    this.o.store.endChunk(f.chunkId, "aborted:results refused", seconds);
    if (!alreadyQueued) lane.state.requeue(f.seedFrom, f.seedTo);
    this.engine.counts.chunks++;
    this.engine.counts.malformed += ingest.malformed.length;
    this.engine.touch(worker);
    worker.disabled.add(f.lane);
    this.engine.whenCommitted(() => {
      discardChunkFiles(this.o.outDir, f, true);
      this.o.events.chunkAborted(f, worker, `results refused: ${reason}`, seconds, true);
      this.o.events.laneDisabled(f.lane, worker, `the chunk's results could not be read: ${reason}`);
    });
  }
}
