// What earlier campaigns left in a corpus's hidden state directory: the work directory of each
// epoch that did not end cleanly (a crash, Ctrl-C, a job its launcher stopped), found at start and
// reported with the two ways out — resume it, or the command that removes it. A clean end removes
// its own work directory, so whatever is found here is another campaign's, or a running one's (the
// campaign lock says which: a running campaign makes this one's start refuse anyway).
import { lstatSync, readdirSync, type Stats } from "node:fs";
import { join } from "node:path";
import { formatDuration } from "../../config/duration.ts";
import { HEX64 } from "../../core/message-checks.ts";

export interface StaleWork {
  path: string;
  /** The epoch, when the name is a well-formed one (else null: a directory nobody can resume). */
  epoch: string | null;
  /** Seconds since anything in it was last written (its own mtime and its direct entries'). */
  ageSeconds: number;
}

/** The work-<epoch> directories in `state` (CORPUS_DIR/.fuzzfleet), oldest first; never follows a link. */
export function findStaleWork(state: string, now: number = Date.now()): StaleWork[] {
  let names: string[];
  try {
    names = readdirSync(state);
  } catch {
    return [];
  }
  const out: StaleWork[] = [];
  for (const name of names) {
    if (!name.startsWith("work-")) continue;
    const path = join(state, name);
    const st = lstatOrNull(path);
    if (st === null || !st.isDirectory()) continue;
    let newest = st.mtimeMs;
    try {
      for (const entry of readdirSync(path)) newest = Math.max(newest, lstatOrNull(join(path, entry))?.mtimeMs ?? 0);
    } catch {
      // Unreadable: reported with the directory's own age.
    }
    const epoch = name.slice(5);
    out.push({ path, epoch: HEX64.test(epoch) ? epoch : null, ageSeconds: Math.max(0, (now - newest) / 1000) });
  }
  return out.sort((a, b) => b.ageSeconds - a.ageSeconds);
}

/** The report of `found`: one line each, with the resume and the removal commands; nothing when none. */
export function staleWorkLines(found: readonly StaleWork[]): string[] {
  if (found.length === 0) return [];
  const lines = [`stale state: ${found.length} earlier campaign(s) on this corpus did not end cleanly; their work directories are left:`];
  for (const w of found) {
    const resume = w.epoch !== null ? `continue it with --resume ${w.epoch}, or ` : "";
    lines.push(`  ${w.path} (last written ${formatDuration(w.ageSeconds)} ago): ${resume}remove it with: rm -rf -- ${shellQuote(w.path)}`);
  }
  return lines;
}

/** A path as one shell word. */
export function shellQuote(path: string): string {
  return /^[A-Za-z0-9_./=:@%+-]+$/.test(path) ? path : `'${path.replace(/'/g, `'\\''`)}'`;
}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}
