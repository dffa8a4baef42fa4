// The reasons of quarantined tests: the first line of quarantine/why/<name>, read without
// following a symlink, counted per reason and recorded with the chunk (quarantine_reason). A
// reason written as "inconclusive: …" is a test with no verdict, not an invalid one; one written as
// "planted: …" an invalid test emitted on purpose.
import { FileProblem } from "../../files/file-problem.ts";
import type { PinnedDir } from "../../files/pinned-dir.ts";
import type { QuarantineReason, SweepStore } from "../../store/port.ts";

export type { QuarantineReason } from "../../store/port.ts";

const REASON_MAX_BYTES = 4096;
const REASON_MAX_CHARS = 200;
/** A quarantine reason starting with this is inconclusive (no verdict), not an invalid test. */
export const INCONCLUSIVE_PREFIX = "inconclusive:";
/**
 * A quarantine reason starting with this is an invalid test the generator emitted on purpose (a
 * demo, a self-test): still invalid and counted, but no sign of a generator bug to fix, so reports
 * list it without the warning. Kept in the reason's text, which shows it.
 */
export const PLANTED_PREFIX = "planted:";

/** Whether a recorded reason is an invalid test emitted on purpose (PLANTED_PREFIX). */
export function isPlantedReason(reason: string): boolean {
  return reason.toLowerCase().startsWith(PLANTED_PREFIX);
}

/** The reason of a quarantined test whose generator gave none. */
export const NO_REASON = "no reason given";

/**
 * Why each file was quarantined: the first line of quarantine/why/<name>, when the generator
 * wrote one (a regular file, read without following a symlink); else NO_REASON. Counted per
 * reason and recorded with the chunk.
 */
export function recordQuarantineReasons(store: SweepStore, chunkId: number, q: PinnedDir, files: readonly string[]): QuarantineReason[] {
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
  const reasons = [...byReason.values()];
  store.saveQuarantineReasons(chunkId, reasons);
  return reasons;
}

