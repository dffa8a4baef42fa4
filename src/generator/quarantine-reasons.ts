// The reasons of quarantined tests: the first line of quarantine/why/<name>, read without
// following a symlink, counted per reason and recorded with the chunk (quarantine_reason). A
// reason written as "inconclusive: …" is a test with no verdict, not an invalid one.
import { FileProblem } from "../files/file-problem.ts";
import type { PinnedDir } from "../files/pinned-dir.ts";
import { stmt, type Db } from "../store/db.ts";

const REASON_MAX_BYTES = 4096;
const REASON_MAX_CHARS = 200;
/** A quarantine reason starting with this is inconclusive (no verdict), not an invalid test. */
export const INCONCLUSIVE_PREFIX = "inconclusive:";
/** The reason of a quarantined test whose generator gave none. */
export const NO_REASON = "no reason given";

export interface QuarantineReason {
  reason: string;
  /** An inconclusive test (no verdict: a reference that ran too long), not an invalid one. */
  inconclusive: boolean;
  count: number;
}

/**
 * Why each file was quarantined: the first line of quarantine/why/<name>, when the generator
 * wrote one (a regular file, read without following a symlink); else NO_REASON. Counted per
 * reason and recorded with the chunk.
 */
export function recordQuarantineReasons(db: Db, chunkId: number, q: PinnedDir, files: readonly string[]): QuarantineReason[] {
  let why: PinnedDir | null = null;
  try {
    why = q.openDirIfPresent("why");
  } catch (err) {
    if (!(err instanceof FileProblem)) throw err;
  }
  const byReason = new Map<string, QuarantineReason>();
  try {
    for (const name of files) {
      let line = NO_REASON;
      if (why !== null && why.lstat(name)?.isFile()) {
        try {
          line = why.readFile(name, REASON_MAX_BYTES).bytes.toString("utf8").split("\n")[0]!;
        } catch (err) {
          if (!(err instanceof FileProblem)) throw err;
        }
      }
      const text = line.replace(/[\0-\x1f\x7f]+/g, " ").replace(/\s+/g, " ").trim();
      const inconclusive = text.toLowerCase().startsWith(INCONCLUSIVE_PREFIX);
      const reason = (inconclusive ? text.slice(INCONCLUSIVE_PREFIX.length).trim() : text).slice(0, REASON_MAX_CHARS) || NO_REASON;
      // One row per reason (the table's key): the same text is one reason, whichever kind it was written as.
      const r = byReason.get(reason) ?? { reason, inconclusive, count: 0 };
      r.count++;
      byReason.set(reason, r);
    }
  } finally {
    why?.close();
  }
  for (const r of byReason.values()) {
    stmt(
      db,
      `INSERT INTO quarantine_reason (chunk_id, reason, inconclusive, count) VALUES (?, ?, ?, ?)
         ON CONFLICT (chunk_id, reason) DO UPDATE SET count = excluded.count, inconclusive = excluded.inconclusive`,
    ).run(chunkId, r.reason, r.inconclusive ? 1 : 0, r.count);
  }
  return [...byReason.values()];
}

