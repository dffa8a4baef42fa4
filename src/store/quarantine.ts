// quarantine_reason rows: per complete chunk, how many quarantined tests gave each reason, and
// whether the reason is inconclusive (no verdict, such as a reference build that ran too long)
// rather than an invalid test (the generator's own bug). Chunks recorded before reasons were
// kept have none: their quarantined tests are counted under "no reason recorded".
import { type Db, stmt } from "./db.ts";
import { countQuarantineReason, quarantineTally } from "./tallies.ts";
import { UNRECORDED_REASON, type QuarantineGroup, type QuarantineReason } from "./records.ts";
export { reasonList, UNRECORDED_REASON } from "./records.ts";
export type { QuarantineGroup, QuarantineReason } from "./records.ts";

/** Quarantined tests of a generation's complete chunks, per reason, most first. */
export function quarantineGroups(db: Db, generationId: number): QuarantineGroup[] {
  const rows = quarantineTally(db, generationId);
  const total = (
    stmt(db, "SELECT COALESCE(SUM(t.quarantine), 0) AS n FROM chunk_tally t JOIN lane l ON l.id = t.lane_id WHERE l.generation_id = ?").get(generationId) as { n: number }
  ).n;
  const groups = rows.map((r) => ({ reason: r.reason, inconclusive: r.inconclusive === 1, count: r.count }));
  const unrecorded = total - groups.reduce((n, g) => n + g.count, 0);
  if (unrecorded > 0) groups.push({ reason: UNRECORDED_REASON, inconclusive: false, count: unrecorded });
  return groups;
}

/** Quarantined tests of one session's complete chunks, per reason. */
export function sessionQuarantineGroups(db: Db, sessionId: number): QuarantineGroup[] {
  return (
    stmt(
      db,
      `SELECT q.reason AS reason, MAX(q.inconclusive) AS inconclusive, SUM(q.count) AS count
         FROM quarantine_reason q JOIN chunk c ON c.id = q.chunk_id
        WHERE c.session_id = ? AND c.status = 'complete'
        GROUP BY q.reason ORDER BY SUM(q.count) DESC, q.reason`,
    ).all(sessionId) as { reason: string; inconclusive: number; count: number }[]
  ).map((r) => ({ reason: r.reason, inconclusive: r.inconclusive === 1, count: r.count }));
}

/** Records the reasons of one chunk's quarantined tests (one row per reason; a reason saved again replaces its count). */
export function saveQuarantineReasons(db: Db, chunkId: number, reasons: readonly QuarantineReason[]): void {
  for (const r of reasons) {
    const before = stmt(db, "SELECT count FROM quarantine_reason WHERE chunk_id = ? AND reason = ?").get(chunkId, r.reason) as { count: number } | undefined;
    stmt(
      db,
      `INSERT INTO quarantine_reason (chunk_id, reason, inconclusive, count) VALUES (?, ?, ?, ?)
         ON CONFLICT (chunk_id, reason) DO UPDATE SET count = excluded.count, inconclusive = excluded.inconclusive`,
    ).run(chunkId, r.reason, r.inconclusive ? 1 : 0, r.count);
    countQuarantineReason(db, chunkId, r.reason, r.inconclusive, before?.count ?? 0, r.count);
  }
}
