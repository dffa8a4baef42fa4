// The sweep's units at the wire's edge: a chunk or minimize unit as `assign` carries it to a
// worker, and the wire ids under which both ride in `assign`, `heartbeat`, `put` and `done`
// (net/messages.ts: minimizeWireId, heldUnit). The engine below speaks of chunk and unit ids only.
import { heldUnit, minimizeWireId, type AssignedChunk, type AssignedMinimize } from "../../net/messages.ts";
import type { SweepEngine, WorkerView } from "../engine/sweep-engine.ts";
import type { Assignment, MinimizeAssignment } from "../engine/sweep-types.ts";

export function wireChunk(a: Assignment): AssignedChunk {
  return {
    chunk_id: a.chunkId,
    lane: a.lane,
    seed_from: a.seedFrom,
    seed_to: a.seedTo,
    argv: a.argv,
    cwd: a.cwd,
    log_path: a.logPath,
    scratch_dir: a.scratchDir,
    hard_timeout: a.hardTimeoutSeconds,
    nice: a.nice,
    idle_io: a.idleIo,
  };
}

export function wireUnit(u: MinimizeAssignment): AssignedMinimize {
  return {
    unit_id: u.unitId,
    lane: u.lane,
    seeds: [...u.seeds],
    argv: u.argv,
    cwd: u.cwd,
    log_path: u.logPath,
    scratch_dir: u.scratchDir,
    hard_timeout: u.hardTimeoutSeconds,
    nice: u.nice,
    idle_io: u.idleIo,
  };
}

/** The wire ids of every chunk and minimize unit `w` holds. */
export function heldWireIds(engine: SweepEngine, w: WorkerView): number[] {
  return [...engine.heldBy(w).map((f) => f.chunkId), ...engine.minimize.heldBy(w).map((u) => minimizeWireId(u.unitId))];
}

/** Renews the lease of each unit named in `ids` (wire ids) that `w` holds; returns the ids it holds. */
export function heartbeatHeld(engine: SweepEngine, w: WorkerView, ids: readonly number[]): number[] {
  return ids.filter((id) => {
    const held = heldUnit(id);
    return held.kind === "chunk" ? engine.heartbeat(w, held.chunkId) : engine.minimize.heartbeat(w, held.unitId);
  });
}

/** How a unit named by its wire id reads in a log line. */
export function unitWords(wireId: number): string {
  const held = heldUnit(wireId);
  return held.kind === "chunk" ? `chunk ${held.chunkId}` : `minimize unit ${held.unitId}`;
}
