// Where a chunk runs on the shared file system (<out>/tmp/chunk-N and its log), the removal of a
// unit's files once it is booked (never following a symlink below <out>), and the units as the
// wire carries them to a worker (net/messages.ts: assign's chunks and minimize units).
import { constants, readdirSync } from "node:fs";
import { open, rmdir, unlink, type FileHandle } from "node:fs/promises";
import { basename, dirname, join, relative } from "node:path";
import { PINS_VIA_PROC, removeBelow } from "../files/pinned-dir.ts";
import type { AssignedChunk, AssignedMinimize } from "../net/messages.ts";
import { sessionChunkIds } from "../store/chunks.ts";
import type { Db } from "../store/db.ts";
import { sessionUnitIds } from "../store/minimize.ts";
import type { Assignment, MinimizeAssignment } from "./sweep-types.ts";

/** Where chunk `chunkId` runs: its scratch directory and its log, under `<out>/tmp/`. */
export function chunkPaths(outDir: string, chunkId: number): { scratchDir: string; logPath: string } {
  const tmp = join(outDir, "tmp");
  return { scratchDir: join(tmp, `chunk-${chunkId}`), logPath: join(tmp, `chunk-${chunkId}.log`) };
}

/**
 * Removes a finished chunk's scratch directory (and its log unless `keepLog`) in libuv's pool, so
 * the event loop that books it never waits on the file system. Nothing below <out> is followed
 * through a symlink: `tmp/` is opened with O_NOFOLLOW and the names are removed inside that very
 * directory (through its descriptor's /proc path), with rmdir(2) and unlink(2), which never follow
 * their last component. The common case, an empty scratch directory, ends there; anything else
 * (a directory with files left in it, a name swapped for a link, no /proc) goes to the walk of
 * removeBelow: a worker or generator that swapped `tmp/` or the chunk's directory for a link
 * loses the link, never what it points to.
 */
export function discardChunkFiles(outDir: string, f: { scratchDir: string; logPath: string }, keepLog: boolean): void {
  const paths = keepLog ? [f.scratchDir] : [f.scratchDir, f.logPath];
  void removeInPool(outDir, paths).then((left) => {
    for (const path of left) {
      try {
        removeBelow(outDir, relative(outDir, path));
      } catch {
        // Whatever is left is removed with the session's leftovers at the next start.
      }
    }
  });
}

/** Removes the empty directory or the file at each path (all directly in <out>/tmp/); returns the paths it could not. */
async function removeInPool(outDir: string, paths: readonly string[]): Promise<string[]> {
  const tmp = join(outDir, "tmp");
  if (!PINS_VIA_PROC || paths.some((p) => dirname(p) !== tmp)) return [...paths];
  let dir: FileHandle;
  try {
    dir = await open(tmp, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch {
    return [...paths];
  }
  const left: string[] = [];
  try {
    for (const path of paths) {
      const inside = `/proc/self/fd/${dir.fd}/${basename(path)}`;
      try {
        await (path.endsWith(".log") ? unlink(inside) : rmdir(inside));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") left.push(path);
      }
    }
  } finally {
    await dir.close();
  }
  return left;
}

/** Removes a session's leftover chunk and minimize scratch directories (a crashed or killed worker's). Returns how many. */
export function removeSessionScratch(db: Db, outDir: string, sessionId: number): number {
  const tmp = join(outDir, "tmp");
  const ids = new Set(sessionChunkIds(db, sessionId));
  const unitIds = new Set(sessionUnitIds(db, sessionId));
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

export function wireChunk(a: Assignment): AssignedChunk {
  return {
    chunk_id: a.chunkId,
    lane: a.lane,
    seed_from: a.seedFrom,
    seed_to: a.seedTo,
    argv: a.argv,
    cwd: a.cwd,
    log_path: a.logPath,
    scratch_dir: a.scratchDir,
    hard_timeout: a.hardTimeoutSeconds,
    nice: a.nice,
    idle_io: a.idleIo,
  };
}

export function wireUnit(u: MinimizeAssignment): AssignedMinimize {
  return {
    unit_id: u.unitId,
    lane: u.lane,
    seeds: [...u.seeds],
    argv: u.argv,
    cwd: u.cwd,
    log_path: u.logPath,
    scratch_dir: u.scratchDir,
    hard_timeout: u.hardTimeoutSeconds,
    nice: u.nice,
    idle_io: u.idleIo,
  };
}
