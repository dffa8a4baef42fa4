// build_range rows: per lane and app build, the seed ranges its complete chunks swept, merged
// where contiguous, so that a view shows which build swept which part of a lane for what the
// build changes cost, never what the chunks do. A range is inclusive, [seed_from, seed_to]; the
// ranges of one (lane, build) are disjoint and never adjacent (a chunk that touches one or two of
// them merges with both sides). Kept by the statements that book chunks (chunks.ts), inside their
// transaction; rebuildBuildRanges recomputes them from the chunk rows (the migration that
// introduced them, a repair, and the rare chunk that stops being complete).
import { type Db, stmt } from "./statement.ts";

/** One range of a lane swept under one app build (null: chunks that named none). */
export interface BuildRange {
  app_build: string | null;
  seed_from: number;
  seed_to: number;
}

/** What a view shows of a lane's builds: the latest ranges in seed order, and how the prefix splits. */
export interface LaneBuilds {
  /** The `shown` highest ranges of the lane, lowest first. */
  ranges: BuildRange[];
  /** Ranges below those shown. */
  earlier: number;
  /** Seeds of the covered prefix [base_seed, cursor) swept under the current build. */
  current_build_covered: number;
}

/** The store's key for "no app build named" (the column is part of the primary key, so never NULL). */
const NONE = "";

/** A complete chunk of `laneId` swept [from, to] under `appBuild`: the lane's ranges of that build absorb it. */
export function addBuildRange(db: Db, laneId: number, appBuild: string | null, from: number, to: number): void {
  const build = appBuild ?? NONE;
  // Disjoint, non-adjacent ranges: only the last one starting below `from` can reach it, and every one starting in [from, to + 1] touches it.
  const below = stmt(
    db,
    "SELECT seed_from, seed_to FROM build_range WHERE lane_id = ? AND app_build = ? AND seed_from < ? ORDER BY seed_from DESC LIMIT 1",
  ).get(laneId, build, from) as { seed_from: number; seed_to: number } | undefined;
  const inside = stmt(db, "SELECT seed_from, seed_to FROM build_range WHERE lane_id = ? AND app_build = ? AND seed_from BETWEEN ? AND ?").all(
    laneId,
    build,
    from,
    to + 1,
  ) as { seed_from: number; seed_to: number }[];
  const touching = below && below.seed_to >= from - 1 ? [below, ...inside] : inside;
  let lo = from;
  let hi = to;
  const drop = stmt(db, "DELETE FROM build_range WHERE lane_id = ? AND app_build = ? AND seed_from = ?");
  for (const r of touching) {
    lo = Math.min(lo, r.seed_from);
    hi = Math.max(hi, r.seed_to);
    drop.run(laneId, build, r.seed_from);
  }
  stmt(db, "INSERT INTO build_range (lane_id, app_build, seed_from, seed_to) VALUES (?, ?, ?, ?)").run(laneId, build, lo, hi);
}

/**
 * Recomputes the ranges of one lane (or, with null, of every lane) from its complete chunks: one
 * pass over them in seed order. Never on a view's path.
 */
export function rebuildBuildRanges(db: Db, laneId: number | null = null): void {
  if (laneId === null) db.exec("DELETE FROM build_range");
  else stmt(db, "DELETE FROM build_range WHERE lane_id = ?").run(laneId);
  const rows = db
    .prepare(
      `SELECT lane_id, COALESCE(app_build, '') AS build, seed_from, seed_to FROM chunk
        WHERE status = 'complete' ${laneId === null ? "" : "AND lane_id = ?"} ORDER BY lane_id, build, seed_from`,
    )
    .iterate(...(laneId === null ? [] : [laneId])) as IterableIterator<ChunkRange>;
  const insert = stmt(db, "INSERT INTO build_range (lane_id, app_build, seed_from, seed_to) VALUES (?, ?, ?, ?)");
  let open: ChunkRange | null = null;
  const pending: ChunkRange[] = [];
  for (const r of rows) {
    if (open && open.lane_id === r.lane_id && open.build === r.build && r.seed_from <= open.seed_to + 1) {
      open.seed_to = Math.max(open.seed_to, r.seed_to);
      continue;
    }
    if (open) pending.push(open);
    open = { ...r };
  }
  if (open) pending.push(open);
  // Written after the read: better-sqlite3 refuses a write while an iterator on the connection is open.
  for (const r of pending) insert.run(r.lane_id, r.build, r.seed_from, r.seed_to);
}

interface ChunkRange {
  lane_id: number;
  build: string;
  seed_from: number;
  seed_to: number;
}

/** The lane's `shown` highest ranges (lowest first), how many lie below them, and the current build's part of [base_seed, cursor). */
export function laneBuilds(db: Db, lane: { id: number; base_seed: number; cursor: number }, currentBuild: string | null, shown: number): LaneBuilds {
  const last = (
    stmt(db, "SELECT app_build, seed_from, seed_to FROM build_range WHERE lane_id = ? ORDER BY seed_from DESC, app_build LIMIT ?").all(lane.id, shown) as {
      app_build: string;
      seed_from: number;
      seed_to: number;
    }[]
  ).reverse();
  const all = (stmt(db, "SELECT COUNT(*) AS n FROM build_range WHERE lane_id = ?").get(lane.id) as { n: number }).n;
  const covered = stmt(
    db,
    `SELECT COALESCE(SUM(MIN(seed_to, ?) - MAX(seed_from, ?) + 1), 0) AS n FROM build_range
      WHERE lane_id = ? AND app_build = ? AND seed_from < ? AND seed_to >= ?`,
  ).get(lane.cursor - 1, lane.base_seed, lane.id, currentBuild ?? NONE, lane.cursor, lane.base_seed) as { n: number };
  return {
    ranges: last.map((r) => ({ app_build: r.app_build === NONE ? null : r.app_build, seed_from: r.seed_from, seed_to: r.seed_to })),
    earlier: all - last.length,
    current_build_covered: covered.n,
  };
}
