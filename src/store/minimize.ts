// Minimize units: the second kind of unit besides chunks. One unit runs `[generator] minimize`
// over a few finds pending minimization of one lane; its rows say who ran it and how it ended
// (running | leased -> complete | aborted:<why> | reissued). minimize_find lists the finds it
// was given. A find is handed to one unit at a time (minimize_state 'running') and booked once:
// 'done' (merged into a distinct failure) or 'failed' are final, and a unit that never reported
// (its process died) gives its finds back as 'pending' at the next start.
import { type Db, isoNow, stmt } from "./db.ts";
import { addFailureSeed, DISTINCT, failureById, reopenFailure } from "./failures.ts";
import { addDistinctToHistory } from "./history.ts";
import { forgetLaneHits } from "./tallies.ts";
import type { PendingFind, MinimizeUnitRow, MinimizeProgress } from "./records.ts";
export type { PendingFind, MinimizeUnitRow, MinimizeProgress } from "./records.ts";

/**
 * Up to `limit` finds pending minimization of one lane: first those whose signature has no
 * distinct failure yet (the first of each signature is worth the most), then the oldest.
 */
export function nextPendingFinds(db: Db, generationId: number, laneIds: readonly number[], limit: number): PendingFind[] {
  if (laneIds.length === 0 || limit <= 0) return [];
  const lanes = laneIds.map(() => "?").join(", ");
  const first = stmt(
    db,
    `SELECT f.id, f.lane_id, f.first_seed, f.signature,
            EXISTS (SELECT 1 FROM failure d WHERE d.generation_id = f.generation_id AND d.signature = f.signature AND d.${DISTINCT}) AS known
       FROM failure f
      WHERE f.generation_id = ? AND f.state = 'open' AND f.minimize_state = 'pending' AND f.lane_id IN (${lanes})
      ORDER BY known, f.id
      LIMIT 1`,
  ).get(generationId, ...laneIds) as (PendingFind & { known: number }) | undefined;
  if (!first) return [];
  // One lane per unit: the lane's args decide what its seeds mean.
  const rest = stmt(
    db,
    `SELECT f.id, f.lane_id, f.first_seed, f.signature,
            EXISTS (SELECT 1 FROM failure d WHERE d.generation_id = f.generation_id AND d.signature = f.signature AND d.${DISTINCT}) AS known
       FROM failure f
      WHERE f.generation_id = ? AND f.state = 'open' AND f.minimize_state = 'pending' AND f.lane_id = ? AND f.id != ?
      ORDER BY known, f.id
      LIMIT ?`,
  ).all(generationId, first.lane_id, first.id, limit - 1) as (PendingFind & { known: number })[];
  // At most one find per signature while other signatures wait: breadth before depth.
  const seen = new Set<string | null>([first.signature]);
  const picked: PendingFind[] = [first];
  for (const r of rest) {
    if (seen.has(r.signature) && r.known === 0) continue;
    seen.add(r.signature);
    picked.push(r);
  }
  return picked.map(({ id, lane_id, first_seed, signature }) => ({ id, lane_id, first_seed, signature }));
}

export function insertMinimizeUnit(db: Db, u: { sessionId: number; laneId: number; workerId: number | null; findIds: readonly number[]; status: "running" | "leased" }): number {
  const info = stmt(db, "INSERT INTO minimize_unit (session_id, lane_id, worker_id, finds, started_at, status) VALUES (?, ?, ?, ?, ?, ?)").run(
    u.sessionId,
    u.laneId,
    u.workerId,
    u.findIds.length,
    isoNow(),
    u.status,
  );
  const unitId = Number(info.lastInsertRowid);
  for (const id of u.findIds) {
    stmt(db, "INSERT INTO minimize_find (unit_id, failure_id) VALUES (?, ?)").run(unitId, id);
    stmt(db, "UPDATE failure SET minimize_state = 'running' WHERE id = ? AND minimize_state = 'pending'").run(id);
  }
  return unitId;
}

/** The ids of the minimize units a session handed out. */
export function sessionUnitIds(db: Db, sessionId: number): number[] {
  return (stmt(db, "SELECT id FROM minimize_unit WHERE session_id = ?").all(sessionId) as { id: number }[]).map((r) => r.id);
}

export function getMinimizeUnit(db: Db, unitId: number): MinimizeUnitRow | undefined {
  return stmt(db, "SELECT id, session_id, lane_id, worker_id, status FROM minimize_unit WHERE id = ?").get(unitId) as MinimizeUnitRow | undefined;
}

/** The finds a unit was given that it still holds ('running'), with their seeds. */
export function unitFinds(db: Db, unitId: number): { id: number; seed: number }[] {
  return stmt(
    db,
    `SELECT f.id AS id, f.first_seed AS seed FROM minimize_find m JOIN failure f ON f.id = m.failure_id
      WHERE m.unit_id = ? AND f.minimize_state = 'running' ORDER BY f.first_seed`,
  ).all(unitId) as { id: number; seed: number }[];
}

export function markUnitEnded(db: Db, unitId: number, status: string, seconds: number | null, counts: { merged: number; newFailures: number; failed: number }): void {
  stmt(db, "UPDATE minimize_unit SET status = ?, ended_at = ?, seconds = ?, merged = ?, new_failures = ?, failed = ? WHERE id = ?").run(
    status,
    isoNow(),
    seconds,
    counts.merged,
    counts.newFailures,
    counts.failed,
    unitId,
  );
}

/** A unit that did not complete gives its finds back: they are minimized by a later unit. */
export function releaseUnitFinds(db: Db, unitId: number): number {
  return stmt(
    db,
    `UPDATE failure SET minimize_state = 'pending'
      WHERE minimize_state = 'running' AND id IN (SELECT failure_id FROM minimize_find WHERE unit_id = ?)`,
  ).run(unitId).changes;
}

/**
 * At the start of a session (the campaign lock held): units still in flight belong to a process
 * that died. They become aborted:lost and their finds pending again. Returns how many finds.
 */
export function releaseLostUnits(db: Db): number {
  stmt(db, "UPDATE minimize_unit SET status = 'aborted:lost' WHERE status IN ('running', 'leased')").run();
  return stmt(db, "UPDATE failure SET minimize_state = 'pending' WHERE minimize_state = 'running'").run().changes;
}

/** The minimizer gave no minimized input for the find: final, it stays grouped under its signature. */
export function markFindFailed(db: Db, findId: number, note: string): void {
  stmt(db, "UPDATE failure SET minimize_state = 'failed', minimize_note = ? WHERE id = ? AND minimize_state = 'running'").run(note, findId);
}

/**
 * The find was minimized into the distinct failure `targetId`: its seeds move there (hits counted
 * once), the find becomes 'done' with no hits of its own, and a fixed target hit again reopens.
 * Returns whether the target was fixed (a regression).
 */
export function mergeFind(db: Db, findId: number, targetId: number): boolean {
  const target = failureById(db, targetId)!;
  const seeds = stmt(db, "SELECT seed, chunk_id FROM failure_seed WHERE failure_id = ?").all(findId) as { seed: number; chunk_id: number | null }[];
  if (findId !== targetId) {
    for (const s of seeds) addFailureSeed(db, targetId, s.seed, s.chunk_id);
    stmt(db, "DELETE FROM failure_seed WHERE failure_id = ?").run(findId);
    forgetLaneHits(db, findId);
    stmt(db, "UPDATE failure SET hits = 0, minimize_state = 'done', merged_into = ?, minimize_note = NULL WHERE id = ?").run(targetId, findId);
  }
  if (target.state === "fixed") reopenFailure(db, targetId);
  return target.state === "fixed";
}

/** A pending find whose own input turned out minimal: it becomes the distinct failure itself. */
export function promoteFind(db: Db, findId: number): void {
  const find = failureById(db, findId);
  stmt(db, "UPDATE failure SET shrunk = 1, minimize_state = NULL, minimize_note = NULL WHERE id = ?").run(findId);
  // It counts among the distinct failures from when it was first seen, as one found minimal would.
  if (find && find.minimize_state !== null) addDistinctToHistory(db, find.generation_id, find.first_seen, 1);
}

export function minimizeProgress(db: Db, generationId: number): MinimizeProgress {
  const f = stmt(
    db,
    `SELECT COALESCE(SUM(minimize_state = 'pending'), 0) AS pending, COALESCE(SUM(minimize_state = 'running'), 0) AS running,
            COALESCE(SUM(minimize_state = 'failed'), 0) AS failed, COALESCE(SUM(minimize_state = 'done'), 0) AS done
       FROM failure WHERE generation_id = ? AND state = 'open'`,
  ).get(generationId) as Omit<MinimizeProgress, "units" | "unit_seconds">;
  const u = stmt(
    db,
    `SELECT COUNT(*) AS units, COALESCE(SUM(u.seconds), 0) AS unit_seconds
       FROM minimize_unit u JOIN lane l ON l.id = u.lane_id WHERE l.generation_id = ? AND u.status = 'complete'`,
  ).get(generationId) as { units: number; unit_seconds: number };
  return { ...f, ...u };
}
