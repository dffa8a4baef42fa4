// The read-only queries behind a sweep's dashboard, its metrics and its static report: finds per
// lane and the totals of complete chunks (from their aggregates, tallies.ts), the timed chunks and first sightings the plots are drawn
// from, and each worker of a session with the chunks it holds. Nothing here writes.
import { stmt, type Db } from "./db.ts";
import type { TimedChunk, HeldChunk, SessionWorker } from "./records.ts";
export type { TimedChunk, HeldChunk, SessionWorker } from "./records.ts";

/** Failing seeds found by each lane's complete chunks, by lane id. */
export function findsByLane(db: Db): Map<number, number> {
  const rows = stmt(db, "SELECT lane_id, SUM(finds) AS finds FROM chunk_tally GROUP BY lane_id").all() as { lane_id: number; finds: number }[];
  return new Map(rows.map((r) => [r.lane_id, r.finds]));
}

/** Complete chunks of a generation and the finds they recorded. */
export function completeTotals(db: Db, generationId: number): { chunks: number; finds: number } {
  return stmt(
    db,
    `SELECT COALESCE(SUM(t.chunks), 0) AS chunks, COALESCE(SUM(t.finds), 0) AS finds FROM chunk_tally t JOIN lane l ON l.id = t.lane_id WHERE l.generation_id = ?`,
  ).get(generationId) as { chunks: number; finds: number };
}

/** Complete chunks of one generation's lanes, retired lanes included (their work happened), in id order. */
export function completeTimedChunks(db: Db, generationId: number): TimedChunk[] {
  return stmt(
    db,
    `SELECT l.name AS lane, c.started_at AS started_at, c.ended_at AS ended_at, c.seed_to - c.seed_from + 1 AS seeds, c.finds AS finds
       FROM chunk c JOIN lane l ON l.id = c.lane_id
      WHERE l.generation_id = ? AND c.status = 'complete' AND c.ended_at IS NOT NULL
      ORDER BY c.id`,
  ).all(generationId) as TimedChunk[];
}

/** When each distinct failure of a generation was first seen, earliest first. */
export function failureFirstSeen(db: Db, generationId: number): string[] {
  return (stmt(db, "SELECT first_seen FROM failure WHERE generation_id = ? ORDER BY first_seen").all(generationId) as { first_seen: string }[]).map((r) => r.first_seen);
}

/** The workers of one session, in the order they joined, each with the chunks it holds. */
export function sessionWorkers(db: Db, sessionId: number): SessionWorker[] {
  const workers = stmt(
    db,
    "SELECT id, host, jobs, state, connected_at, last_seen, disconnected_at, files FROM worker WHERE session_id = ? ORDER BY id",
  ).all(sessionId) as Omit<SessionWorker, "chunks">[];
  if (workers.length === 0) return [];
  const held = stmt(
    db,
    `SELECT c.worker_id AS worker_id, c.id AS id, l.name AS lane, c.seed_from AS seed_from, c.seed_to AS seed_to, c.status AS status,
            c.started_at AS started_at, c.leased_at AS leased_at, c.last_heartbeat AS last_heartbeat
       FROM chunk c JOIN lane l ON l.id = c.lane_id
      WHERE c.session_id = ? AND c.status IN ('running', 'leased') AND c.worker_id IS NOT NULL
      ORDER BY c.id`,
  ).all(sessionId) as (HeldChunk & { worker_id: number })[];
  const by = new Map<number, HeldChunk[]>();
  for (const { worker_id, ...c } of held) by.set(worker_id, [...(by.get(worker_id) ?? []), c]);
  return workers.map((w) => ({ ...w, chunks: by.get(w.id) ?? [] }));
}
