// The end-of-session summary, shared by `run` and `coordinate`: printed, and saved as
// <out>/sessions/session-NNNN.txt so an unattended sweep leaves a readable record.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { formatDuration } from "../../config/duration.ts";
import { formatInt } from "../../config/format.ts";
import { printable } from "../../core/log-lines.ts";
import { writeOutputFile } from "../../files/output-file.ts";
import { isPlantedReason } from "../generator/quarantine-reasons.ts";
import { reasonList, type SessionEnd, type SweepStore } from "../../store/port.ts";
import type { SessionCounts } from "../engine/sweep-engine.ts";
import { LAST_SEED, SEED_LIMIT } from "../../core/ranges.ts";

export interface SummaryInput {
  sessionId: number;
  generationId: number;
  status: SessionEnd;
  /** What a quarantine count means here, when not the usual warning (the demo's deliberate invalid tests). */
  quarantineNote?: string;
  elapsedSeconds: number;
  /** The session's --for, when it had one: the summary then says how much of it was used, and why not all. */
  budgetSeconds?: number;
  /** No chunk starts with less than this left (the deadline floor). */
  floorSeconds?: number;
  counts: SessionCounts;
  maxShrinks: number;
  /** The session ended because every lane is exhausted (covered up to the last exact seed). */
  exhausted?: boolean;
  /** Lines a transport adds (workers, scratch clean-up…), already indented. */
  extra: string[];
  outDir: string;
}

export function sessionSummary(store: SweepStore, s: SummaryInput): string {
  const c = s.counts;
  const out: string[] = [];
  out.push("");
  const ended = s.status === "disabled" ? "stopped early (every lane disabled)" : s.status;
  out.push(`session ${s.sessionId} ${ended} — ${formatDuration(s.elapsedSeconds)} of sweeping, ${c.chunks} chunk(s)`);
  if (s.budgetSeconds !== undefined) out.push(`  budget:        ${budgetLine(s.status, s.elapsedSeconds, s.budgetSeconds, s.floorSeconds ?? 0, s.exhausted === true)}`);
  out.push(`  seeds swept:   ${formatInt(c.seedsSwept)}`);
  // Exit 1 follows this line: newly distinct failures (minimized inputs never seen before),
  // reopened ones, and finds under a signature never seen before. Any other unshrunk find is not
  // a distinct failure yet: it is counted apart. "Pending minimization" is said once, below, with
  // the store's count now: the session's own unshrunk counts go stale as minimize units run.
  out.push(
    `  failures:      ${formatInt(c.newDistinct)} newly distinct` +
      (c.newPending > 0 ? `; ${formatInt(c.newPending)} new unshrunk find(s), not distinct failures until minimized` : "") +
      (c.newSignatures > 0 ? ` (${formatInt(c.newSignatures)} under a signature never seen before: exit 1)` : ""),
  );
  out.push(`  finds:         ${formatInt(c.finds)} failing seed(s): ${formatInt(c.finds - c.unshrunk)} minimized by the generator, ${formatInt(c.unshrunk)} left unshrunk for the minimizer`);
  if (c.minimizeUnits > 0) {
    out.push(
      `  minimized:     ${formatInt(c.minimized)} find(s) in ${formatInt(c.minimizeUnits)} unit(s), ${formatDuration(c.minimizeSeconds)} of minimizer time` +
        (c.minimizeFailed > 0 ? `; ${formatInt(c.minimizeFailed)} could not be minimized` : ""),
    );
  }
  if (c.reopened > 0) {
    out.push(`  REOPENED:      ${formatInt(c.reopened)} failure(s) marked fixed were hit again — a regression; they are open again`);
  }
  if (c.quarantine > 0) {
    const groups = store.sessionQuarantineGroups(s.sessionId);
    const invalid = groups.filter((g) => !g.inconclusive);
    const inconclusive = groups.filter((g) => g.inconclusive);
    const n = (gs: typeof groups) => formatInt(gs.reduce((k, g) => k + g.count, 0));
    if (s.quarantineNote) {
      out.push(`  quarantine:    ${formatInt(c.quarantine)} — ${s.quarantineNote}`);
    } else {
      if (inconclusive.length > 0) out.push(`  quarantine:    ${n(inconclusive)} inconclusive, no verdict (${printable(reasonList(inconclusive), { max: 1000 })})`);
      const planted = invalid.filter((g) => isPlantedReason(g.reason));
      const bugs = invalid.filter((g) => !isPlantedReason(g.reason));
      if (planted.length > 0) out.push(`  quarantine:    ${n(planted)} invalid test(s) the generator emitted on purpose (${printable(reasonList(planted), { max: 1000 })})`);
      if (bugs.length > 0) {
        out.push(`  QUARANTINE:    ${n(bugs)} — the generator emitted invalid tests (${printable(reasonList(bugs), { max: 1000 })}); fix it before trusting its verdicts`);
      }
    }
  }
  if (c.malformed > 0) {
    out.push(`  MALFORMED:     ${formatInt(c.malformed)} failure entr(ies) did not follow the generator contract; kept in ${join(s.outDir, "malformed")}`);
  }
  out.push(...s.extra);
  const open = store.failureGroups(s.generationId).filter((g) => g.state === "open");
  const pending = store.pendingGroups({ state: "open", generationId: s.generationId });
  if (open.length > 0 || pending.length > 0) {
    const finds = pending.reduce((k, g) => k + g.finds, 0);
    const parts = [
      open.length > 0 ? `${open.map((g) => `${g.bucket} ${formatInt(g.distinct)}`).join(", ")} distinct` : "none distinct yet",
      finds > 0 ? `${formatInt(finds)} find(s) pending minimization in ${formatInt(pending.length)} signature(s)` : "",
    ].filter((p) => p !== "");
    out.push(`  open failures: ${parts.join("; ")}`);
    out.push("                 fuzzfleet failures");
  }
  out.push("");
  out.push("lane cursors:");
  for (const lane of store.activeLanes(s.generationId)) {
    const ahead = store.doneAheadOfCursor(lane.id, lane.cursor);
    out.push(
      `  ${lane.name.padEnd(16)} ${formatInt(lane.cursor - lane.base_seed)} covered ${
        lane.cursor >= SEED_LIMIT ? "— EXHAUSTED, nothing left to sweep" : `(next seed ${formatInt(lane.cursor)})`
      }${ahead > 0 ? `  +${formatInt(ahead)} done ahead of cursor` : ""}`,
    );
  }
  return out.join("\n") + "\n";
}

/** Writes the summary to <out>/sessions/session-NNNN.txt and returns the path. */
export function saveSessionSummary(outDir: string, sessionId: number, text: string): string {
  const dir = join(outDir, "sessions");
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `session-${String(sessionId).padStart(4, "0")}.txt`);
  // A new file renamed in: a link left at the name is replaced, never written through.
  writeOutputFile(path, text.replace(/^\n/, ""), { flag: "--out", what: "the session summary" });
  return path;
}

/** How much of its budget a session used and, when it ended before its deadline, why. */
function budgetLine(status: SessionEnd, elapsed: number, budget: number, floor: number, exhausted: boolean): string {
  const used = `${formatDuration(elapsed)} of ${formatDuration(budget)}`;
  if (exhausted && status === "done") return `${used} — ended early: every lane is exhausted (covered up to ${formatInt(LAST_SEED)}, the last exact seed)`;
  if (status === "interrupted") return `${used} — ended early: interrupted (Ctrl-C or a signal); the range in flight is swept again next session`;
  if (status === "disabled") return `${used} — ended early: every lane was disabled`;
  return `${used} — ran until no chunk could start (less than ${formatDuration(floor)} left)`;
}

