// The dashboard's source for a sweep campaign: the store (read-only queries on the caller's
// connection) plus, while `run` or `coordinate` drives it, the engine's memory (chunks in
// flight, ranges queued again, the drain reason). Without a live engine it shows the campaign as
// the store left it (`fuzzfleet ui`, the static report).
//
// A snapshot is never taken inside an open transaction of the same connection (the group commit
// may hold one across turns while the store refuses writes): reads there would show books that
// are not on disk yet, so the previous snapshot is returned instead.
import { relative, sep } from "node:path";
import { PinnedDir } from "../../files/pinned-dir.ts";
import { FileProblem } from "../../files/file-problem.ts";
import { resolveStorePath } from "../generator/ingest.ts";
import type { InFlight, SessionCounts, EngineLane, DrainReason } from "../engine/sweep-engine.ts";
import { FAILURE_STATES, type SessionRow, type SweepStore } from "../../store/port.ts";
import type { MetricFamily } from "../../ui/metrics.ts";
import type { DashboardSnapshot, DashboardSource, FailureDetail, LaneView, SweepView, WorkerRow } from "../../ui/source.ts";
import { sweepMetrics } from "./metrics.ts";
import { sweepDiscovery } from "./discovery.ts";
import { lastSessionBuild, laneBuildsView } from "./builds.ts";
import { sweepSeries } from "./timeline.ts";
import { workerRows } from "./workers.ts";

/** Rows of the failures table; `fuzzfleet failures` lists them all. */
const FAILURES_SHOWN = 200;
const SESSIONS_SHOWN = 10;
/** How old a snapshot /metrics may answer from (ms): about one scrape interval of a busy Prometheus. */
const METRICS_MAX_AGE_MS = 1000;
/** A report.txt is shown up to this size. */
const REPORT_MAX_BYTES = 256 * 1024;

/** What a running sweep adds to the store's picture (the SweepEngine's public side). */
export interface LiveSweep {
  readonly sessionId: number;
  readonly host: string;
  readonly budgetSeconds: number;
  /** Monotonic ms on the engine's clock (InFlight.startedMs). */
  now(): number;
  elapsedSeconds(): number;
  readonly engine: {
    inFlightChunks(): InFlight[];
    engineLanes(): EngineLane[];
    readonly draining: DrainReason | null;
    readonly counts: SessionCounts;
  };
  /** Failure entries a running chunk's generator has written so far (its failures/); absent or null when not seen from here. */
  chunkFinds?(f: InFlight): number | null;
}

export interface SweepSourceOptions {
  /** The campaign's books. */
  store: SweepStore;
  outDir: string;
  title: string;
  live: LiveSweep | null;
  /** Wall clock (ms since the epoch), for the series' end and the snapshot's time. */
  wallNow?: () => number;
  /** The campaign's [distributed] lease_seconds, for the workers' liveness (default 120). */
  leaseSeconds?: number;
}

export class SweepDashboardSource implements DashboardSource {
  private last: DashboardSnapshot | null = null;
  private lastTakenMs = -Infinity;
  private readonly wallNow: () => number;
  private readonly store: SweepStore;

  constructor(private readonly o: SweepSourceOptions) {
    this.wallNow = o.wallNow ?? Date.now;
    this.store = o.store;
  }

  snapshot(): DashboardSnapshot {
    if (this.store.inTransaction && this.last) return this.last;
    this.last = this.take();
    this.lastTakenMs = performance.now();
    return this.last;
  }

  /**
   * From the last snapshot while it is younger than METRICS_MAX_AGE_MS: however many scrapers
   * poll, the books are read at most once a second for them (a snapshot reads aggregates only).
   */
  metrics(): MetricFamily[] {
    const fresh = this.last !== null && performance.now() - this.lastTakenMs < METRICS_MAX_AGE_MS;
    return sweepMetrics(fresh ? this.last! : this.snapshot());
  }

  failureDetail(id: number): FailureDetail | null {
    const f = this.store.listFailures({ state: "all", generationId: null, id })[0];
    if (!f) return null;
    return {
      id: f.id,
      bucket: f.bucket,
      repro: f.repro,
      report: f.artifact_dir === null ? "(no artifact directory recorded)" : this.readReport(f.artifact_dir),
      builds: { firstSeen: f.first_app_build, lastSeen: f.last_app_build, fixedIn: f.resolved_app_build },
    };
  }

  /** report.txt of an artifact directory below <out>, never through a symlink. */
  private readReport(stored: string): string {
    const dir = resolveStorePath(this.o.outDir, stored);
    const rel = relative(this.o.outDir, dir);
    if (rel === "" || rel.startsWith("..") || rel.startsWith(sep)) return `(the artifact directory ${dir} is outside ${this.o.outDir}; not read)`;
    let root: PinnedDir | null = null;
    let at: PinnedDir | null = null;
    try {
      root = PinnedDir.open(this.o.outDir);
      at = root.walk(rel.split(sep));
      return at.readFile("report.txt", REPORT_MAX_BYTES).bytes.toString("utf8");
    } catch (err) {
      if (err instanceof FileProblem) return `(no report: ${err.message})`;
      throw err;
    } finally {
      at?.close();
      root?.close();
    }
  }

  private take(): DashboardSnapshot {
    const store = this.store;
    const live = this.o.live;
    const gen = store.currentGeneration();
    const sessions = store.recentSessions(SESSIONS_SHOWN);
    const base: DashboardSnapshot = {
      kind: "sweep",
      title: this.o.title,
      takenMs: this.wallNow(),
      live: live !== null,
      status: live
        ? { headline: `session ${live.sessionId} running on ${live.host}`, elapsedSeconds: live.elapsedSeconds(), budgetSeconds: live.budgetSeconds, draining: live.engine.draining }
        : { headline: sessions[0] ? `nothing running (last session #${sessions[0].id}: ${sessions[0].status})` : "nothing swept yet", elapsedSeconds: null, budgetSeconds: null, draining: null },
      sweep: null,
      workers: null,
      explore: null,
    };
    if (!gen) return base;
    const flights = live ? live.engine.inFlightChunks() : [];
    const engineLanes = new Map((live?.engine.engineLanes() ?? []).map((l) => [l.laneId, l]));
    const findsByLane = store.findsByLane();
    const rows = store.activeLanes(gen.id);
    const liveSession = live ? sessions.find((s) => s.id === live.sessionId) : undefined;
    const currentBuild = liveSession ? liveSession.app_build : lastSessionBuild(store);
    const lanes: LaneView[] = rows.map((row) => ({
      name: row.name,
      baseSeed: row.base_seed,
      cursor: row.cursor,
      doneAhead: store.doneAheadOfCursor(row.id, row.cursor),
      queued: engineLanes.get(row.id)?.state.queued() ?? null,
      seedsPerSecond: row.seeds_per_sec,
      finds: findsByLane.get(row.id) ?? 0,
      inFlight: flights
        .filter((f) => f.laneId === row.id)
        .map((f) => ({ chunkId: f.chunkId, seedFrom: f.seedFrom, seedTo: f.seedTo, runningSeconds: Math.max(0, (live!.now() - f.startedMs) / 1000), worker: f.worker.label, findsSoFar: live!.chunkFinds?.(f) ?? null })),
      builds: buildsOf(laneBuildsView(store, row, currentBuild)),
    }));
    // Only the rows shown are read; the counts come from one grouped pass over the distinct failures.
    const scope = { state: "all" as const, generationId: gen.id };
    const failures = store.failurePage(scope, FAILURES_SHOWN, 0);
    const counted = store.countFailures(scope);
    const totals = store.completeTotals(gen.id);
    const seedsSwept = store.seedsSwept(gen.id);
    // The same finds `status` and the summary count, totalled without grouping them by signature.
    const pending = store.pendingTotals(scope);
    const sweep: SweepView = {
      generation: gen.id,
      lanes,
      totals: {
        seedsSwept,
        finds: totals.finds,
        distinct: counted.distinct,
        open: counted.byState.open ?? 0,
        chunksComplete: totals.chunks,
        hits: counted.hits,
        byState: Object.fromEntries(FAILURE_STATES.map((state) => [state, counted.byState[state] ?? 0])),
        pending,
      },
      series: sweepSeries(store, gen.id, lanes.map((l) => l.name), live ? this.wallNow() : null),
      failures: failures.map((f) => ({
        id: f.id,
        bucket: f.bucket,
        lane: f.lane_name,
        state: f.state,
        hits: f.hits,
        firstSeed: f.first_seed,
        firstSeen: f.first_seen,
        lastSeen: f.last_seen,
        message: f.message,
        firstBuild: f.first_app_build,
        lastBuild: f.last_app_build,
        fixedBuild: f.resolved_app_build,
      })),
      failuresTotal: counted.distinct,
      discovery: sweepDiscovery(
        store,
        gen.id,
        seedsSwept,
        rows.map((row, i) => ({ id: row.id, name: row.name, seeds: lanes[i]!.cursor - lanes[i]!.baseSeed + lanes[i]!.doneAhead })),
      ),
      currentBuild,
      sessions: sessions.map((s) => ({
        id: s.id,
        mode: s.mode,
        status: s.status,
        startedAt: s.started_at,
        endedAt: s.ended_at,
        requestedSeconds: s.requested_seconds,
        host: s.coordinator_host,
      })),
    };
    return { ...base, sweep, workers: this.workers(sessions) };
  }

  /** The workers of the running session (or, read-only, the last one); null for a session that swept in its own process. */
  private workers(sessions: readonly SessionRow[]): WorkerRow[] | null {
    const live = this.o.live;
    const session = live ? sessions.find((s) => s.id === live.sessionId) : sessions[0];
    if (!session || session.mode === "local") return null;
    const lease = this.o.leaseSeconds ?? 120;
    return workerRows(this.store.sessionWorkers(session.id), {
      nowMs: this.wallNow(),
      heartbeatSeconds: Math.min(5, lease / 4),
      leaseSeconds: lease,
      sessionRunning: live !== null || session.status === "running",
    });
  }
}

/** The store's view of a lane's builds in the snapshot's words. */
function buildsOf(b: ReturnType<typeof laneBuildsView>): LaneView["builds"] {
  return {
    ranges: b.ranges.map((r) => ({ build: r.app_build, seedFrom: r.seed_from, seedTo: r.seed_to, ahead: r.ahead })),
    earlierRanges: b.earlier_ranges,
    currentBuildCovered: b.current_build_covered,
  };
}
