// The engine's memory at a checkpoint: what a transaction the store refused may have changed, so
// that SweepEngine.rollback can put it back (commit-queue.ts drives checkpoint / rollback), and
// what the engine's parts (chunk-endings.ts, minimize-units.ts) do to that memory.
import type { LaneSnapshot } from "../../core/lane-state.ts";
import type { EngineLane, InFlight, MinimizeInFlight, SessionCounts, WorkerView } from "./sweep-types.ts";

/** The engine's memory at a checkpoint: everything a refused transaction may have changed. */
export interface EngineMark {
  lanes: { lane: EngineLane; state: LaneSnapshot; rate: number | null }[];
  chunksRun: Map<string, number>;
  inFlight: ReadonlyMap<number, InFlight>;
  minimizing: ReadonlyMap<number, MinimizeInFlight>;
  counts: SessionCounts;
  /** Worker views changed since the checkpoint, with their state before the first change. */
  workers: Map<WorkerView, WorkerMemory>;
}

/** What a part of the engine changes of the engine's memory while it books a unit, inside the open transaction. */
export interface EngineBooks {
  /** The session's counts (a rollback replaces the object: read it through here each time). */
  readonly counts: SessionCounts;
  /** Runs `action` once the open transaction committed (at once outside one). */
  whenCommitted(action: () => void): void;
  /** Remembers `worker`'s scheduling memory before a change (a refused transaction puts it back). */
  touch(worker: WorkerView): void;
}

export interface WorkerMemory {
  rates: Map<string, number | null>;
  lastCount: Map<string, number>;
  strikes: Map<string, number>;
  broken: Map<string, number>;
  disabled: Set<string>;
}

/** `worker`'s scheduling memory, before a change. */
export function rememberWorker(worker: WorkerView): WorkerMemory {
  return {
    rates: new Map(worker.rates),
    lastCount: new Map(worker.lastCount),
    strikes: new Map(worker.strikes),
    broken: new Map(worker.broken),
    disabled: new Set(worker.disabled),
  };
}

export function restoreWorker(worker: WorkerView, m: WorkerMemory): void {
  for (const [from, to] of [
    [m.rates, worker.rates],
    [m.lastCount, worker.lastCount],
    [m.strikes, worker.strikes],
    [m.broken, worker.broken],
  ] as [Map<string, unknown>, Map<string, unknown>][]) {
    to.clear();
    for (const [k, v] of from) to.set(k, v);
  }
  worker.disabled.clear();
  for (const lane of m.disabled) worker.disabled.add(lane);
}
