// Crash-durable file-system steps for hidden explore state. A rename is only durable once the
// directory holding the new name has been fsynced, so callers that batch several renames into
// one directory use replaceFileSynced per file and fsyncDir once at the end.
import { constants, linkSync, lstatSync, mkdirSync, renameSync, statSync, unlinkSync, type Stats } from "node:fs";
import { open } from "node:fs/promises";
import { dirname } from "node:path";

export { writeFully } from "../../files/write.ts";
// Temp, fsync, rename has one implementation, in files/.
import { fsyncDir, replaceFileSynced } from "../../files/atomic-write.ts";
export { fsyncDir, replaceFile, replaceFileSynced } from "../../files/atomic-write.ts";

/** lstat that treats a missing entry (removed since a listing, say) as absent; other errors throw. */
export function lstatOrNull(path: string): Stats | null {
  // Not a caught ENOENT: on the paths that call this the entry is usually absent, and a thrown
  // error costs more than the whole check.
  return lstatSync(path, { throwIfNoEntry: false }) ?? null;
}

/** fsyncDir in libuv's pool: the event loop goes on meanwhile. */
export async function fsyncDirAsync(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Errors of link(2) that mean the file system has no hard links (FAT, some FUSE and network mounts). */
const NO_HARD_LINKS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS"]);

/**
 * Moves the file `from` to the new name `to` unless `to` exists: link(2) then unlink of `from`, so
 * a name that appeared meanwhile (another master publishing the same content) is never replaced
 * and never read half-swapped. Returns false, leaving `from` in place, when `to` exists. The new
 * name is durable only after fsyncDir of its directory. On a file system without hard links it
 * falls back to a check and a rename, which a racing writer of the same name can still overtake.
 */
export function moveNoReplace(from: string, to: string): boolean {
  try {
    linkSync(from, to);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "";
    if (code === "EEXIST") return false;
    if (!NO_HARD_LINKS.has(code)) throw err;
    if (lstatOrNull(to) !== null) return false;
    renameSync(from, to);
    return true;
  }
  unlinkSync(from);
  return true;
}

/** replaceFileSynced, then fsync of the directory: the new content survives a crash. */
export function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600): void {
  replaceFileSynced(path, data, mode);
  fsyncDir(dirname(path));
}

/** Unlinks `path` and fsyncs its directory. Returns false if it did not exist. */
export function unlinkDurable(path: string): boolean {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
  fsyncDir(dirname(path));
  return true;
}

/**
 * Creates `dir` and any missing ancestors, fsyncing the parent of every directory it creates,
 * so the whole chain survives a crash. Returns the number of directory fsyncs made.
 */
export function mkdirDurable(dir: string): number {
  const missing: string[] = [];
  for (let at = dir; !exists(at); at = dirname(at)) {
    missing.unshift(at);
    if (dirname(at) === at) break;
  }
  let syncs = 0;
  for (const created of missing) {
    try {
      mkdirSync(created);
    } catch (err) {
      // A racing creator may not have fsynced the parent yet, so sync it regardless.
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    fsyncDir(dirname(created));
    syncs++;
  }
  if (!statSync(dir).isDirectory()) {
    throw Object.assign(new Error(`ENOTDIR: '${dir}' exists and is not a directory`), { code: "ENOTDIR" });
  }
  return syncs;
}

function exists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}
