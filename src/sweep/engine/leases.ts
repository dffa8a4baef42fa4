// The units an executor holds, as leases: who holds each one and when it last said it is alive.
// Chunks (SweepEngine) and minimize units (MinimizeUnits) are held the same way, here. Liveness is
// memory: a heartbeat moves `lastBeatMs` on the engine's monotonic clock, and a unit whose holder
// has been silent for the lease is expired (its taker reissues it). The store's copy of a
// heartbeat is informational and may lag.
//
// The engine's checkpoint takes a snapshot and a refused transaction restores it (engine-memory.ts):
// a unit handed out or taken back inside that transaction is then held, or not, as before.
import type { WorkerView } from "./sweep-types.ts";

/** A unit held by an executor. */
export interface Lease {
  readonly worker: WorkerView;
  /** When the holder last said it is alive (monotonic ms). */
  lastBeatMs: number;
}

export class Leases<T extends Lease> {
  private held = new Map<number, T>();

  /** `now`: the engine's monotonic clock (ms). */
  constructor(private readonly now: () => number) {}

  get size(): number {
    return this.held.size;
  }

  get(id: number): T | undefined {
    return this.held.get(id);
  }

  values(): IterableIterator<T> {
    return this.held.values();
  }

  /** `unit` is now held under `id` (its `lastBeatMs` is when it was handed out). */
  hold(id: number, unit: T): void {
    this.held.set(id, unit);
  }

  /** Lets go of `id`: it was booked or taken back. Returns what was held. */
  release(id: number): T | undefined {
    const unit = this.held.get(id);
    this.held.delete(id);
    return unit;
  }

  /** The units `worker` holds right now. */
  heldBy(worker: WorkerView): T[] {
    return [...this.held.values()].filter((u) => u.worker === worker);
  }

  /** Marks the lease of `id` as alive. Returns whether `worker` still holds it. */
  heartbeat(worker: WorkerView, id: number): boolean {
    const unit = this.held.get(id);
    if (!unit || unit.worker !== worker) return false;
    unit.lastBeatMs = this.now();
    return true;
  }

  /** The units whose holder has not sent a heartbeat for `leaseSeconds`. */
  expired(leaseSeconds: number): T[] {
    const limit = this.now() - leaseSeconds * 1000;
    return [...this.held.values()].filter((u) => u.lastBeatMs < limit);
  }

  /** Who holds what, for a checkpoint. */
  snapshot(): ReadonlyMap<number, T> {
    return new Map(this.held);
  }

  /** Back to a checkpoint's snapshot. */
  restore(snapshot: ReadonlyMap<number, T>): void {
    this.held = new Map(snapshot);
  }
}
