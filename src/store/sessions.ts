// session rows: one per `run` or `coordinate`.
// Status: running -> done | interrupted | disabled (every lane got disabled, so it stopped early)
// when the process ends the session itself. A process that
// dies leaves its row 'running'; the next `run` or `coordinate` (holding the lock, so no live
// process can own the row) marks it 'crashed', with ended_at left NULL because nobody saw it end.
import { type Db, isoNow, stmt } from "./db.ts";

export type SessionStatus = "running" | "done" | "interrupted" | "disabled" | "crashed";

/** How a session that ended itself ended. */
export type SessionEnd = "done" | "interrupted" | "disabled";

export interface SessionRow {
  id: number;
  generation_id: number;
  started_at: string;
  ended_at: string | null;
  requested_seconds: number | null;
  status: SessionStatus;
  app_build: string | null;
  /** The session's transport. */
  mode: Transport;
  coordinator_host: string | null;
  port: number | null;
}

/** How a sweep session runs its chunks: in this process, or on workers it serves (the `session.mode` column). */
export type Transport = "local" | "distributed";

export interface NewSession {
  generationId: number;
  requestedSeconds: number;
  appBuild: string | null;
  transport: Transport;
  host: string;
  port: number | null;
}

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

