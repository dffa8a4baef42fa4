// Where a chunk runs on the shared file system (<out>/tmp/chunk-N and its log), the removal of a
// unit's files once it is booked (never following a symlink below <out>).
import { readdirSync } from "node:fs";
import { basename, join, relative } from "node:path";
import { removeBelow } from "../../files/pinned-dir.ts";
import { removeEntriesOffLoop, type RemovalEntry } from "../../files/removal-thread.ts";
import type { SweepStore } from "../../store/port.ts";

/** Where chunk `chunkId` runs: its scratch directory and its log, under `<out>/tmp/`. */
export function chunkPaths(outDir: string, chunkId: number): { scratchDir: string; logPath: string } {
  const tmp = join(outDir, "tmp");
  return { scratchDir: join(tmp, `chunk-${chunkId}`), logPath: join(tmp, `chunk-${chunkId}.log`) };
}

/**
 * Removes a finished chunk's scratch directory (and its log unless `keepLog`) on the removal
 * thread, so the event loop that books it never waits on the file system (removeEntriesOffLoop:
 * the common case, an empty directory; the removals of one turn go to the thread at once). What that leaves (files in it, a name swapped for a link, no /proc)
 * goes to the walk of removeBelow. Nothing below <out> is followed through a symlink: a worker or
 * generator that swapped `tmp/` or the chunk's directory for a link loses the link, never what it
 * points to.
 */
export function discardChunkFiles(outDir: string, f: { scratchDir: string; logPath: string }, keepLog: boolean): void {
  const tmp = join(outDir, "tmp");
  const entries: RemovalEntry[] = [{ name: basename(f.scratchDir), kind: "directory" }];
  if (!keepLog) entries.push({ name: basename(f.logPath), kind: "file" });
  void removeEntriesOffLoop({ dir: tmp }, entries).then((left) => {
    for (const name of left) {
      try {
        removeBelow(outDir, relative(outDir, join(tmp, name)));
      } catch {
        // Whatever is left is removed with the session's leftovers at the next start.
      }
    }
  });
}

/**
 * Removes a session's leftover chunk and minimize scratch directories (a crashed or killed
 * worker's). Returns how many.
 */
export function removeSessionScratch(store: SweepStore, outDir: string, sessionId: number): number {
  const tmp = join(outDir, "tmp");
  const ids = new Set(store.sessionChunkIds(sessionId));
  const unitIds = new Set(store.sessionUnitIds(sessionId));
  let names: string[];
  try {
    names = readdirSync(tmp);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const name of names) {
    const m = /^(chunk|minimize)-(\d+)$/.exec(name);
    if (m && (m[1] === "chunk" ? ids : unitIds).has(Number(m[2])) && removeBelow(outDir, join("tmp", name))) removed++;
  }
  return removed;
}
