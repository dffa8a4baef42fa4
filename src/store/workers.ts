// worker and worker_rate rows: who was attached to a distributed session, and what each host
// measured per lane (a 4-core laptop and a 32-core box cannot share an estimate).
import { type Db, isoNow, stmt } from "./db.ts";
import type { NewWorker } from "./records.ts";
export type { NewWorker } from "./records.ts";

export function insertWorker(db: Db, w: NewWorker): number {
  const now = isoNow();
  const info = stmt(
    db,
    `INSERT INTO worker (session_id, host, addr, jobs, gen_hash, app_build, connected_at, last_seen, state, files)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'live', ?)`,
  ).run(w.sessionId, w.host, w.addr, w.jobs, w.genHash, w.appBuild, now, now, w.files ?? "shared");
  return Number(info.lastInsertRowid);
}

export function markWorkerGone(db: Db, workerId: number): void {
  stmt(db, "UPDATE worker SET state = 'gone', disconnected_at = ? WHERE id = ?").run(isoNow(), workerId);
}

export function touchWorker(db: Db, workerId: number): void {
  stmt(db, "UPDATE worker SET last_seen = ? WHERE id = ?").run(isoNow(), workerId);
}

export function upsertWorkerRate(db: Db, workerId: number, laneId: number, seedsPerSec: number): void {
  stmt(
    db,
    `INSERT INTO worker_rate (worker_id, lane_id, seeds_per_sec) VALUES (?, ?, ?)
     ON CONFLICT (worker_id, lane_id) DO UPDATE SET seeds_per_sec = excluded.seeds_per_sec`,
  ).run(workerId, laneId, seedsPerSec);
}

/**
 * Rates measured by earlier workers of the same host with the same -j, newest first, keyed by
 * lane name (matched across generations): a reconnecting host does not bootstrap again, but a
 * host that comes back with a different -j is a different measurement.
 */
export function earlierRates(db: Db, host: string, jobs: number, beforeWorkerId: number): Map<string, number> {
  const rows = stmt(
    db,
    `SELECT l.name AS lane, r.seeds_per_sec AS rate
       FROM worker_rate r JOIN worker w ON w.id = r.worker_id JOIN lane l ON l.id = r.lane_id
      WHERE w.host = ? AND w.jobs = ? AND w.id < ? AND r.seeds_per_sec IS NOT NULL
      ORDER BY w.id DESC`,
  ).all(host, jobs, beforeWorkerId) as { lane: string; rate: number }[];
  const rates = new Map<string, number>();
  for (const r of rows) if (!rates.has(r.lane)) rates.set(r.lane, r.rate);
  return rates;
}
