// What the dashboard shows, as plain JSON: the one interface between a campaign (`run`,
// `coordinate`, `explore`, or a store read by `fuzzfleet ui`) and the dashboard's server, page,
// `/metrics` and the static report. A source is asked for a snapshot at most once a second
// (the server caches it for every client), so it may run a few read-only queries each time.
import type { DiscoveryEstimate } from "../core/discovery-estimate.ts";
import type { MetricFamily } from "./metrics.ts";

export interface DashboardSource {
  /** The whole picture now; sections a campaign kind does not have are null. */
  snapshot(): DashboardSnapshot;
  /** The Prometheus families now (`/metrics`). */
  metrics(): MetricFamily[];
  /** One failure's report text and repro line, or null when there is no such failure. */
  failureDetail(id: number): FailureDetail | null;
}

export interface DashboardSnapshot {
  kind: "sweep" | "explore";
  /** Shown as the page title: the campaign's directory. */
  title: string;
  /** When the snapshot was taken (ms since the epoch). */
  takenMs: number;
  /** A running campaign (true) or a store browsed while nothing runs (false). */
  live: boolean;
  status: CampaignStatus;
  sweep: SweepView | null;
  /** null: not available for this campaign kind. */
  workers: WorkerRow[] | null;
  explore: ExploreView | null;
}

export interface CampaignStatus {
  /** One line: "session 4 running on host", "no session running (last: #3 done)". */
  headline: string;
  elapsedSeconds: number | null;
  budgetSeconds: number | null;
  draining: string | null;
}

export interface SweepView {
  generation: number;
  lanes: LaneView[];
  totals: {
    seedsSwept: number;
    finds: number;
    distinct: number;
    open: number;
    chunksComplete: number;
    hits: number;
    byState: Record<string, number>;
    /** Finds still pending minimization and the seeds they hit (not yet a distinct failure). */
    pending: { finds: number; hits: number };
  };
  series: SweepSeries;
  failures: FailureView[];
  /** How many failures there are in all, when `failures` is cut. */
  failuresTotal: number;
  sessions: SessionView[];
  /** When to stop: for all lanes together and per active lane (docs/sweep.md). */
  discovery: { campaign: DiscoveryEstimate; lanes: (DiscoveryEstimate & { lane: string })[] };
  /** The app build the lanes' `builds` compare against: the running (or last) session's; null when it named none. */
  currentBuild: string | null;
}

export interface LaneView {
  name: string;
  baseSeed: number;
  cursor: number;
  /** Seeds in complete chunks at or above the cursor: swept, but not yet part of the prefix. */
  doneAhead: number;
  /** Seeds handed back to be swept again (aborted or reissued chunks); null when nothing runs. */
  queued: number | null;
  /** The lane's seeds/s estimate. */
  seedsPerSecond: number | null;
  finds: number;
  inFlight: InFlightView[];
  /** Which seed ranges each app build swept (the latest, in seed order) and the current build's part of the prefix. */
  builds: LaneBuildsView;
}

export interface LaneBuildsView {
  /** Inclusive ranges, lowest first; `build` null: chunks that named none; `ahead`: above the cursor, not coverage. */
  ranges: { build: string | null; seedFrom: number; seedTo: number; ahead: boolean }[];
  /** Ranges below those shown. */
  earlierRanges: number;
  /** Seeds of [baseSeed, cursor) swept under the current build. */
  currentBuildCovered: number;
}

export interface InFlightView {
  chunkId: number;
  seedFrom: number;
  seedTo: number;
  runningSeconds: number;
  worker: string;
  /** Failure entries its generator has written so far (counted before the chunk is booked); null when this host cannot see them. */
  findsSoFar: number | null;
}

/** Points in time (unix seconds) with, per point, seeds/s per lane and in total, and cumulative finds and distinct failures. */
export interface SweepSeries {
  t: number[];
  lanes: Record<string, number[]>;
  total: number[];
  finds: number[];
  distinct: number[];
}

export interface FailureView {
  id: number;
  bucket: string;
  lane: string;
  state: string;
  hits: number;
  firstSeed: number;
  firstSeen: string;
  lastSeen: string;
  message: string | null;
  /** The app builds it was first and last seen under, and the one a re-check found it fixed in (null: none named, or not fixed). */
  firstBuild: string | null;
  lastBuild: string | null;
  fixedBuild: string | null;
}

export interface FailureDetail {
  id: number;
  bucket: string;
  repro: string | null;
  report: string;
  /** A sweep failure's app builds: first and last seen under, fixed in (null: none named, or not fixed). */
  builds?: { firstSeen: string | null; lastSeen: string | null; fixedIn: string | null };
}

export interface SessionView {
  id: number;
  mode: string;
  status: string;
  startedAt: string;
  endedAt: string | null;
  requestedSeconds: number | null;
  host: string | null;
}

/**
 * A worker (or an explore master's local slot). alive: heard from within its heartbeat; slow:
 * silent for longer, not yet past its lease; lost: silent past its lease, or its session ended
 * without it leaving; left: it disconnected.
 */
export interface WorkerRow {
  label: string;
  liveness: "alive" | "slow" | "lost" | "left";
  /** Seconds since it was last heard from; null when never (or not recorded). */
  lastHeartbeatSeconds: number | null;
  /** What it holds now: chunks (sweep) or tasks (explore), with their age in seconds when known. */
  holding: { text: string; ageSeconds: number | null }[];
  /** How its files reach the campaign (a sweep's remote worker): the shared directory, or over the connection. */
  files?: "shared" | "transfer";
  /** One more fact: "-j 4", "idle", "quarantined: …". */
  note: string | null;
}

/** An explore campaign: its frontier, rates and growth, findings, masters and the idle window. */
export interface ExploreView {
  epoch: string | null;
  /** "lone master", "root of 3 masters", "submaster rank 2", "read from the files". */
  role: string;
  frontier: ExploreFrontier;
  totals: {
    /** Committed executions (this master's, this session; from the files: every done record or ledger line). */
    executions: number;
    /** null: not known from the files (a finished campaign's lease records are gone). */
    generated: number | null;
    /** New unique children in the corpus. */
    unique: number | null;
    /** generated − unique, not below 0. */
    redundant: number | null;
    corpus: number;
    externalInputs: number | null;
    skippedExplored: number | null;
    problems: number | null;
  };
  /** Over the last few seconds; null when not running. */
  rates: { executionsPerSecond: number | null; generatedPerSecond: number | null };
  series: ExploreSeries;
  findings: ExploreFindingView[];
  findingsTotal: { inputs: number; crashes: number; hangs: number; signatures: number };
  /** When to stop (explore/views/discovery.ts): this campaign's executions and the signatures its findings fall under; null with no campaign to estimate. */
  discovery?: DiscoveryEstimate | null;
  masters: MasterView[];
  /** The lone master's idle window: null while it is not counting down (or with several masters). */
  idle: { windowSeconds: number; remainingSeconds: number | null } | null;
  /** The wall budget: null for none. */
  wall: { budgetSeconds: number; remainingSeconds: number | null } | null;
}

export interface ExploreFrontier {
  /** Held by this master, waiting for an executor. null from the files. */
  pending: number | null;
  /** Input files listed, not yet admitted. */
  inputBacklog: number | null;
  /** Handed to an executor, not yet answered (this master). */
  running: number | null;
  /** Lease records, fleet-wide: leased (unexpired), committing, expired, done. */
  leased: number;
  committing: number;
  expired: number;
  done: number;
  /** How old the lease counts are (they are read from disk at most every few seconds); null: no lease table. */
  leaseCountsAgeSeconds: number | null;
}

/** Points in time (unix seconds): executions/s, cumulative unique and generated, redundancy (0..1). */
export interface ExploreSeries {
  t: number[];
  executionsPerSecond: number[];
  unique: number[];
  generated: number[];
  redundancy: number[];
}

export interface ExploreFindingView {
  /** Its number for /failure/ID: 1 for the first signature. */
  id: number;
  signature: string;
  kind: "crash" | "hang";
  inputs: number;
  timesSeen: number;
  firstSeen: string;
  lastSeen: string;
  example: string;
}

export interface MasterView {
  rank: number;
  host: string | null;
  /** This process's master. */
  self: boolean;
  /** Its quiescence phase: "working", "idle", "idle window", "frozen (voted YES)", "proposing", "committed", "lost"… */
  phase: string;
}
