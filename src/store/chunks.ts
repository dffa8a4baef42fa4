// chunk rows: one per generator invocation over an inclusive seed range [seed_from, seed_to].
// Status: running (single host) or leased (distributed) while in flight; then complete,
// reissued, or aborted:<why>. A chunk still in flight when its process died becomes
// aborted:lost at the next start. Only 'complete' counts as coverage.
import { type Db, isoNow, stmt } from "./db.ts";

export interface ChunkRecord {
  id: number;
  session_id: number;
  lane_id: number;
  seed_from: number;
  seed_to: number;
  started_at: string;
  ended_at: string | null;
  seconds: number | null;
  app_build: string | null;
  status: string;
  clean: number;
  finds: number;
  quarantine: number;
  unshrunk: number;
  worker_id: number | null;
  leased_at: string | null;
  last_heartbeat: string | null;
}

export interface NewChunk {
  sessionId: number;
  laneId: number;
  seedFrom: number;
  seedTo: number;
  appBuild: string | null;
  status: "running" | "leased";
  workerId: number | null;
}

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

export interface ChunkCounts {
  clean: number;
  finds: number;
  quarantine: number;
  unshrunk: number;
}

export function markChunkComplete(db: Db, chunkId: number, seconds: number, counts: ChunkCounts): void {
  stmt(
    db,
    `UPDATE chunk SET status = 'complete', ended_at = ?, seconds = ?, clean = ?, finds = ?, quarantine = ?, unshrunk = ?
      WHERE id = ?`,
  ).run(isoNow(), seconds, counts.clean, counts.finds, counts.quarantine, counts.unshrunk, chunkId);
}

/** status is 'reissued' or 'aborted:<why>'. seconds may be null when unknown. */
export function markChunkEnded(db: Db, chunkId: number, status: string, seconds: number | null): void {
  stmt(db, "UPDATE chunk SET status = ?, ended_at = ?, seconds = COALESCE(?, seconds) WHERE id = ?").run(
    status,
    isoNow(),
    seconds,
    chunkId,
  );
}

/**
 * Marks every chunk still 'running' or 'leased' as 'aborted:lost' (ended_at stays NULL: nobody
 * saw it end) and returns how many. Only call it while holding the campaign lock, before the new
 * session hands out anything: then every such chunk belongs to a process that died.
 */
export function abortLostChunks(db: Db): number {
  return stmt(db, "UPDATE chunk SET status = 'aborted:lost' WHERE status IN ('running', 'leased')").run().changes;
}

export function touchChunkHeartbeat(db: Db, chunkId: number): void {
  stmt(db, "UPDATE chunk SET last_heartbeat = ? WHERE id = ?").run(isoNow(), chunkId);
}

export function sessionChunkIds(db: Db, sessionId: number): number[] {
  return (stmt(db, "SELECT id FROM chunk WHERE session_id = ?").all(sessionId) as { id: number }[]).map((r) => r.id);
}
