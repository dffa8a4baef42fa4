// Minimize units, the engine's second kind of unit: hands finds pending minimization to an
// executor with spare room and books what the minimizer wrote, through the same validated ingest
// as a chunk (src/generator/minimize.ts). A unit never holds up the sweep: it is offered only
// while at least the deadline floor remains, its hard timeout ends before the deadline, and the
// executor interrupts it when the sweep ends (its finds then wait for a later unit). Each find is
// booked once: minimized (merged into a distinct failure) or, when the minimizer failed on it,
// 'failed'; a unit that never reported gives its finds back (releaseLostUnits at the next start).
import { join, relative } from "node:path";
import { removeBelow } from "../files/pinned-dir.ts";
import { laneArgs, minimizeCommand } from "../generator/command.ts";
import { ingestMinimized } from "../generator/minimize.ts";
import { getMinimizeUnit, insertMinimizeUnit, markFindFailed, markUnitEnded, nextPendingFinds, releaseUnitFinds, unitFinds } from "../store/minimize.ts";
import { laneIdentity } from "../config/schema.ts";
import { abortWording, type ChunkReport, type EngineLane, type EngineOptions, type MinimizeAssignment, type MinimizeInFlight, type SessionCounts, type WorkerView } from "./sweep-types.ts";

export class MinimizeUnits {
  inFlight = new Map<number, MinimizeInFlight>();

  constructor(
    private readonly o: EngineOptions,
    private readonly lanesById: ReadonlyMap<number, EngineLane>,
  ) {}

  /** The share of slots for minimization, or null when `[generator] minimize` is not configured. */
  get share(): number | null {
    return this.o.config.minimize?.share ?? null;
  }

  /** {jobs} for a unit on the single host: its share of the host's jobs (all of them when it only runs idle). */
  localJobs(): number {
    const m = this.o.config.minimize;
    const jobs = this.o.config.defaults.jobs;
    return m && m.share > 0 ? Math.max(1, Math.round(m.share * jobs)) : jobs;
  }

  /** The next unit for `worker`, or null when there is nothing to minimize (or no time for it). */
  assign(worker: WorkerView, jobs: number, remainingSeconds: number, floorSeconds: number): MinimizeAssignment | null {
    const m = this.o.config.minimize;
    if (!m || remainingSeconds < floorSeconds) return null;
    const lanes = [...this.lanesById.values()].filter((l) => l.config.enabled && !worker.disabled.has(l.config.name));
    const finds = nextPendingFinds(this.o.db, this.o.generationId, lanes.map((l) => l.laneId), m.batch);
    if (finds.length === 0) return null;
    const lane = this.lanesById.get(finds[0]!.lane_id)!;
    const seeds = finds.map((f) => f.first_seed);
    const unitId = insertMinimizeUnit(this.o.db, {
      sessionId: this.o.sessionId,
      laneId: lane.laneId,
      workerId: worker.workerId,
      findIds: finds.map((f) => f.id),
      status: this.o.transport === "local" ? "running" : "leased",
    });
    const tmp = join(this.o.outDir, "tmp");
    const scratchDir = join(tmp, `minimize-${unitId}`);
    const logPath = join(tmp, `minimize-${unitId}.log`);
    const now = this.o.now();
    this.inFlight.set(unitId, { unitId, lane: lane.config.name, laneId: lane.laneId, seeds, worker, scratchDir, logPath, startedMs: now, lastBeatMs: now });
    return {
      unitId,
      lane: lane.config.name,
      laneId: lane.laneId,
      seeds,
      argv: minimizeCommand(m.command, laneArgs(laneIdentity(lane.config)), seeds, scratchDir, jobs),
      cwd: this.o.config.dir,
      scratchDir,
      logPath,
      hardTimeoutSeconds: Math.max(1, Math.min(m.timeoutSeconds, Math.floor(remainingSeconds))),
      nice: this.o.config.defaults.nice,
      idleIo: this.o.config.defaults.idleIo,
    };
  }

  /**
   * Books a unit's outcome; returns what to do once the transaction committed (remove its files,
   * tell the console), or null when the report is not this worker's to make or was booked before.
   */
  finish(worker: WorkerView, unitId: number, report: ChunkReport, counts: SessionCounts): (() => void) | null {
    const row = getMinimizeUnit(this.o.db, unitId);
    if (!row || row.session_id !== this.o.sessionId || row.worker_id !== worker.workerId) return null;
    const flight = this.inFlight.get(unitId);
    this.inFlight.delete(unitId);
    if (row.status !== "running" && row.status !== "leased") return null;
    const tmp = join(this.o.outDir, "tmp");
    const u: MinimizeInFlight = flight ?? {
      unitId,
      lane: this.lanesById.get(row.lane_id)?.config.name ?? "?",
      laneId: row.lane_id,
      seeds: [],
      worker,
      scratchDir: join(tmp, `minimize-${unitId}`),
      logPath: join(tmp, `minimize-${unitId}.log`),
      startedMs: this.o.now(),
      lastBeatMs: this.o.now(),
    };
    const db = this.o.db;
    const ok = report.outcome === "complete" && (report.exitCode === 0 || report.exitCode === 1);
    const finds = unitFinds(db, unitId);
    let outcome = { merged: 0, newFailures: 0, failed: 0, aborted: null as string | null };
    if (ok) {
      const r = ingestMinimized(db, {
        generationId: this.o.generationId,
        genHash: this.o.genHash,
        laneId: row.lane_id,
        unitId,
        finds,
        resultsDir: u.scratchDir,
        outDir: this.o.outDir,
        appBuild: this.o.appBuild,
      });
      markUnitEnded(db, unitId, "complete", report.seconds, { merged: r.merged, newFailures: r.newFailures, failed: r.failed });
      outcome = { merged: r.merged, newFailures: r.newFailures, failed: r.failed, aborted: null };
      counts.minimizeUnits++;
      counts.minimized += finds.length - r.failed;
      counts.minimizeFailed += r.failed;
      counts.minimizeSeconds += report.seconds;
      counts.newFailures += r.newFailures;
      counts.newDistinct += r.newFailures;
      counts.reopened += r.reopened;
      counts.malformed += r.malformed.length;
    } else if (report.outcome === "interrupted") {
      // The sweep ended (or Ctrl-C): nothing was decided about these finds; a later unit takes them.
      markUnitEnded(db, unitId, "aborted:interrupted", report.seconds, { merged: 0, newFailures: 0, failed: 0 });
      releaseUnitFinds(db, unitId);
      outcome.aborted = "interrupted";
    } else {
      // The minimizer itself failed on them: final, so a minimizer that always fails cannot loop.
      const { why, status, generatorDid } = abortWording(report);
      markUnitEnded(db, unitId, status, report.seconds, { merged: 0, newFailures: 0, failed: finds.length });
      for (const f of finds) markFindFailed(db, f.id, `the minimizer ${generatorDid}; see ${u.logPath}`);
      counts.minimizeFailed += finds.length;
      outcome = { merged: 0, newFailures: 0, failed: finds.length, aborted: why };
    }
    const keepLog = !ok && report.outcome !== "interrupted";
    return () => {
      setImmediate(() => {
        for (const path of keepLog ? [u.scratchDir] : [u.scratchDir, u.logPath]) {
          try {
            removeBelow(this.o.outDir, relative(this.o.outDir, path));
          } catch {
            // Left for the next start's clean-up.
          }
        }
      });
      this.o.events.minimizeRecorded?.(u, outcome, report.seconds);
    };
  }

  /** Takes a unit back from a worker that is gone: its finds wait for another unit. */
  reissue(unitId: number): void {
    if (!this.inFlight.delete(unitId)) return;
    const row = getMinimizeUnit(this.o.db, unitId);
    if (!row || (row.status !== "running" && row.status !== "leased")) return;
    markUnitEnded(this.o.db, unitId, "reissued", null, { merged: 0, newFailures: 0, failed: 0 });
    releaseUnitFinds(this.o.db, unitId);
  }

  /** Empties a unit's scratch directory before it runs, never following a symlink below <out>. */
  clearScratch(a: MinimizeAssignment): void {
    removeBelow(this.o.outDir, relative(this.o.outDir, a.scratchDir));
  }
}
