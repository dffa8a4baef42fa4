// The views' aggregates, so that what a report costs grows with what it shows and not with the
// campaign's age: chunk_tally holds, per lane and app build, what the generation's chunks add up
// to (complete ones: chunks, seeds, seconds, finds, quarantined tests; the others: how many were
// aborted or reissued); lane_failure holds, per lane and failure, how many of the lane's seeds hit
// it (the incidences the when-to-stop estimate reads per lane). Both change in the statement that
// changes the row they sum (chunks.ts, failures.ts, minimize.ts), so inside the same transaction:
// a chunk leaving a status takes back what it added, and entering one adds, so booking the same
// chunk twice never counts it twice. rebuildTallies recomputes them from the rows (the migration
// that introduced them, and the repair of impossible ranges).
import { type Db, stmt } from "./statement.ts";
import { addChunkToHistory, rebuildHistory } from "./history.ts";
import type { ChunkTotals } from "./records.ts";

/** What a chunk row adds to the aggregates: its status decides where it counts. */
export interface ChunkFacts {
  lane_id: number;
  generation_id: number;
  app_build: string | null;
  status: string;
  seed_from: number;
  seed_to: number;
  seconds: number | null;
  finds: number | null;
  quarantine: number | null;
  started_at: string;
  ended_at: string | null;
}

export function chunkFacts(db: Db, chunkId: number): ChunkFacts | undefined {
  return stmt(
    db,
    `SELECT c.lane_id, l.generation_id, c.app_build, c.status, c.seed_from, c.seed_to, c.seconds, c.finds, c.quarantine, c.started_at, c.ended_at
       FROM chunk c JOIN lane l ON l.id = c.lane_id WHERE c.id = ?`,
  ).get(chunkId) as ChunkFacts | undefined;
}

/** Adds (sign 1) or takes back (sign -1) what one chunk row counts for. */
export function countChunk(db: Db, c: ChunkFacts, sign: 1 | -1): void {
  const complete = c.status === "complete";
  const aborted = c.status.startsWith("aborted") ? 1 : 0;
  const reissued = c.status === "reissued" ? 1 : 0;
  if (!complete && aborted + reissued === 0) return;
  const seeds = complete ? c.seed_to - c.seed_from + 1 : 0;
  stmt(
    db,
    `INSERT INTO chunk_tally (lane_id, app_build, chunks, seeds, seconds, finds, quarantine, aborted, reissued) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (lane_id, app_build) DO UPDATE SET chunks = chunks + excluded.chunks, seeds = seeds + excluded.seeds, seconds = seconds + excluded.seconds,
         finds = finds + excluded.finds, quarantine = quarantine + excluded.quarantine, aborted = aborted + excluded.aborted, reissued = reissued + excluded.reissued`,
  ).run(
    c.lane_id,
    c.app_build ?? "",
    complete ? sign : 0,
    sign * seeds,
    complete ? sign * (c.seconds ?? 0) : 0,
    complete ? sign * (c.finds ?? 0) : 0,
    complete ? sign * (c.quarantine ?? 0) : 0,
    sign * aborted,
    sign * reissued,
  );
  if (complete && c.ended_at !== null) {
    addChunkToHistory(db, c.generation_id, c.lane_id, Date.parse(c.started_at) / 1000, Date.parse(c.ended_at) / 1000, sign * seeds, sign * (c.finds ?? 0));
  }
}

/** A seed of `chunkId` (or, with none, of the failure's own lane) hit the failure for the first time. */
export function countLaneHit(db: Db, failureId: number, chunkId: number | null): void {
  stmt(
    db,
    `INSERT INTO lane_failure (lane_id, failure_id, hits)
       VALUES (COALESCE((SELECT lane_id FROM chunk WHERE id = ?), (SELECT lane_id FROM failure WHERE id = ?)), ?, 1)
       ON CONFLICT (lane_id, failure_id) DO UPDATE SET hits = hits + 1`,
  ).run(chunkId, failureId, failureId);
}

/** The failure's seeds moved elsewhere (a find merged into a distinct failure): it has no lane hits left. */
export function forgetLaneHits(db: Db, failureId: number): void {
  stmt(db, "DELETE FROM lane_failure WHERE failure_id = ?").run(failureId);
}

/** Per lane of a generation (retired ones included) and per app build: what its chunks add up to. */
export interface LaneTally extends ChunkTotals {
  lane_id: number;
  /** null: chunks that named no app build. */
  app_build: string | null;
  finds: number;
}

export function laneTallies(db: Db, generationId: number): LaneTally[] {
  return (
    stmt(
      db,
      `SELECT t.lane_id, t.app_build, t.chunks, t.seeds, t.seconds, t.finds, t.quarantine, t.aborted, t.reissued
         FROM chunk_tally t JOIN lane l ON l.id = t.lane_id WHERE l.generation_id = ? ORDER BY t.lane_id, t.app_build`,
    ).all(generationId) as (LaneTally & { app_build: string })[]
  ).map((t) => ({ ...t, app_build: t.app_build === "" ? null : t.app_build }));
}

/** The sum of tallies (any grouping of them). */
export function sumTallies(tallies: readonly ChunkTotals[]): ChunkTotals {
  const sum: ChunkTotals = { seeds: 0, seconds: 0, chunks: 0, aborted: 0, reissued: 0, quarantine: 0 };
  for (const t of tallies) {
    sum.seeds += t.seeds;
    sum.seconds += t.seconds;
    sum.chunks += t.chunks;
    sum.aborted += t.aborted;
    sum.reissued += t.reissued;
    sum.quarantine += t.quarantine;
  }
  return sum;
}

/**
 * Recomputes every aggregate from the rows: one pass over the chunks and one over the failure
 * seeds. For the migration that introduces them and for repairs; never on a view's path.
 */
export function rebuildTallies(db: Db): void {
  db.exec("DELETE FROM chunk_tally; DELETE FROM lane_failure; DELETE FROM quarantine_tally;");
  db.exec(`
    INSERT INTO chunk_tally (lane_id, app_build, chunks, seeds, seconds, finds, quarantine, aborted, reissued)
    SELECT lane_id, COALESCE(app_build, ''),
           SUM(status = 'complete'),
           COALESCE(SUM(CASE WHEN status = 'complete' THEN seed_to - seed_from + 1 END), 0),
           COALESCE(SUM(CASE WHEN status = 'complete' THEN seconds END), 0),
           COALESCE(SUM(CASE WHEN status = 'complete' THEN finds END), 0),
           COALESCE(SUM(CASE WHEN status = 'complete' THEN quarantine END), 0),
           SUM(status LIKE 'aborted%'),
           SUM(status = 'reissued')
      FROM chunk GROUP BY lane_id, COALESCE(app_build, '')`);
  db.exec(`
    INSERT INTO lane_failure (lane_id, failure_id, hits)
    SELECT COALESCE(c.lane_id, f.lane_id), fs.failure_id, COUNT(*)
      FROM failure_seed fs JOIN failure f ON f.id = fs.failure_id LEFT JOIN chunk c ON c.id = fs.chunk_id
     GROUP BY COALESCE(c.lane_id, f.lane_id), fs.failure_id`);
  db.exec(`
    INSERT INTO quarantine_tally (lane_id, reason, inconclusive, count)
    SELECT c.lane_id, q.reason, MAX(q.inconclusive), SUM(q.count)
      FROM quarantine_reason q JOIN chunk c ON c.id = q.chunk_id WHERE c.status = 'complete'
     GROUP BY c.lane_id, q.reason`);
  rebuildHistory(db);
}

/**
 * A chunk's count for one quarantine reason went from `before` to `after` (the reasons are saved
 * while the chunk is booked complete, in the same transaction).
 */
export function countQuarantineReason(db: Db, chunkId: number, reason: string, inconclusive: boolean, before: number, after: number): void {
  stmt(
    db,
    `INSERT INTO quarantine_tally (lane_id, reason, inconclusive, count) VALUES ((SELECT lane_id FROM chunk WHERE id = ?), ?, ?, ?)
       ON CONFLICT (lane_id, reason) DO UPDATE SET count = count + excluded.count, inconclusive = MAX(inconclusive, excluded.inconclusive)`,
  ).run(chunkId, reason, inconclusive ? 1 : 0, after - before);
}

/** Quarantined tests of a generation per reason, most first. */
export function quarantineTally(db: Db, generationId: number): { reason: string; inconclusive: number; count: number }[] {
  return stmt(
    db,
    `SELECT q.reason AS reason, MAX(q.inconclusive) AS inconclusive, SUM(q.count) AS count
       FROM quarantine_tally q JOIN lane l ON l.id = q.lane_id WHERE l.generation_id = ?
      GROUP BY q.reason HAVING SUM(q.count) > 0 ORDER BY SUM(q.count) DESC, q.reason`,
  ).all(generationId) as { reason: string; inconclusive: number; count: number }[];
}

/** What the when-to-stop estimate reads: distinct failures, and those hit by exactly one and two seeds. */
export interface IncidenceCounts {
  observed: number;
  singletons: number;
  doubletons: number;
}

/**
 * The generation's incidence counts, for the campaign (a failure's incidence: its hits) and per
 * lane (the hits from the lane's own seeds): one pass over the distinct failures and their lanes.
 */
export function incidenceCounts(db: Db, generationId: number): { campaign: IncidenceCounts; lanes: Map<number, IncidenceCounts> } {
  const campaign = stmt(
    db,
    `SELECT COUNT(*) AS observed, COALESCE(SUM(hits = 1), 0) AS singletons, COALESCE(SUM(hits = 2), 0) AS doubletons
       FROM failure WHERE generation_id = ? AND minimize_state IS NULL AND hits > 0`,
  ).get(generationId) as IncidenceCounts;
  const rows = stmt(
    db,
    `SELECT lf.lane_id AS lane_id, COUNT(*) AS observed, COALESCE(SUM(lf.hits = 1), 0) AS singletons, COALESCE(SUM(lf.hits = 2), 0) AS doubletons
       FROM lane_failure lf JOIN failure f ON f.id = lf.failure_id
      WHERE f.generation_id = ? AND f.minimize_state IS NULL AND lf.hits > 0 GROUP BY lf.lane_id`,
  ).all(generationId) as (IncidenceCounts & { lane_id: number })[];
  return { campaign, lanes: new Map(rows.map(({ lane_id, ...c }) => [lane_id, c])) };
}
