// The sweep store port (../port.ts) over one SQLite connection: each operation is one of the
// named statement functions of ../*.ts, so the SQL stays beside its table. The statement modules
// move into this folder once nothing outside store/ imports them any more.
import { atomically, setBusyTimeout, type Db } from "../db.ts";
import type { SweepStore } from "../port.ts";
import type { QuarantineReason } from "../records.ts";
import * as chunks from "../chunks.ts";
import * as views from "../dashboard-queries.ts";
import * as failures from "../failures.ts";
import * as generations from "../generations.ts";
import * as lanes from "../lanes.ts";
import * as minimize from "../minimize.ts";
import * as quarantine from "../quarantine.ts";
import * as sessions from "../sessions.ts";
import * as history from "../history.ts";
import * as buildRanges from "../build-ranges.ts";
import * as tallies from "../tallies.ts";
import * as workers from "../workers.ts";
import { sqliteRefusal } from "./refusal.ts";

export class SqliteSweepStore implements SweepStore {
  /**
   * `owned`: close() closes the connection (a store this module opened); otherwise the caller
   * that opened the connection closes it.
   */
  constructor(
    readonly db: Db,
    private readonly owned: boolean,
  ) {}

  close(): void {
    if (this.owned) this.db.close();
  }

  // Units of work. better-sqlite3's transaction() nests as a savepoint inside an open transaction.
  atomically<T>(fn: () => T): T {
    return atomically(this.db, fn);
  }
  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn)();
  }
  get inTransaction(): boolean {
    return this.db.inTransaction;
  }
  setLockWait(ms: number): void {
    setBusyTimeout(this.db, ms);
  }
  refusalOf(err: unknown) {
    return sqliteRefusal(err);
  }

  // Generations.
  currentGeneration() {
    return generations.currentGeneration(this.db);
  }
  startGeneration(previousId: number | null, genHash: string, note: string) {
    return generations.startGeneration(this.db, previousId, genHash, note);
  }
  seedsSwept(generationId: number) {
    return lanes.generationSeedsCovered(this.db, generationId);
  }

  // Lanes.
  activeLane(generationId: number, name: string) {
    return lanes.activeLane(this.db, generationId, name);
  }
  activeLanes(generationId: number) {
    return lanes.activeLanes(this.db, generationId);
  }
  restartLane(previousId: number | null, generationId: number, name: string, paramsJson: string, baseSeed: number) {
    return lanes.restartLane(this.db, previousId, generationId, name, paramsJson, baseSeed);
  }
  saveCursor(laneId: number, cursor: number) {
    lanes.saveCursor(this.db, laneId, cursor);
  }
  saveLaneProgress(laneId: number, cursor: number, seedsPerSec: number | null) {
    lanes.saveLaneProgress(this.db, laneId, cursor, seedsPerSec);
  }
  saveLaneRate(laneId: number, seedsPerSec: number | null) {
    lanes.saveLaneRate(this.db, laneId, seedsPerSec);
  }
  laneChunks(laneId: number) {
    return lanes.laneChunkRows(this.db, laneId);
  }
  lastCompleteCount(laneId: number) {
    return lanes.lastCompleteCount(this.db, laneId);
  }
  doneAheadOfCursor(laneId: number, cursor: number) {
    return lanes.doneAheadOfCursor(this.db, laneId, cursor);
  }
  laneSeedsSwept(laneId: number) {
    return lanes.laneSeedsCovered(this.db, laneId);
  }
  repairLaneCursors(limit: number) {
    return lanes.repairLaneCursors(this.db, limit);
  }

  // Chunks.
  bookChunk(c: chunks.NewChunk) {
    return chunks.insertChunk(this.db, c);
  }
  chunk(chunkId: number) {
    return chunks.getChunk(this.db, chunkId);
  }
  completeChunk(chunkId: number, seconds: number, counts: chunks.ChunkCounts) {
    chunks.markChunkComplete(this.db, chunkId, seconds, counts);
  }
  endChunk(chunkId: number, status: string, seconds: number | null) {
    chunks.markChunkEnded(this.db, chunkId, status, seconds);
  }
  chunkHeartbeat(chunkId: number) {
    chunks.touchChunkHeartbeat(this.db, chunkId);
  }
  abortLostChunks() {
    return chunks.abortLostChunks(this.db);
  }
  repairChunkRanges(lastSeed: number) {
    return chunks.repairChunkRanges(this.db, lastSeed);
  }
  sessionChunkIds(sessionId: number) {
    return chunks.sessionChunkIds(this.db, sessionId);
  }
  chunkTotals(generationId: number) {
    return chunks.chunkTotals(this.db, generationId);
  }
  completeTimedChunks(generationId: number) {
    return views.completeTimedChunks(this.db, generationId);
  }
  completeTotals(generationId: number) {
    return views.completeTotals(this.db, generationId);
  }
  findsByLane() {
    return views.findsByLane(this.db);
  }

  // Failures.
  failureByKey(generationId: number, dedupKey: string) {
    return failures.failureByKey(this.db, generationId, dedupKey);
  }
  failureById(id: number) {
    return failures.failureById(this.db, id);
  }
  recordFailure(f: failures.NewFailure) {
    return failures.insertFailure(this.db, f);
  }
  signatureSeen(generationId: number, signature: string) {
    return failures.signatureSeen(this.db, generationId, signature);
  }
  addFailureSeed(failureId: number, seed: number, chunkId: number | null) {
    return failures.addFailureSeed(this.db, failureId, seed, chunkId);
  }
  failureSeeds(failureId: number, limit?: number) {
    return failures.failureSeeds(this.db, failureId, limit);
  }
  failureSeedLanes(failureId: number, limit: number) {
    return failures.failureSeedLanes(this.db, failureId, limit);
  }
  markFailureFixed(failureId: number, appBuild: string | null) {
    failures.markFailureFixed(this.db, failureId, appBuild);
  }
  reopenFailure(failureId: number) {
    failures.reopenFailure(this.db, failureId);
  }
  touchFailure(failureId: number, appBuild?: string | null) {
    failures.touchFailure(this.db, failureId, appBuild);
  }
  listFailures(filter: failures.FailureFilter) {
    return failures.listFailures(this.db, filter);
  }
  failureGroups(generationId: number) {
    return failures.failureGroups(this.db, generationId);
  }
  pendingTotals(filter: failures.FailureFilter) {
    return failures.pendingTotals(this.db, filter);
  }
  pendingGroups(filter: failures.FailureFilter) {
    return failures.pendingGroups(this.db, filter);
  }
  staleFailureCount() {
    return failures.staleFailureCount(this.db);
  }
  openFailureCount(generationId: number) {
    return failures.openFailureCount(this.db, generationId);
  }
  failureFirstSeen(generationId: number) {
    return views.failureFirstSeen(this.db, generationId);
  }

  // Minimization.
  nextPendingFinds(generationId: number, laneIds: readonly number[], limit: number) {
    return minimize.nextPendingFinds(this.db, generationId, laneIds, limit);
  }
  bookMinimizeUnit(u: Parameters<typeof minimize.insertMinimizeUnit>[1]) {
    return minimize.insertMinimizeUnit(this.db, u);
  }
  minimizeUnit(unitId: number) {
    return minimize.getMinimizeUnit(this.db, unitId);
  }
  unitFinds(unitId: number) {
    return minimize.unitFinds(this.db, unitId);
  }
  endMinimizeUnit(unitId: number, status: string, seconds: number | null, counts: { merged: number; newFailures: number; failed: number }) {
    minimize.markUnitEnded(this.db, unitId, status, seconds, counts);
  }
  releaseUnitFinds(unitId: number) {
    return minimize.releaseUnitFinds(this.db, unitId);
  }
  releaseLostUnits() {
    return minimize.releaseLostUnits(this.db);
  }
  markFindFailed(findId: number, note: string) {
    minimize.markFindFailed(this.db, findId, note);
  }
  mergeFind(findId: number, targetId: number) {
    return minimize.mergeFind(this.db, findId, targetId);
  }
  promoteFind(findId: number) {
    minimize.promoteFind(this.db, findId);
  }
  sessionUnitIds(sessionId: number) {
    return minimize.sessionUnitIds(this.db, sessionId);
  }
  minimizeProgress(generationId: number) {
    return minimize.minimizeProgress(this.db, generationId);
  }

  // Quarantine.
  saveQuarantineReasons(chunkId: number, reasons: readonly QuarantineReason[]) {
    quarantine.saveQuarantineReasons(this.db, chunkId, reasons);
  }
  quarantineGroups(generationId: number) {
    return quarantine.quarantineGroups(this.db, generationId);
  }
  sessionQuarantineGroups(sessionId: number) {
    return quarantine.sessionQuarantineGroups(this.db, sessionId);
  }

  // Sessions and workers.
  startSession(s: sessions.NewSession) {
    return sessions.insertSession(this.db, s);
  }
  endSession(sessionId: number, status: sessions.SessionEnd) {
    sessions.endSession(this.db, sessionId, status);
  }
  markCrashedSessions() {
    return sessions.markCrashedSessions(this.db);
  }
  setSessionPort(sessionId: number, port: number) {
    sessions.setSessionPort(this.db, sessionId, port);
  }
  recentSessions(limit: number) {
    return sessions.recentSessions(this.db, limit);
  }
  joinWorker(w: workers.NewWorker) {
    return workers.insertWorker(this.db, w);
  }
  workerGone(workerId: number) {
    workers.markWorkerGone(this.db, workerId);
  }
  workerSeen(workerId: number) {
    workers.touchWorker(this.db, workerId);
  }
  saveWorkerRate(workerId: number, laneId: number, seedsPerSec: number) {
    workers.upsertWorkerRate(this.db, workerId, laneId, seedsPerSec);
  }
  earlierRates(host: string, jobs: number, beforeWorkerId: number) {
    return workers.earlierRates(this.db, host, jobs, beforeWorkerId);
  }
  sessionWorkers(sessionId: number) {
    return views.sessionWorkers(this.db, sessionId);
  }

  // Views: the aggregates (../tallies.ts, ../history.ts).
  laneTallies(generationId: number) {
    return tallies.laneTallies(this.db, generationId);
  }
  laneBuilds(lane: { id: number; base_seed: number; cursor: number }, currentBuild: string | null, shown: number) {
    return buildRanges.laneBuilds(this.db, lane, currentBuild, shown);
  }
  sweepHistory(generationId: number) {
    return history.readHistory(this.db, generationId);
  }
  incidenceCounts(generationId: number) {
    return tallies.incidenceCounts(this.db, generationId);
  }
  failurePage(filter: failures.FailureFilter, limit: number, offset: number) {
    return failures.listFailures(this.db, filter, { limit, offset });
  }
  countFailures(filter: failures.FailureFilter) {
    return failures.countFailures(this.db, filter);
  }
}
