// How a sweep worker's `want` is filled: which chunks and minimize units go into one `assign`.
// Minimize units come first, within their share of the fleet's slots (MinimizeUnits.mayStart), so
// minimization keeps its slots while chunks are plentiful; then chunks; and the slots no lane gives
// this worker a chunk for (every lane disabled on it) are idle, so units may take them past the share.
// Runs inside one store transaction: the caller (worker-protocol.ts) queues it on the commit queue.
import type { Assignment, MinimizeAssignment, SweepEngine, WorkerView } from "../engine/sweep-engine.ts";

export interface PackedWant {
  chunks: Assignment[];
  units: MinimizeAssignment[];
  /** The engine's answer to the last chunk asked for: why no more came (idle, drain), or null when none was asked. */
  last: ReturnType<SweepEngine["assign"]> | null;
}

/** Fills up to `free` slots of `w`; `fleetSlots` is what the minimize share is a share of, `jobs` each unit's -j. */
export function packWant(engine: SweepEngine, w: WorkerView, free: number, fleetSlots: number, jobs: number): PackedWant {
  const units: MinimizeAssignment[] = [];
  const moreUnits = (limit: number, mayStart: () => boolean) => {
    while (units.length < limit && mayStart()) {
      const u = engine.minimize.assign(w, jobs);
      if (u === null) return;
      units.push(u);
    }
  };
  moreUnits(free, () => engine.minimize.mayStart(fleetSlots));
  const chunks: Assignment[] = [];
  let last: PackedWant["last"] = null;
  while (chunks.length + units.length < free) {
    last = engine.assign(w);
    if (last.kind !== "chunk") break;
    chunks.push(last.assignment);
  }
  if (last?.kind === "idle") moreUnits(free - chunks.length, () => true);
  return { chunks, units, last };
}
