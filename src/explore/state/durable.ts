// Crash-durable file-system steps for hidden explore state. A rename is only durable once the
// directory holding the new name has been fsynced, so callers that batch several renames into
// one directory use replaceFileSynced per file and fsyncDir once at the end.
import { randomHex } from "../../util/random-hex.ts";
import { closeSync, constants, fsyncSync, linkSync, lstatSync, mkdirSync, openSync, renameSync, statSync, unlinkSync, type Stats } from "node:fs";
import { open } from "node:fs/promises";
import { writeFully } from "../../files/write.ts";
import { basename, dirname, join } from "node:path";

export { writeFully } from "../../files/write.ts";

/** lstat that treats a missing entry (removed since a listing, say) as absent; other errors throw. */
export function lstatOrNull(path: string): Stats | null {
  // Not a caught ENOENT: on the paths that call this the entry is usually absent, and a thrown
  // error costs more than the whole check.
  return lstatSync(path, { throwIfNoEntry: false }) ?? null;
}

/** Flushes a directory's entries (created, renamed, removed names) to stable storage. */
export function fsyncDir(dir: string): void {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
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

/**
 * Writes `data` to a fresh temporary file beside `path`, fsyncs it and renames it over `path`.
 * Readers see the old content or the new, never a part. The directory is NOT fsynced: the new
 * name is durable only after fsyncDir(dirname(path)). On failure the temporary file is removed
 * and the error propagates; `path` is untouched.
 */
export function replaceFileSynced(path: string, data: string | Uint8Array, mode = 0o600): void {
  replaceFileWith(path, data, mode, true);
}

/** Like replaceFileSynced without the fsync: atomic for readers, not durable across a machine crash. */
export function replaceFile(path: string, data: string | Uint8Array, mode = 0o600): void {
  replaceFileWith(path, data, mode, false);
}

function replaceFileWith(path: string, data: string | Uint8Array, mode: number, sync: boolean): void {
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomHex(6)}.tmp`);
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  let renamed = false;
  try {
    try {
      writeFully(fd, typeof data === "string" ? Buffer.from(data, "utf8") : data);
      if (sync) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
    renamed = true;
  } finally {
    if (!renamed) {
      try {
        unlinkSync(temp);
      } catch {
        // Best effort: the original error matters more than a leftover temporary file.
      }
    }
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
