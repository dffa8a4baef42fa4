// What the dashboard shows, as plain JSON: the one interface between a campaign (`run`,
// `coordinate`, `explore`, or a store read by `fuzzfleet ui`) and the dashboard's server, page,
// `/metrics` and the static report. A source is asked for a snapshot at most once a second
// (the server caches it for every client), so it may run a few read-only queries each time.
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
  /** null: not available for this campaign kind (yet). */
  workers: WorkerRow[] | null;
  explore: null;
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
  totals: { seedsSwept: number; finds: number; distinct: number; open: number; chunksComplete: number; hits: number; byState: Record<string, number> };
  series: SweepSeries;
  failures: FailureView[];
  /** How many failures there are in all, when `failures` is cut. */
  failuresTotal: number;
  sessions: SessionView[];
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
}

export interface InFlightView {
  chunkId: number;
  seedFrom: number;
  seedTo: number;
  runningSeconds: number;
  worker: string;
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
}

export interface FailureDetail {
  id: number;
  bucket: string;
  repro: string | null;
  report: string;
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

export interface WorkerRow {
  label: string;
  liveness: "alive" | "slow" | "lost";
  lastHeartbeatSeconds: number | null;
  chunk: string | null;
}
