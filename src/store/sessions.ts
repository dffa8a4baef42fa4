// session rows: one per `run` or `coordinate`.
// Status: running -> done | interrupted | disabled (every lane got disabled, so it stopped early)
// when the process ends the session itself. A process that
// dies leaves its row 'running'; the next `run` or `coordinate` (holding the lock, so no live
// process can own the row) marks it 'crashed', with ended_at left NULL because nobody saw it end.
import { type Db, isoNow, stmt } from "./db.ts";
import type { SessionStatus, SessionEnd, SessionRow, Transport, NewSession } from "./records.ts";
export type { SessionStatus, SessionEnd, SessionRow, Transport, NewSession } from "./records.ts";

export function insertSession(db: Db, s: NewSession): number {
  const info = stmt(
    db,
    `INSERT INTO session (generation_id, started_at, requested_seconds, status, app_build, mode, coordinator_host, port)
     VALUES (?, ?, ?, 'running', ?, ?, ?, ?)`,
  ).run(s.generationId, isoNow(), s.requestedSeconds, s.appBuild, s.transport, s.host, s.port);
  return Number(info.lastInsertRowid);
}

export function endSession(db: Db, sessionId: number, status: SessionEnd): void {
  stmt(db, "UPDATE session SET ended_at = ?, status = ? WHERE id = ?").run(isoNow(), status, sessionId);
}

/**
 * Marks every session still 'running' as 'crashed' and returns their ids. Only call it while
 * holding the campaign lock: then no live process owns a 'running' session.
 */
export function markCrashedSessions(db: Db): number[] {
  const ids = (stmt(db, "SELECT id FROM session WHERE status = 'running' ORDER BY id").all() as { id: number }[]).map((r) => r.id);
  stmt(db, "UPDATE session SET status = 'crashed' WHERE status = 'running'").run();
  return ids;
}

export function setSessionPort(db: Db, sessionId: number, port: number): void {
  stmt(db, "UPDATE session SET port = ? WHERE id = ?").run(port, sessionId);
}

export function recentSessions(db: Db, limit: number): SessionRow[] {
  return stmt(db, "SELECT * FROM session ORDER BY id DESC LIMIT ?").all(limit) as SessionRow[];
}

