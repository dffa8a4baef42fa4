// Minimize units, the engine's second kind of unit: hands finds pending minimization to an
// executor with spare room and books what the minimizer wrote, through the same validated ingest
// as a chunk (src/sweep/generator/minimize.ts). A unit never holds up the sweep: it is offered only
// while at least the deadline floor remains, its hard timeout ends before the deadline, and the
// executor interrupts it when the sweep ends (its finds then wait for a later unit). Each find is
// booked once: minimized (merged into a distinct failure) or, when the minimizer failed on it,
// 'failed'; a unit that never reported gives its finds back (releaseLostUnits at the next start),
// and so does one taken back from a worker that is gone (lease expiry, disconnect).
//
// On workers the share caps the fleet: at most floor(share x the fleet's slots) units run at once
// (the other slots keep chunks); on a fleet too small for one, a unit at a time while units took
// at most the share of the time (mayStart). With share 0 units take idle slots only (a worker no
// lane will give a chunk). SweepEngine owns one MinimizeUnits as `engine.minimize`.
import { join, relative } from "node:path";
import { removeBelow } from "../../files/pinned-dir.ts";
import { laneArgs, minimizeCommand } from "../generator/command.ts";
import { ingestMinimized } from "../generator/minimize.ts";
import type { SweepStore } from "../../store/port.ts";
import { laneIdentity } from "../../config/schema.ts";
import type { EngineBooks } from "./engine-memory.ts";
import { Leases } from "./leases.ts";
import {
  abortWording,
  type ChunkReport,
  type DrainReason,
  type EngineLane,
  type EngineOptions,
  type FinishResult,
  type MinimizeAssignment,
  type MinimizeInFlight,
  type WorkerView,
} from "./sweep-types.ts";

/** What a MinimizeUnits reads of and does to the engine that owns it. */
export interface MinimizeHost extends EngineBooks {
  readonly draining: DrainReason | null;
  readonly floorSeconds: number;
  remainingSeconds(): number;
  laneDisabled(lane: string, worker: WorkerView, why: string): void;
}

export class MinimizeUnits {
  /** The units executors hold. */
  readonly inFlight: Leases<MinimizeInFlight>;
  private readonly store: SweepStore;

  constructor(
    private readonly o: EngineOptions,
    private readonly lanesById: ReadonlyMap<number, EngineLane>,
    private readonly host: MinimizeHost,
  ) {
    this.store = o.store;
    this.inFlight = new Leases(o.now);
  }

  /** The share of slots for minimization, or null when `[generator] minimize` is not configured. */
  get share(): number | null {
    return this.o.config.minimize?.share ?? null;
  }

  /** {jobs} for a unit on the single host: its share of the host's jobs (all of them when it only runs idle). */
  localJobs(): number {
    return this.jobsOf(this.o.config.defaults.jobs);
  }

  /** {jobs} for a unit on an executor with `jobs`: its share of them, at least 1 (all of them at share 0). */
  jobsOf(jobs: number): number {
    const m = this.o.config.minimize;
    return m && m.share > 0 ? Math.max(1, Math.round(m.share * jobs)) : jobs;
  }

  /**
   * Whether the fleet, with `fleetSlots` slots, may start one more unit beside its chunks: while
   * fewer than floor(share x slots) run; on a fleet too small for that, one at a time while units
   * have taken no more than the share of the time chunks and units ran. Never with share 0 (idle
   * slots only) or without `[generator] minimize`.
   */
  mayStart(fleetSlots: number): boolean {
    const m = this.o.config.minimize;
    if (!m || m.share <= 0) return false;
    const running = this.inFlight.size;
    if (running < Math.floor(m.share * fleetSlots + 1e-9)) return true;
    const c = this.host.counts;
    return running === 0 && c.minimizeSeconds <= m.share * (c.minimizeSeconds + c.chunkSeconds);
  }

  /** The next unit for `worker`, or null when there is nothing to minimize (draining, or no time for it). */
  assign(worker: WorkerView, jobs: number): MinimizeAssignment | null {
    const m = this.o.config.minimize;
    const remainingSeconds = this.host.remainingSeconds();
    if (!m || this.host.draining || remainingSeconds < this.host.floorSeconds) return null;
    const lanes = [...this.lanesById.values()].filter((l) => l.config.enabled && !worker.disabled.has(l.config.name));
    const finds = this.store.nextPendingFinds(this.o.generationId, lanes.map((l) => l.laneId), m.batch);
    if (finds.length === 0) return null;
    const lane = this.lanesById.get(finds[0]!.lane_id)!;
    const seeds = finds.map((f) => f.first_seed);
    const unitId = this.store.bookMinimizeUnit({
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
    const hardTimeoutSeconds = Math.max(1, Math.min(m.timeoutSeconds, Math.floor(remainingSeconds)));
    const cutBySessionEnd = hardTimeoutSeconds < m.timeoutSeconds;
    this.inFlight.hold(unitId, { unitId, lane: lane.config.name, laneId: lane.laneId, seeds, worker, scratchDir, logPath, startedMs: now, cutBySessionEnd, lastBeatMs: now });
    return {
      unitId,
      lane: lane.config.name,
      laneId: lane.laneId,
      seeds,
      argv: minimizeCommand(m.command, laneArgs(laneIdentity(lane.config)), seeds, scratchDir, jobs),
      cwd: this.o.config.dir,
      scratchDir,
      logPath,
      hardTimeoutSeconds,
      nice: this.o.config.defaults.nice,
      idleIo: this.o.config.defaults.idleIo,
    };
  }

  /** Books a unit's outcome. Idempotent on unit id: a report not this worker's to make, or booked before, changes nothing. */
  finish(worker: WorkerView, unitId: number, report: ChunkReport): FinishResult {
    const row = this.store.minimizeUnit(unitId);
    if (!row || row.session_id !== this.o.sessionId || row.worker_id !== worker.workerId) return { note: "unknown chunk", seeds: 0 };
    const flight = this.inFlight.release(unitId);
    if (row.status !== "running" && row.status !== "leased") return { note: "already recorded", seeds: 0 };
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
      cutBySessionEnd: false,
      lastBeatMs: this.o.now(),
    };
    const store = this.store;
    const counts = this.host.counts;
    const ok = report.outcome === "complete" && (report.exitCode === 0 || report.exitCode === 1);
    const finds = store.unitFinds(unitId);
    let outcome = { merged: 0, newFailures: 0, failed: 0, reopened: 0, aborted: null as string | null };
    let note: FinishResult["note"] = "recorded";
    let keepLog = false;
    if (ok) {
      const r = ingestMinimized(store, {
        generationId: this.o.generationId,
        genHash: this.o.genHash,
        laneId: row.lane_id,
        unitId,
        finds,
        resultsDir: u.scratchDir,
        outDir: this.o.outDir,
        appBuild: this.o.appBuild,
      });
      counts.malformed += r.malformed.length;
      if (r.refused !== null) {
        // Results that cannot be read safely (a symlink where a directory belongs) decide nothing:
        // the finds wait for another unit, and this executor takes no more work of the lane.
        store.endMinimizeUnit(unitId, "aborted:results refused", report.seconds, { merged: 0, newFailures: 0, failed: 0 });
        store.releaseUnitFinds(unitId);
        this.host.touch(worker);
        worker.disabled.add(u.lane);
        outcome.aborted = `results refused: ${r.refused}`;
        note = "aborted";
        keepLog = true;
        this.host.laneDisabled(u.lane, worker, `a minimize unit's results could not be read: ${r.refused}`);
      } else {
        store.endMinimizeUnit(unitId, "complete", report.seconds, { merged: r.merged, newFailures: r.newFailures, failed: r.failed });
        outcome = { merged: r.merged, newFailures: r.newFailures, failed: r.failed, reopened: r.reopened, aborted: null };
        counts.minimizeUnits++;
        counts.minimized += finds.length - r.failed;
        counts.minimizeFailed += r.failed;
        counts.minimizeSeconds += report.seconds;
        counts.newFailures += r.newFailures;
        counts.newDistinct += r.newFailures;
        counts.reopened += r.reopened;
      }
    } else if (report.outcome === "interrupted" || (report.outcome === "timeout" && u.cutBySessionEnd)) {
      // The sweep ended (or Ctrl-C), or the unit was killed at the session's end, before its own
      // timeout: nothing was decided about these finds; a later unit takes them.
      const why = report.outcome === "interrupted" ? "interrupted" : "session ended";
      store.endMinimizeUnit(unitId, `aborted:${why}`, report.seconds, { merged: 0, newFailures: 0, failed: 0 });
      store.releaseUnitFinds(unitId);
      outcome.aborted = why;
      note = "aborted";
    } else {
      // The minimizer itself failed on them: final, so a minimizer that always fails cannot loop.
      const { why, status, generatorDid } = abortWording(report);
      store.endMinimizeUnit(unitId, status, report.seconds, { merged: 0, newFailures: 0, failed: finds.length });
      for (const f of finds) store.markFindFailed(f.id, `the minimizer ${generatorDid}; see ${u.logPath}`);
      counts.minimizeFailed += finds.length;
      outcome = { merged: 0, newFailures: 0, failed: finds.length, reopened: 0, aborted: why };
      note = "aborted";
      keepLog = true;
    }
    this.host.whenCommitted(() => {
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
    });
    return { note, seeds: 0 };
  }

  /** Takes a unit back from a worker that is gone (lease expired, disconnected): its finds wait for another unit. */
  reissue(unitId: number, why: string): void {
    const flight = this.inFlight.release(unitId);
    if (!flight) return;
    const row = this.store.minimizeUnit(unitId);
    if (!row || (row.status !== "running" && row.status !== "leased")) return;
    this.store.endMinimizeUnit(unitId, "reissued", null, { merged: 0, newFailures: 0, failed: 0 });
    this.store.releaseUnitFinds(unitId);
    this.host.whenCommitted(() => this.o.events.minimizeReissued?.(flight, why));
  }

  /** Units `worker` holds right now. */
  heldBy(worker: WorkerView): MinimizeInFlight[] {
    return this.inFlight.heldBy(worker);
  }

  /** Marks the unit's lease as alive. Returns whether `worker` still holds it. */
  heartbeat(worker: WorkerView, unitId: number): boolean {
    return this.inFlight.heartbeat(worker, unitId);
  }

  /** Units whose holder has not sent a heartbeat for `leaseSeconds`. */
  expiredLeases(leaseSeconds: number): MinimizeInFlight[] {
    return this.inFlight.expired(leaseSeconds);
  }

  /** Empties a unit's scratch directory before it runs, never following a symlink below <out>. */
  clearScratch(a: MinimizeAssignment): void {
    removeBelow(this.o.outDir, relative(this.o.outDir, a.scratchDir));
  }
}
