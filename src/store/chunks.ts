// chunk rows: one per generator invocation over an inclusive seed range [seed_from, seed_to].
// Status: running (single host) or leased (distributed) while in flight; then complete,
// reissued, or aborted:<why>. A chunk still in flight when its process died becomes
// aborted:lost at the next start. Only 'complete' counts as coverage.
import { type Db, isoNow, stmt } from "./db.ts";
import { chunkFacts, countChunk, laneTallies, rebuildTallies, sumTallies } from "./tallies.ts";
import { addBuildRange, rebuildBuildRanges } from "./build-ranges.ts";
import type { ChunkRecord, NewChunk, ChunkCounts, ChunkTotals, RepairedRange } from "./records.ts";
export type { ChunkRecord, NewChunk, ChunkCounts, ChunkTotals, RepairedRange } from "./records.ts";

export function insertChunk(db: Db, c: NewChunk): number {
  const now = isoNow();
  const leased = c.status === "leased" ? now : null;
  const info = stmt(
    db,
    `INSERT INTO chunk (session_id, lane_id, seed_from, seed_to, started_at, app_build, status, worker_id, leased_at, last_heartbeat)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(c.sessionId, c.laneId, c.seedFrom, c.seedTo, now, c.appBuild, c.status, c.workerId, leased, leased);
  return Number(info.lastInsertRowid);
}

export function getChunk(db: Db, chunkId: number): ChunkRecord | undefined {
  return stmt(db, "SELECT * FROM chunk WHERE id = ?").get(chunkId) as ChunkRecord | undefined;
}

/**
 * Books the chunk complete, and its aggregates with it (tallies.ts, build-ranges.ts): what the row
 * counted for in its old status is taken back first, so a chunk booked complete twice counts once.
 */
export function markChunkComplete(db: Db, chunkId: number, seconds: number, counts: ChunkCounts): void {
  const now = isoNow();
  const before = chunkFacts(db, chunkId);
  stmt(
    db,
    `UPDATE chunk SET status = 'complete', ended_at = ?, seconds = ?, clean = ?, finds = ?, quarantine = ?, unshrunk = ?
      WHERE id = ?`,
  ).run(now, seconds, counts.clean, counts.finds, counts.quarantine, counts.unshrunk, chunkId);
  if (!before) return;
  countChunk(db, before, -1);
  countChunk(db, { ...before, status: "complete", ended_at: now, seconds, finds: counts.finds, quarantine: counts.quarantine }, 1);
  if (before.status !== "complete") addBuildRange(db, before.lane_id, before.app_build, before.seed_from, before.seed_to);
}

/** status is 'reissued' or 'aborted:<why>'. seconds may be null when unknown. */
export function markChunkEnded(db: Db, chunkId: number, status: string, seconds: number | null): void {
  const now = isoNow();
  const before = chunkFacts(db, chunkId);
  stmt(db, "UPDATE chunk SET status = ?, ended_at = ?, seconds = COALESCE(?, seconds) WHERE id = ?").run(status, now, seconds, chunkId);
  if (!before) return;
  countChunk(db, before, -1);
  countChunk(db, { ...before, status, ended_at: now, seconds: seconds ?? before.seconds }, 1);
  // A range cannot be taken out of a merged one (another complete chunk may cover it too): the lane's are recounted.
  if (before.status === "complete" && status !== "complete") rebuildBuildRanges(db, before.lane_id);
}

/**
 * Marks every chunk still 'running' or 'leased' as 'aborted:lost' (ended_at stays NULL: nobody
 * saw it end) and returns how many. Only call it while holding the campaign lock, before the new
 * session hands out anything: then every such chunk belongs to a process that died.
 */
export function abortLostChunks(db: Db): number {
  stmt(
    db,
    `INSERT INTO chunk_tally (lane_id, app_build, aborted)
     SELECT lane_id, COALESCE(app_build, ''), COUNT(*) FROM chunk WHERE status IN ('running', 'leased') GROUP BY lane_id, COALESCE(app_build, '')
         ON CONFLICT (lane_id, app_build) DO UPDATE SET aborted = aborted + excluded.aborted`,
  ).run();
  return stmt(db, "UPDATE chunk SET status = 'aborted:lost' WHERE status IN ('running', 'leased')").run().changes;
}

export function touchChunkHeartbeat(db: Db, chunkId: number): void {
  stmt(db, "UPDATE chunk SET last_heartbeat = ? WHERE id = ?").run(isoNow(), chunkId);
}

/** Seeds, seconds and chunks complete, chunks aborted and reissued, and quarantined tests, over one generation (its aggregates). */
export function chunkTotals(db: Db, generationId: number): ChunkTotals {
  return sumTallies(laneTallies(db, generationId));
}

export function sessionChunkIds(db: Db, sessionId: number): number[] {
  return (stmt(db, "SELECT id FROM chunk WHERE session_id = ?").all(sessionId) as { id: number }[]).map((r) => r.id);
}

/**
 * Repairs chunk rows with a seed range that is not exact integers in [0, lastSeed] (as a sweep
 * that ran past 2^53 left them before seeds were bounded): without this, rebuilding the lane
 * refuses the row, and every run stops at start. Such a row is never coverage: it is marked
 * 'aborted:invalid range', and its range becomes its part below the limit (queued to be swept
 * again, as for any chunk that did not complete) or, with no such part, the lane's base seed
 * alone (at or below the cursor, so nothing new is queued beyond one seed). Coverage below it —
 * the lane's cursor and every complete chunk with a valid range — is kept. Call it holding the
 * campaign lock, before lanes are rebuilt. Returns what it changed.
 */
export function repairChunkRanges(db: Db, lastSeed: number): RepairedRange[] {
  const rows = stmt(
    db,
    `SELECT c.id AS chunkId, c.lane_id AS laneId, l.name AS laneName, c.seed_from AS seedFrom, c.seed_to AS seedTo, c.status AS status, l.base_seed AS baseSeed
       FROM chunk c JOIN lane l ON l.id = c.lane_id
      WHERE typeof(c.seed_from) != 'integer' OR typeof(c.seed_to) != 'integer'
         OR c.seed_from < 0 OR c.seed_from > c.seed_to OR c.seed_to > ?`,
  ).all(lastSeed) as (Omit<RepairedRange, "now"> & { baseSeed: number })[];
  const update = stmt(db, "UPDATE chunk SET seed_from = ?, seed_to = ?, status = 'aborted:invalid range' WHERE id = ?");
  return db.transaction(() => {
    const repaired = rows.map(({ baseSeed, ...r }) => {
      const clampable = Number.isSafeInteger(r.seedFrom) && r.seedFrom >= 0 && r.seedFrom <= lastSeed && r.seedTo >= r.seedFrom;
      const now: [number, number] = clampable ? [r.seedFrom, lastSeed] : [baseSeed, baseSeed];
      update.run(now[0], now[1], r.chunkId);
      return { ...r, now };
    });
    // A repair is rare and may turn complete chunks into aborted ones: the aggregates are recounted whole.
    if (repaired.length > 0) {
      rebuildTallies(db);
      rebuildBuildRanges(db);
    }
    return repaired;
  })();
}
