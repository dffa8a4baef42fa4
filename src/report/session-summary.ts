// The end-of-session summary, shared by `run` and `coordinate`: printed, and saved as
// <out>/sessions/session-NNNN.txt so an unattended sweep leaves a readable record.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { formatDuration } from "../config/duration.ts";
import { formatInt } from "../config/format.ts";
import type { Db } from "../store/db.ts";
import { failureGroups } from "../store/failures.ts";
import { activeLanes, doneAheadOfCursor } from "../store/lanes.ts";
import type { SessionEnd } from "../store/sessions.ts";
import type { SessionCounts } from "../engine/sweep-engine.ts";

export interface SummaryInput {
  sessionId: number;
  generationId: number;
  status: SessionEnd;
  /** What a quarantine count means here, when not the usual warning (the demo's deliberate invalid tests). */
  quarantineNote?: string;
  elapsedSeconds: number;
  counts: SessionCounts;
  maxShrinks: number;
  /** Lines a transport adds (workers, scratch clean-up…), already indented. */
  extra: string[];
  outDir: string;
}

export function sessionSummary(db: Db, s: SummaryInput): string {
  const c = s.counts;
  const out: string[] = [];
  out.push("");
  const ended = s.status === "disabled" ? "stopped early (every lane disabled)" : s.status;
  out.push(`session ${s.sessionId} ${ended} — ${formatDuration(s.elapsedSeconds)} of sweeping, ${c.chunks} chunk(s)`);
  out.push(`  seeds swept:   ${formatInt(c.seedsSwept)}`);
  out.push(`  failures:      ${formatInt(c.finds)} (${formatInt(c.newFailures)} newly distinct)`);
  if (c.reopened > 0) {
    out.push(`  REOPENED:      ${formatInt(c.reopened)} failure(s) marked fixed were hit again — a regression; they are open again`);
  }
  if (c.unshrunk > 0) {
    out.push(`  unshrunk:      ${formatInt(c.unshrunk)} — hit the ${s.maxShrinks}-per-chunk shrink cap; these dedupe by full input`);
  }
  if (c.quarantine > 0) {
    out.push(
      s.quarantineNote
        ? `  quarantine:    ${formatInt(c.quarantine)} — ${s.quarantineNote}`
        : `  QUARANTINE:    ${formatInt(c.quarantine)} — the generator emitted invalid tests; fix it before trusting its verdicts`,
    );
  }
  if (c.malformed > 0) {
    out.push(`  MALFORMED:     ${formatInt(c.malformed)} failure entr(ies) did not follow the generator contract; kept in ${join(s.outDir, "malformed")}`);
  }
  out.push(...s.extra);
  const open = failureGroups(db, s.generationId).filter((g) => g.state === "open");
  if (open.length > 0) {
    out.push(`  open failures: ${open.map((g) => `${g.bucket} ${formatInt(g.distinct)}`).join(", ")}`);
    out.push("                 fuzzfleet failures -v");
  }
  out.push("");
  out.push("lane cursors:");
  for (const lane of activeLanes(db, s.generationId)) {
    const ahead = doneAheadOfCursor(db, lane.id, lane.cursor);
    out.push(
      `  ${lane.name.padEnd(16)} ${formatInt(lane.cursor - lane.base_seed)} covered (next seed ${formatInt(lane.cursor)})${
        ahead > 0 ? `  +${formatInt(ahead)} done ahead of cursor` : ""
      }`,
    );
  }
  return out.join("\n") + "\n";
}

/** Writes the summary to <out>/sessions/session-NNNN.txt and returns the path. */
export function saveSessionSummary(outDir: string, sessionId: number, text: string): string {
  const dir = join(outDir, "sessions");
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `session-${String(sessionId).padStart(4, "0")}.txt`);
  writeFileSync(path, text.replace(/^\n/, ""));
  return path;
}
