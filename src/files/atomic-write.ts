// "Temp, fsync, rename": the one implementation of replacing a file so that a reader sees the old
// content or the new, never a part, and a crash leaves one of the two. The new content goes to a
// fresh hidden name beside the destination (O_EXCL | O_NOFOLLOW, so nothing planted there is
// written through), is fsynced, and is renamed over the destination (a symlink there is replaced,
// never followed). A rename is durable only once its directory is fsynced: callers that put
// several names into one directory replace each and fsyncDir once at the end. A file that must be
// created only where nothing has its name yet (a lock, a secret) is linked into place instead of
// renamed (createFileOnce).
import { closeSync, constants, fchmodSync, fsyncSync, linkSync, openSync, renameSync, unlinkSync } from "node:fs";
import { open } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { randomHex } from "../util/random-hex.ts";
import { writeFully } from "./write.ts";

export interface ReplaceOptions {
  /** Mode of the new file; the umask narrows it unless `exactMode`. Default 0600. */
  mode?: number;
  /** Set `mode` exactly (fchmod after the create), whatever the umask: a secret's 0600, a replaced file's own mode. */
  exactMode?: boolean;
  /** fsync the file before the rename (default true); false: atomic for readers, not durable across a machine crash. */
  sync?: boolean;
}

/**
 * Writes `data` to a fresh temporary file beside `path`, fsyncs it and renames it over `path`.
 * The directory is NOT fsynced (fsyncDir). On failure the temporary file is removed and the
 * error propagates; `path` is untouched.
 */
export function replaceFileSynced(path: string, data: string | Uint8Array, mode: number | ReplaceOptions = 0o600): void {
  const o: ReplaceOptions = typeof mode === "number" ? { mode } : mode;
  const temp = writeTemp(path, data, o);
  let renamed = false;
  try {
    renameSync(temp, path);
    renamed = true;
  } finally {
    if (!renamed) unlinkQuietly(temp);
  }
}

/**
 * Creates `path` holding `data` only if nothing has that name: written whole under a temporary
 * name, then hard-linked into place, so a reader never sees it half written and a file or a link
 * already at the name is never replaced or followed. Returns false when the name was taken; any
 * other failure of the link (a file system without hard links: EPERM, ENOTSUP…) is thrown.
 */
export function createFileOnce(path: string, data: string | Uint8Array, o: ReplaceOptions = {}): boolean {
  const temp = writeTemp(path, data, o);
  try {
    linkSync(temp, path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  } finally {
    unlinkQuietly(temp);
  }
}

/**
 * replaceFileSynced with the create, write and fsync in libuv's pool; only the rename runs on the
 * event loop, and only if `stillWanted()` says so when the file is ready (a later synchronous
 * replace must not be overtaken by an older one finishing in the pool). Resolves true when renamed;
 * the directory is NOT fsynced.
 */
export async function replaceFileInPool(path: string, data: string | Uint8Array, stillWanted: () => boolean, mode = 0o600): Promise<boolean> {
  const temp = tempName(path);
  const handle = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  let ready = false;
  try {
    await handle.writeFile(data);
    await handle.sync();
    ready = true;
  } finally {
    await handle.close();
    if (!ready) unlinkQuietly(temp);
  }
  if (!stillWanted()) {
    unlinkQuietly(temp);
    return false;
  }
  try {
    renameSync(temp, path);
  } catch (err) {
    unlinkQuietly(temp);
    throw err;
  }
  return true;
}

function tempName(path: string): string {
  return join(dirname(path), `.${basename(path).slice(0, 200)}.${process.pid}.${randomHex(6)}.tmp`);
}

/** A fresh temporary file beside `path` holding `data` (see ReplaceOptions); its name. */
function writeTemp(path: string, data: string | Uint8Array, o: ReplaceOptions): string {
  const temp = tempName(path);
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, o.mode ?? 0o600);
  let written = false;
  try {
    if (o.exactMode) fchmodSync(fd, o.mode ?? 0o600);
    writeFully(fd, typeof data === "string" ? Buffer.from(data, "utf8") : data);
    if (o.sync ?? true) fsyncSync(fd);
    written = true;
  } finally {
    closeSync(fd);
    if (!written) unlinkQuietly(temp);
  }
  return temp;
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Best effort: the original error matters more than a leftover temporary file.
  }
}

/** Like replaceFileSynced without the fsync: atomic for readers, not durable across a machine crash. */
export function replaceFile(path: string, data: string | Uint8Array, mode = 0o600): void {
  replaceFileSynced(path, data, { mode, sync: false });
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
