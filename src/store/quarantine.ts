// quarantine_reason rows: per complete chunk, how many quarantined tests gave each reason, and
// whether the reason is inconclusive (no verdict, such as a reference build that ran too long)
// rather than an invalid test (the generator's own bug). Chunks recorded before reasons were
// kept have none: their quarantined tests are counted under "no reason recorded".
import { type Db, stmt } from "./db.ts";

export interface QuarantineGroup {
  reason: string;
  inconclusive: boolean;
  count: number;
}

export const UNRECORDED_REASON = "no reason recorded";

/** Quarantined tests of a generation's complete chunks, per reason, most first. */
export function quarantineGroups(db: Db, generationId: number): QuarantineGroup[] {
  const rows = stmt(
    db,
    `SELECT q.reason AS reason, MAX(q.inconclusive) AS inconclusive, SUM(q.count) AS count
       FROM quarantine_reason q JOIN chunk c ON c.id = q.chunk_id JOIN lane l ON l.id = c.lane_id
      WHERE l.generation_id = ? AND c.status = 'complete'
      GROUP BY q.reason ORDER BY SUM(q.count) DESC, q.reason`,
  ).all(generationId) as { reason: string; inconclusive: number; count: number }[];
  const total = (
    stmt(
      db,
      `SELECT COALESCE(SUM(c.quarantine), 0) AS n FROM chunk c JOIN lane l ON l.id = c.lane_id WHERE l.generation_id = ? AND c.status = 'complete'`,
    ).get(generationId) as { n: number }
  ).n;
  const groups = rows.map((r) => ({ reason: r.reason, inconclusive: r.inconclusive === 1, count: r.count }));
  const unrecorded = total - groups.reduce((n, g) => n + g.count, 0);
  if (unrecorded > 0) groups.push({ reason: UNRECORDED_REASON, inconclusive: false, count: unrecorded });
  return groups;
}

/** The groups as one line: "reference binary ran over 10 s: 25, invalid op: 3". */
export function reasonList(groups: readonly QuarantineGroup[]): string {
  return groups.map((g) => `${g.reason}: ${g.count}`).join(", ");
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
