// The sweep store's records: the rows and values that cross the store port (port.ts), in the
// store's own column names, which are part of the product (docs/store.md). Plain data, no I/O:
// every backend of the port returns these shapes.

/** UTC ISO-8601 with seconds precision: the store's timestamp format. */
export function isoNow(date: Date = new Date()): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

// Chunks: one generator run over an inclusive seed range.
export interface ChunkRecord {
  id: number;
  session_id: number;
  lane_id: number;
  seed_from: number;
  seed_to: number;
  started_at: string;
  ended_at: string | null;
  seconds: number | null;
  app_build: string | null;
  status: string;
  clean: number;
  finds: number;
  quarantine: number;
  unshrunk: number;
  worker_id: number | null;
  leased_at: string | null;
  last_heartbeat: string | null;
}

export interface NewChunk {
  sessionId: number;
  laneId: number;
  seedFrom: number;
  seedTo: number;
  appBuild: string | null;
  status: "running" | "leased";
  workerId: number | null;
}

export interface ChunkCounts {
  clean: number;
  finds: number;
  quarantine: number;
  unshrunk: number;
}

/** Chunk totals of one generation: seeds and seconds of complete chunks, and chunks by outcome. */
export interface ChunkTotals {
  seeds: number;
  seconds: number;
  chunks: number;
  aborted: number;
  reissued: number;
  quarantine: number;
}

/** A chunk row whose seed range no engine could have handed out, and what was made of it. */
export interface RepairedRange {
  chunkId: number;
  laneId: number;
  laneName: string;
  /** As stored: a number past the last exact seed, a fraction, or a range ending below its start. */
  seedFrom: number;
  seedTo: number;
  status: string;
  /** The range it holds now: its part below the limit (swept again), or the lane's base seed alone (nothing to keep). */
  now: [number, number];
}

// Lanes: a lane's cursor is its coverage, [base_seed, cursor).
export interface LaneRow {
  id: number;
  generation_id: number;
  name: string;
  params_json: string;
  base_seed: number;
  cursor: number;
  seeds_per_sec: number | null;
  retired: number;
  created_at: string;
}

// Generations: one per version of the generator; the newest is current.
export interface GenerationRow {
  id: number;
  gen_hash: string;
  created_at: string;
  note: string | null;
}

// Sessions: one per `run` or `coordinate`.
export type SessionStatus = "running" | "done" | "interrupted" | "disabled" | "crashed";

/** How a session that ended itself ended. */
export type SessionEnd = "done" | "interrupted" | "disabled";

export interface SessionRow {
  id: number;
  generation_id: number;
  started_at: string;
  ended_at: string | null;
  requested_seconds: number | null;
  status: SessionStatus;
  app_build: string | null;
  /** The session's transport. */
  mode: Transport;
  coordinator_host: string | null;
  port: number | null;
}

/** How a sweep session runs its chunks: in this process, or on workers it serves (the `session.mode` column). */
export type Transport = "local" | "distributed";

export interface NewSession {
  generationId: number;
  requestedSeconds: number;
  appBuild: string | null;
  transport: Transport;
  host: string;
  port: number | null;
}

// Workers attached to a distributed session.
export interface NewWorker {
  sessionId: number;
  host: string;
  addr: string;
  jobs: number;
  genHash: string;
  appBuild: string | null;
  /** How its files reach the campaign: the shared directory, or over the connection. */
  files?: "shared" | "transfer";
}

// Failures: distinct failures (minimized input) and finds pending minimization.
export type FailureState = "open" | "fixed" | "stale";
export const FAILURE_STATES: readonly FailureState[] = ["open", "fixed", "stale"];

export interface FailureRow {
  id: number;
  generation_id: number;
  lane_id: number;
  dedup_key: string;
  bucket: string;
  first_seed: number;
  shrunk: number;
  message: string | null;
  repro: string | null;
  artifact_dir: string | null;
  first_seen: string;
  last_seen: string;
  first_app_build: string | null;
  /** The build of the chunk (or re-check) that last saw it; rows from before schema 5: that of its latest chunk. */
  last_app_build: string | null;
  hits: number;
  state: FailureState;
  resolved_at: string | null;
  resolved_app_build: string | null;
  signature: string | null;
  minimize_state: MinimizeState | null;
  merged_into: number | null;
  minimize_note: string | null;
}

export type MinimizeState = "pending" | "running" | "failed" | "done";

export interface NewFailure {
  generationId: number;
  laneId: number;
  dedupKey: string;
  bucket: string;
  seed: number;
  shrunk: boolean;
  message: string | null;
  repro: string | null;
  artifactDir: string;
  appBuild: string | null;
  signature: string;
}

export interface SeedLane {
  seed: number;
  /** Identity JSON of the lane whose chunk recorded the seed; the failure's own lane when the chunk is unknown. */
  lane_params: string;
}

export interface FailureFilter {
  /** 'all' = every state. */
  state: FailureState | "all";
  bucket?: string | null;
  /** null = every generation. */
  generationId: number | null;
  id?: number | null;
  signature?: string | null;
}

export interface FailureListRow extends FailureRow {
  lane_name: string;
  /** The lane's identity JSON ({"args":[...],"base_seed":N}) when the failure was found. */
  lane_params: string;
}

export interface FailureGroup {
  state: FailureState;
  bucket: string;
  distinct: number;
  hits: number;
}

export interface PendingGroup {
  state: FailureState;
  bucket: string;
  signature: string;
  /** Finds pending minimization under this signature (rows), and the seeds that hit them. */
  finds: number;
  hits: number;
  /** Of `finds`: held by a minimize unit now, and those the minimizer could not minimize. */
  running: number;
  failed: number;
  /** Distinct failures already known under this signature. */
  distinct: number;
  first_seed: number;
  lane_name: string;
}

// Minimize units and the finds they hold.
export interface PendingFind {
  id: number;
  lane_id: number;
  first_seed: number;
  signature: string | null;
}

export interface MinimizeUnitRow {
  id: number;
  session_id: number;
  lane_id: number;
  worker_id: number | null;
  status: string;
}

export interface MinimizeProgress {
  pending: number;
  running: number;
  failed: number;
  done: number;
  units: number;
  unit_seconds: number;
}

// Quarantined tests, per reason.
export interface QuarantineGroup {
  reason: string;
  inconclusive: boolean;
  count: number;
}

/** One reason of a chunk's quarantined tests, and how many gave it. */
export interface QuarantineReason {
  reason: string;
  /** An inconclusive test (no verdict: a reference that ran too long), not an invalid one. */
  inconclusive: boolean;
  count: number;
}

/** The group of quarantined tests of complete chunks that recorded no reason. */
export const UNRECORDED_REASON = "no reason recorded";

/** The groups as one line: "reference binary ran over 10 s: 25, invalid op: 3". */
export function reasonList(groups: readonly QuarantineGroup[]): string {
  return groups.map((g) => `${g.reason}: ${g.count}`).join(", ");
}

// What the dashboard shows of chunks and workers.
export interface TimedChunk {
  lane: string;
  started_at: string;
  ended_at: string;
  seeds: number;
  finds: number;
}

export interface HeldChunk {
  id: number;
  lane: string;
  seed_from: number;
  seed_to: number;
  status: string;
  started_at: string;
  leased_at: string | null;
  last_heartbeat: string | null;
}

export interface SessionWorker {
  id: number;
  host: string;
  jobs: number;
  state: string;
  connected_at: string;
  last_seen: string | null;
  disconnected_at: string | null;
  /** 'shared' or 'transfer' (its files over the connection); null in rows from before the column. */
  files?: string | null;
  /** The chunks it holds now (running or leased), oldest first. */
  chunks: HeldChunk[];
}
