// The vocabulary between SweepEngine, its executors (the local slot, remote workers) and its
// console: what a lane, a worker and a chunk in flight are to the engine, what it hands out and
// what it is told back, the events it reports, and how an aborted chunk is worded.
import type { Config, LaneConfig } from "../../config/schema.ts";
import type { LaneState } from "../../core/lane-state.ts";
import type { ChildOutcome } from "../../exec/run-child.ts";
import type { IngestResult } from "../generator/ingest.ts";
import type { SweepStore, Transport } from "../../store/port.ts";

/** A lane taking part in this session. */
export interface EngineLane {
  readonly config: LaneConfig;
  readonly laneId: number;
  readonly state: LaneState;
  /** Lane-level (fleet) seeds/s estimate, persisted in lane.seeds_per_sec. */
  rate: number | null;
}

/** What the engine knows about one executor: the local slot, or one remote worker. */
export interface WorkerView {
  readonly label: string;
  readonly jobs: number;
  /** worker row id; null for the local executor. */
  readonly workerId: number | null;
  /** Per-lane seeds/s measured on this worker. */
  readonly rates: Map<string, number | null>;
  /** Per-lane size of this worker's previous complete chunk (the 3x cap). */
  readonly lastCount: Map<string, number>;
  /** Consecutive timeouts per lane. */
  readonly strikes: Map<string, number>;
  /** Consecutive broken chunks per lane (exit 0 or 1, but the generator contract not kept). */
  readonly broken: Map<string, number>;
  /** Lanes this worker stopped taking for the rest of the session. */
  readonly disabled: Set<string>;
}

export interface Assignment {
  readonly chunkId: number;
  readonly lane: string;
  readonly laneId: number;
  readonly seedFrom: number;
  readonly seedTo: number;
  readonly argv: string[];
  readonly cwd: string;
  readonly scratchDir: string;
  readonly logPath: string;
  readonly targetSeconds: number;
  readonly hardTimeoutSeconds: number;
  readonly nice: number;
  readonly idleIo: boolean;
}

/** A minimize unit: `[generator] minimize` over a few finds pending minimization of one lane. */
export interface MinimizeAssignment {
  readonly unitId: number;
  readonly lane: string;
  readonly laneId: number;
  readonly seeds: readonly number[];
  readonly argv: string[];
  readonly cwd: string;
  readonly scratchDir: string;
  readonly logPath: string;
  readonly hardTimeoutSeconds: number;
  readonly nice: number;
  readonly idleIo: boolean;
}

export interface MinimizeInFlight {
  readonly unitId: number;
  readonly lane: string;
  readonly laneId: number;
  readonly seeds: readonly number[];
  readonly worker: WorkerView;
  readonly scratchDir: string;
  readonly logPath: string;
  readonly startedMs: number;
  /** Its kill time was cut short to the session's end: a timeout then says nothing of the minimizer. */
  readonly cutBySessionEnd: boolean;
  lastBeatMs: number;
}

export type AssignResult =
  | { kind: "chunk"; assignment: Assignment }
  | { kind: "drain"; reason: DrainReason }
  | { kind: "idle"; why: string };

export type DrainReason = "deadline" | "interrupted" | "all lanes disabled" | "every lane exhausted";

/** How a chunk's generator run ended: the local executor's child outcome, or a worker's report of it. */
export type ChunkOutcome = ChildOutcome;

export interface ChunkReport {
  outcome: ChunkOutcome;
  /** null when the child was killed by a signal, or when a remote worker did not say. */
  exitCode: number | null;
  /** The signal that killed the child, when known (the local executor knows; the wire does not carry it). */
  signal?: NodeJS.Signals | null;
  seconds: number;
  /** Set for outcome "error": why the child could not run. */
  error?: string;
}

export type FinishNote = "recorded" | "aborted" | "already recorded" | "unknown chunk" | "lane no longer active";

/** What finish made of a report: the note, and the seeds it added to coverage (0 unless "recorded"). */
export interface FinishResult {
  note: FinishNote;
  seeds: number;
}

/** Console-facing events; the CLI prints them, tests may collect them. */
export interface EngineEvents {
  chunkStarted(a: Assignment, worker: WorkerView, remainingSeconds: number): void;
  chunkRecorded(a: InFlight, worker: WorkerView, r: IngestResult, seconds: number, rate: number, clean: number): void;
  chunkAborted(a: InFlight, worker: WorkerView, why: string, seconds: number, logKept: boolean): void;
  laneDisabled(lane: string, worker: WorkerView, why: string): void;
  /** Every seed of the lane up to the last exact seed is covered: it has nothing left to sweep. */
  laneExhausted?(lane: string, lastSeed: number): void;
  chunkReissued(a: InFlight, why: string): void;
  /** A minimize unit was booked (optional: a console may leave minimization to the summary). */
  minimizeRecorded?(u: MinimizeInFlight, r: { merged: number; newFailures: number; failed: number; reopened: number; aborted: string | null }, seconds: number): void;
  /** A minimize unit was taken back from a worker that is gone; its finds wait for another unit. */
  minimizeReissued?(u: MinimizeInFlight, why: string): void;
}

export interface InFlight {
  readonly chunkId: number;
  readonly lane: string;
  readonly laneId: number;
  readonly seedFrom: number;
  readonly seedTo: number;
  readonly worker: WorkerView;
  readonly logPath: string;
  readonly scratchDir: string;
  readonly startedMs: number;
  /** Its kill time was cut short to the session's end plus the drain grace: a timeout then says nothing of the generator. */
  readonly cutBySessionEnd: boolean;
  lastBeatMs: number;
}

export interface EngineOptions {
  /** The books the engine keeps in memory are the ones this store holds. */
  store: SweepStore;
  config: Config;
  outDir: string;
  generationId: number;
  genHash: string;
  sessionId: number;
  appBuild: string | null;
  lanes: EngineLane[];
  /** Chunks run in this process ("local": straight to running) or on workers ("distributed": leased first). */
  transport: Transport;
  /** Monotonic milliseconds. */
  now: () => number;
  deadlineMs: number;
  events: EngineEvents;
}

export interface SessionCounts {
  chunks: number;
  /** Seeds this session swept that no complete chunk had swept before (each counted once). */
  seedsSwept: number;
  finds: number;
  newFailures: number;
  /** New distinct failures (minimized inputs first seen), from chunks and minimize units: exit 1. */
  newDistinct: number;
  /** Of newFailures: new finds pending minimization under their signature (not distinct failures). */
  newPending: number;
  /** Of newPending: finds under a signature the generation had never seen (a new crash): exit 1 at once. */
  newSignatures: number;
  /** Fixed failures hit again (regressions); they alert like new ones. */
  reopened: number;
  unshrunk: number;
  quarantine: number;
  malformed: number;
  /** Minimize units complete, finds they minimized, finds they could not, and their seconds. */
  minimizeUnits: number;
  minimized: number;
  minimizeFailed: number;
  minimizeSeconds: number;
  /** Seconds chunks ran (complete or not): what the minimize share is weighed against on a small fleet. */
  chunkSeconds: number;
}

/**
 * How an aborted chunk is described: `why` on the console line, `status` in the chunk table,
 * `generatorDid` completing "the generator …". A complete outcome with neither an exit code nor a
 * signal comes from a remote worker, whose report carries no signal: "exit ?".
 */
export function abortWording(r: ChunkReport): { why: string; status: string; generatorDid: string } {
  switch (r.outcome) {
    case "complete":
      if (r.signal) return { why: `killed by ${r.signal}`, status: `aborted:signal ${r.signal}`, generatorDid: `was killed by ${r.signal}` };
      if (r.exitCode === null) return { why: "exit ?", status: "aborted:exit ?", generatorDid: "ended with no exit code (killed by a signal on the worker?)" };
      return { why: `exit ${r.exitCode}`, status: `aborted:exit ${r.exitCode}`, generatorDid: `exited with ${r.exitCode}` };
    case "error": {
      const error = r.error ?? "the generator could not run";
      return { why: `error: ${error}`, status: "aborted:error", generatorDid: `could not run: ${error}` };
    }
    default:
      return { why: r.outcome, status: `aborted:${r.outcome}`, generatorDid: r.outcome === "timeout" ? "timed out" : "was interrupted" };
  }
}

/** A WorkerView for the single-host executor, seeded from the lanes' persisted estimates. */
export function localWorker(lanes: readonly EngineLane[], lastCounts: ReadonlyMap<string, number | null>): WorkerView {
  const rates = new Map<string, number | null>();
  const lastCount = new Map<string, number>();
  for (const lane of lanes) {
    rates.set(lane.config.name, lane.rate);
    const n = lastCounts.get(lane.config.name);
    if (n != null) lastCount.set(lane.config.name, n);
  }
  return { label: "local", jobs: 0, workerId: null, rates, lastCount, strikes: new Map(), broken: new Map(), disabled: new Set() };
}
