// lane rows: a lane's cursor is its coverage, [base_seed, cursor). A lane whose identity
// (args + base_seed) changes is retired and replaced by a fresh row, so old chunk rows can never
// be re-absorbed into the new lane's coverage.
import type { ChunkRow } from "../core/lane-state.ts";
import { mergeRanges, totalSize, type Range } from "../core/ranges.ts";
import { type Db, isoNow, stmt } from "./db.ts";
import type { LaneRow } from "./records.ts";
export type { LaneRow } from "./records.ts";

export function activeLane(db: Db, generationId: number, name: string): LaneRow | undefined {
  return stmt(db, "SELECT * FROM lane WHERE generation_id = ? AND name = ? AND retired = 0 ORDER BY id DESC LIMIT 1").get(
    generationId,
    name,
  ) as LaneRow | undefined;
}

export function activeLanes(db: Db, generationId: number): LaneRow[] {
  return stmt(db, "SELECT * FROM lane WHERE generation_id = ? AND retired = 0 ORDER BY id").all(generationId) as LaneRow[];
}

export function insertLane(db: Db, generationId: number, name: string, paramsJson: string, baseSeed: number): number {
  const info = stmt(
    db,
    `INSERT INTO lane (generation_id, name, params_json, base_seed, cursor, seeds_per_sec, retired, created_at)
     VALUES (?, ?, ?, ?, ?, NULL, 0, ?)`,
  ).run(generationId, name, paramsJson, baseSeed, baseSeed, isoNow());
  return Number(info.lastInsertRowid);
}

/**
 * Starts lane `name` afresh at `baseSeed`: retires `previousId` (when there is one) and inserts a
 * new row, in one transaction, so the old chunk rows can never count toward the new cursor.
 * Returns the new lane's id.
 */
export function restartLane(db: Db, previousId: number | null, generationId: number, name: string, paramsJson: string, baseSeed: number): number {
  return db.transaction(() => {
    if (previousId !== null) retireLane(db, previousId);
    return insertLane(db, generationId, name, paramsJson, baseSeed);
  })();
}

export function retireLane(db: Db, laneId: number): void {
  stmt(db, "UPDATE lane SET retired = 1 WHERE id = ?").run(laneId);
}

export function saveCursor(db: Db, laneId: number, cursor: number): void {
  stmt(db, "UPDATE lane SET cursor = ? WHERE id = ?").run(cursor, laneId);
}

/** Cursor and rate in one statement: what every completed chunk changes. */
export function saveLaneProgress(db: Db, laneId: number, cursor: number, seedsPerSec: number | null): void {
  stmt(db, "UPDATE lane SET cursor = ?, seeds_per_sec = ? WHERE id = ?").run(cursor, seedsPerSec, laneId);
}

export function saveLaneRate(db: Db, laneId: number, seedsPerSec: number | null): void {
  stmt(db, "UPDATE lane SET seeds_per_sec = ? WHERE id = ?").run(seedsPerSec, laneId);
}

/** Every chunk row of a lane, any session and status: the input of LaneState.recover. */
export function laneChunkRows(db: Db, laneId: number): ChunkRow[] {
  return stmt(db, "SELECT seed_from AS seedFrom, seed_to AS seedTo, status FROM chunk WHERE lane_id = ?").all(laneId) as ChunkRow[];
}

/** Size of the lane's most recent complete chunk (any session), the 3x cap of chunk sizing. */
export function lastCompleteCount(db: Db, laneId: number): number | null {
  const row = stmt(db, "SELECT seed_to - seed_from + 1 AS n FROM chunk WHERE lane_id = ? AND status = 'complete' ORDER BY id DESC LIMIT 1").get(
    laneId,
  ) as { n: number } | undefined;
  return row ? row.n : null;
}

/**
 * Seeds in complete chunks at or above the cursor: shown as "done ahead", never counted as
 * coverage. Complete chunks may overlap (a late finisher of a reissued chunk and the chunk that
 * re-swept its range), so each seed is counted once.
 */
export function doneAheadOfCursor(db: Db, laneId: number, cursor: number): number {
  return distinctSeeds(
    stmt(db, "SELECT seed_from, seed_to FROM chunk WHERE lane_id = ? AND status = 'complete' AND seed_to >= ?").all(laneId, cursor) as RangeRow[],
    cursor,
  );
}

/** Distinct seeds swept by complete chunks of one lane. */
export function laneSeedsSwept(db: Db, laneId: number): number {
  return distinctSeeds(stmt(db, "SELECT seed_from, seed_to FROM chunk WHERE lane_id = ? AND status = 'complete'").all(laneId) as RangeRow[]);
}

/**
 * Distinct seeds swept by complete chunks of one lane, read without its chunks below the cursor:
 * every seed there lies in a complete chunk (the coverage invariant), so the lane's covered prefix
 * plus what was done ahead of it is the same count laneSeedsSwept merges every range for.
 */
export function laneSeedsCovered(db: Db, laneId: number): number {
  const lane = stmt(db, "SELECT base_seed, cursor FROM lane WHERE id = ?").get(laneId) as { base_seed: number; cursor: number } | undefined;
  return lane ? lane.cursor - lane.base_seed + doneAheadOfCursor(db, laneId, lane.cursor) : 0;
}

/** The same over every lane of a generation, retired ones included. */
export function generationSeedsCovered(db: Db, generationId: number): number {
  const lanes = stmt(db, "SELECT id FROM lane WHERE generation_id = ?").all(generationId) as { id: number }[];
  return lanes.reduce((n, lane) => n + laneSeedsCovered(db, lane.id), 0);
}

interface RangeRow {
  seed_from: number;
  seed_to: number;
}

/** How many distinct seeds at or above `from` the ranges hold. */
export function distinctSeeds(rows: readonly RangeRow[], from = -Infinity): number {
  return totalSize(mergeRanges(rows.filter((r) => r.seed_to >= from).map((r): Range => [Math.max(r.seed_from, from), r.seed_to])));
}

/**
 * Clamps lane cursors stored past `limit` (one past the last exact seed) back to it, and returns
 * the lanes changed. A cursor there is not an exact number; every seed below the limit was covered.
 */
export function repairLaneCursors(db: Db, limit: number): { laneId: number; name: string; cursor: number }[] {
  const rows = stmt(db, "SELECT id AS laneId, name, cursor FROM lane WHERE retired = 0 AND (typeof(cursor) != 'integer' OR cursor > ?)").all(limit) as {
    laneId: number;
    name: string;
    cursor: number;
  }[];
  const update = stmt(db, "UPDATE lane SET cursor = ? WHERE id = ?");
  for (const r of rows) update.run(Math.min(limit, Math.floor(r.cursor)), r.laneId);
  return rows;
}
