// failure rows: one per distinct finding of a generation, keyed by the dedup key
// (SHA-256 of bucket + "\n" + minimized input). failure_seed is the source of truth for hits:
// hits = number of distinct (failure, seed) rows, so re-sweeping a range never inflates it.
//
// Two levels of identity: every row carries its signature (src/store/signature.ts), which groups
// finds at once; the dedup key splits a signature into distinct failures. A row whose input was
// not minimized (minimize_state not NULL) is not a distinct failure but a find *pending
// minimization*: 'pending' (waiting), 'running' (a minimize unit holds it), 'failed' (the
// minimizer gave no minimized input; it stays grouped under its signature) or 'done' (minimized:
// its seeds moved to the distinct failure merged_into, and the row itself counts for nothing).
//
// State: open -> fixed (resweep: every re-checked seed passed) -> open again (reopenFailure: a
// sweep hit it, a regression); open -> stale (its generation ended; final).
import { type Db, isoNow, stmt } from "./db.ts";
import { addDistinctToHistory } from "./history.ts";
import { countLaneHit } from "./tallies.ts";
import type { FailureState, FailureRow, MinimizeState, NewFailure, SeedLane, FailureFilter, FailureListRow, FailureGroup, PendingGroup } from "./records.ts";
export { FAILURE_STATES } from "./records.ts";
export type { FailureState, FailureRow, MinimizeState, NewFailure, SeedLane, FailureFilter, FailureListRow, FailureGroup, PendingGroup } from "./records.ts";

/** SQL: the row is a distinct failure (its input minimized), not a find pending minimization. */
export const DISTINCT = "minimize_state IS NULL";
/** SQL: the row is a find still pending minimization (waiting, running, or the minimizer failed). */
export const PENDING = "minimize_state IN ('pending', 'running', 'failed')";

export function failureByKey(db: Db, generationId: number, dedupKey: string): FailureRow | undefined {
  return stmt(db, "SELECT * FROM failure WHERE generation_id = ? AND dedup_key = ?").get(generationId, dedupKey) as
    | FailureRow
    | undefined;
}

export function failureById(db: Db, id: number): FailureRow | undefined {
  return stmt(db, "SELECT * FROM failure WHERE id = ?").get(id) as FailureRow | undefined;
}

/**
 * Inserts a failure with hits = 0; the first addFailureSeed makes it 1. An unshrunk one is a
 * find pending minimization, not a distinct failure.
 */
export function insertFailure(db: Db, f: NewFailure): number {
  const now = isoNow();
  const info = stmt(
    db,
    `INSERT INTO failure (generation_id, lane_id, dedup_key, bucket, first_seed, shrunk, message, repro, artifact_dir,
                          first_seen, last_seen, first_app_build, last_app_build, hits, state, signature, minimize_state)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 'open', ?, ?)`,
  ).run(
    f.generationId,
    f.laneId,
    f.dedupKey,
    f.bucket,
    f.seed,
    f.shrunk ? 1 : 0,
    f.message,
    f.repro,
    f.artifactDir,
    now,
    now,
    f.appBuild,
    f.appBuild,
    f.signature,
    f.shrunk ? null : "pending",
  );
  if (f.shrunk) addDistinctToHistory(db, f.generationId, now, 1);
  return Number(info.lastInsertRowid);
}

/** Whether any failure of the generation (distinct or pending minimization) carries this signature. */
export function signatureSeen(db: Db, generationId: number, signature: string): boolean {
  return stmt(db, "SELECT 1 FROM failure WHERE generation_id = ? AND signature = ? LIMIT 1").get(generationId, signature) !== undefined;
}

/**
 * Records that `seed` hit the failure. Returns true only if this (failure, seed) pair is new; then
 * the failure was last seen now, under the build of the chunk that recorded it (when known).
 */
export function addFailureSeed(db: Db, failureId: number, seed: number, chunkId: number | null): boolean {
  const info = stmt(db, "INSERT OR IGNORE INTO failure_seed (failure_id, seed, chunk_id) VALUES (?, ?, ?)").run(failureId, seed, chunkId);
  if (info.changes === 0) return false;
  stmt(
    db,
    `UPDATE failure SET hits = hits + 1, last_seen = ?,
            last_app_build = CASE WHEN ? IS NULL THEN last_app_build ELSE (SELECT app_build FROM chunk WHERE id = ?) END WHERE id = ?`,
  ).run(isoNow(), chunkId, chunkId, failureId);
  countLaneHit(db, failureId, chunkId);
  return true;
}

/** The seeds that hit a failure, lowest first; at most `limit` of them. */
export function failureSeeds(db: Db, failureId: number, limit = -1): number[] {
  return (stmt(db, "SELECT seed FROM failure_seed WHERE failure_id = ? ORDER BY seed LIMIT ?").all(failureId, limit) as { seed: number }[]).map(
    (r) => r.seed,
  );
}

export function markFailureFixed(db: Db, failureId: number, appBuild: string | null): void {
  stmt(db, "UPDATE failure SET state = 'fixed', resolved_at = ?, resolved_app_build = ? WHERE id = ?").run(isoNow(), appBuild, failureId);
}

/** A fixed failure that was hit again: back to open, its resolution cleared. */
export function reopenFailure(db: Db, failureId: number): void {
  stmt(db, "UPDATE failure SET state = 'open', resolved_at = NULL, resolved_app_build = NULL WHERE id = ? AND state = 'fixed'").run(failureId);
}

/**
 * The lowest `limit` seeds that hit a failure, each with the lane that produced it: a seed only
 * means the same test under the args of the lane that swept it.
 */
export function failureSeedLanes(db: Db, failureId: number, limit: number): SeedLane[] {
  return stmt(
    db,
    `SELECT fs.seed AS seed, COALESCE(cl.params_json, fl.params_json) AS lane_params
       FROM failure_seed fs
       JOIN failure f ON f.id = fs.failure_id
       JOIN lane fl ON fl.id = f.lane_id
       LEFT JOIN chunk c ON c.id = fs.chunk_id
       LEFT JOIN lane cl ON cl.id = c.lane_id
      WHERE fs.failure_id = ?
      ORDER BY fs.seed
      LIMIT ?`,
  ).all(failureId, limit) as SeedLane[];
}

/** The failure was seen again now (a re-check still fails), under `appBuild` when given. */
export function touchFailure(db: Db, failureId: number, appBuild?: string | null): void {
  if (appBuild === undefined) stmt(db, "UPDATE failure SET last_seen = ? WHERE id = ?").run(isoNow(), failureId);
  else stmt(db, "UPDATE failure SET last_seen = ?, last_app_build = ? WHERE id = ?").run(isoNow(), appBuild, failureId);
}

/**
 * The distinct failures, ordered by state, bucket, then hits descending (ties by id); with `page`,
 * only that slice of the order (what a view shows, whatever the number of failures).
 */
export function listFailures(db: Db, filter: FailureFilter, page?: { limit: number; offset: number }): FailureListRow[] {
  const { where, args } = distinctWhere(filter);
  const sql = `SELECT f.*, l.name AS lane_name, l.params_json AS lane_params FROM failure f JOIN lane l ON l.id = f.lane_id
                WHERE ${where.join(" AND ")}
                ORDER BY CASE f.state WHEN 'open' THEN 0 WHEN 'fixed' THEN 1 ELSE 2 END, f.bucket, f.hits DESC, f.id
                ${page ? "LIMIT ? OFFSET ?" : ""}`;
  return stmt(db, sql).all(...args, ...(page ? [page.limit, page.offset] : [])) as FailureListRow[];
}

/** How many distinct failures the filter selects, their hits, and how many in each state. */
export function countFailures(db: Db, filter: FailureFilter): { distinct: number; hits: number; byState: Record<string, number> } {
  const { where, args } = distinctWhere(filter);
  const rows = stmt(db, `SELECT f.state AS state, COUNT(*) AS n, COALESCE(SUM(f.hits), 0) AS hits FROM failure f WHERE ${where.join(" AND ")} GROUP BY f.state`).all(
    ...args,
  ) as { state: string; n: number; hits: number }[];
  return { distinct: rows.reduce((n, r) => n + r.n, 0), hits: rows.reduce((n, r) => n + r.hits, 0), byState: Object.fromEntries(rows.map((r) => [r.state, r.n])) };
}

function distinctWhere(filter: FailureFilter): { where: string[]; args: (string | number)[] } {
  const where: string[] = [`f.${DISTINCT}`];
  const args: (string | number)[] = [];
  if (filter.id != null) {
    where.push("f.id = ?");
    args.push(filter.id);
  } else {
    scopeClauses(filter, where, args);
    if (filter.signature != null) {
      where.push("f.signature = ?");
      args.push(filter.signature);
    }
  }
  return { where, args };
}

/** Distinct failures per state and bucket. */
export function failureGroups(db: Db, generationId: number): FailureGroup[] {
  return stmt(
    db,
    `SELECT state, bucket, COUNT(*) AS distinct_, SUM(hits) AS hits FROM failure WHERE generation_id = ? AND ${DISTINCT}
      GROUP BY state, bucket
      ORDER BY CASE state WHEN 'open' THEN 0 WHEN 'fixed' THEN 1 ELSE 2 END, COUNT(*) DESC, bucket`,
  )
    .all(generationId)
    .map((r) => {
      const row = r as { state: FailureState; bucket: string; distinct_: number; hits: number };
      return { state: row.state, bucket: row.bucket, distinct: row.distinct_, hits: row.hits };
    });
}

export function staleFailureCount(db: Db): number {
  return (stmt(db, "SELECT COUNT(*) AS n FROM failure WHERE state = 'stale'").get() as { n: number }).n;
}

/** Open distinct failures and open finds pending minimization. */
export function openFailureCount(db: Db, generationId: number): number {
  return (
    stmt(db, `SELECT COUNT(*) AS n FROM failure WHERE generation_id = ? AND state = 'open' AND (${DISTINCT} OR ${PENDING})`).get(generationId) as {
      n: number;
    }
  ).n;
}

/** Finds pending minimization, grouped by state, bucket and signature; most finds first. */
export function pendingGroups(db: Db, filter: FailureFilter): PendingGroup[] {
  const where = [`f.${PENDING}`];
  const args: (string | number)[] = [];
  scopeClauses(filter, where, args);
  return stmt(
    db,
    `SELECT f.state, f.bucket, COALESCE(f.signature, f.bucket) AS signature, COUNT(*) AS finds, SUM(f.hits) AS hits,
            SUM(f.minimize_state = 'running') AS running, SUM(f.minimize_state = 'failed') AS failed,
            MIN(f.first_seed) AS first_seed, MIN(l.name) AS lane_name,
            (SELECT COUNT(*) FROM failure d WHERE d.generation_id = f.generation_id AND d.signature = f.signature AND d.${DISTINCT}) AS distinct_
       FROM failure f JOIN lane l ON l.id = f.lane_id
      WHERE ${where.join(" AND ")}
      GROUP BY f.generation_id, f.state, f.bucket, f.signature
      ORDER BY CASE f.state WHEN 'open' THEN 0 WHEN 'fixed' THEN 1 ELSE 2 END, COUNT(*) DESC, f.bucket, f.signature`,
  )
    .all(...args)
    .map((r) => {
      const { distinct_, ...rest } = r as Omit<PendingGroup, "distinct"> & { distinct_: number };
      return { ...rest, distinct: distinct_ };
    });
}

/** The finds pending minimization in `filter` and their hits: one pass over them, no grouping. */
export function pendingTotals(db: Db, filter: FailureFilter): { finds: number; hits: number } {
  const where = [`f.${PENDING}`];
  const args: (string | number)[] = [];
  scopeClauses(filter, where, args);
  return stmt(db, `SELECT COUNT(*) AS finds, COALESCE(SUM(f.hits), 0) AS hits FROM failure f WHERE ${where.join(" AND ")}`).get(...args) as { finds: number; hits: number };
}

/** The WHERE clauses of a filter's state, bucket and generation, shared by distinct failures and pending finds. */
function scopeClauses(filter: FailureFilter, where: string[], args: (string | number)[]): void {
  if (filter.state !== "all") {
    where.push("f.state = ?");
    args.push(filter.state);
  }
  if (filter.bucket) {
    where.push("f.bucket = ?");
    args.push(filter.bucket);
  }
  if (filter.generationId != null) {
    where.push("f.generation_id = ?");
    args.push(filter.generationId);
  }
}

