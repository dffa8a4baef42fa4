// The short per-record lock of the lease table: an exclusive flock(2) on a stable lock file.
//
//   file      a regular file at `lockPath`, created on first use and NEVER unlinked: a holder
//             that unlinked it would let the next two contenders lock two different inodes.
//             A directory, symlink or other non-regular file there is an error and is left alone.
//   acquire   exclusive non-blocking flock, retried with sleeps of at most 2 ms until a deadline
//             on the monotonic clock; then LockTimeoutError. The lock is never broken by age: a
//             holder paused for minutes may resume and write, so stealing would break fencing.
//   release   unlock + close after `fn` returns or throws; the kernel releases it if the holder
//             dies, even by SIGKILL.
// A file system without flock support fails the operation; there is no lock-free fallback.
import assert from "node:assert/strict";
import { closeSync, constants, fstatSync, futimesSync, openSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { constants as lockConstants, fcntlSync, flockSync } from "fs-ext";
import { RuntimeFailure } from "../../errors.ts";

const MAX_SLEEP_MS = 2;
const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** The lock was still held by someone else when the acquisition deadline passed. */
export class LockTimeoutError extends RuntimeFailure {
  readonly lockPath: string;
  constructor(lockPath: string, waitedMs: number, ageHint: string) {
    super(
      `could not take the lock ${lockPath} within ${Math.round(waitedMs)} ms (${ageHint}); ` +
        `kernel locks are never broken by age, so another process still holds it: ` +
        `find it with \`fuser ${lockPath}\` and let it finish or stop it`,
    );
    this.lockPath = lockPath;
  }
}

/** Runs `fn` while holding the exclusive lock on `lockPath`, waiting at most `timeoutMs` for it. */
export function withFileLock<T>(lockPath: string, timeoutMs: number, fn: () => T): T {
  const release = holdFileLock(lockPath, timeoutMs);
  try {
    return fn();
  } finally {
    release();
  }
}

/**
 * Takes the exclusive lock on `lockPath` (waiting at most `timeoutMs`) and returns its release, for
 * a holder whose critical section is not one function (a span of the lease table).
 */
export function holdFileLock(lockPath: string, timeoutMs: number): () => void {
  assert.ok(Number.isFinite(timeoutMs) && timeoutMs > 0, `lock acquisition timeout must be a finite number of milliseconds > 0 (got ${timeoutMs})`);
  const fd = openLockFile(lockPath);
  try {
    acquire(fd, lockPath, timeoutMs);
    // The mtime records the last acquisition, for the age hint of a contender that times out.
    const now = Date.now() / 1000;
    futimesSync(fd, now, now);
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  return () => {
    try {
      flockSync(fd, "un");
    } catch {
      // Closing the only descriptor of this open file releases the lock as well.
    }
    closeSync(fd);
  };
}

function openLockFile(lockPath: string): number {
  let fd: number;
  try {
    fd = openSync(lockPath, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EISDIR" || code === "ELOOP") throw notRegular(lockPath, code === "EISDIR" ? "a directory" : "a symlink", err);
    throw err;
  }
  try {
    // libuv opens every descriptor close-on-exec; make sure, so no child inherits the lock.
    const flags = fcntlSync(fd, "getfd");
    if ((flags & lockConstants.FD_CLOEXEC) === 0) fcntlSync(fd, "setfd", flags | lockConstants.FD_CLOEXEC);
    if (!fstatSync(fd).isFile()) throw notRegular(lockPath, "not a regular file");
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  return fd;
}

function acquire(fd: number, lockPath: string, timeoutMs: number): void {
  const start = performance.now();
  const deadline = start + timeoutMs;
  for (;;) {
    try {
      flockSync(fd, "exnb");
      return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "EAGAIN" && code !== "EWOULDBLOCK" && code !== "EINTR") {
        throw new RuntimeFailure(
          `cannot flock ${lockPath} (${code ?? String(err)}); the lease table needs working flock(2) on this file system ` +
            `and has no lock-free fallback: put the corpus on a local disk or a file system with flock support`,
          { cause: err },
        );
      }
    }
    const now = performance.now();
    if (now >= deadline) throw new LockTimeoutError(lockPath, now - start, ageHint(fd));
    Atomics.wait(sleeper, 0, 0, Math.min(MAX_SLEEP_MS, deadline - now));
  }
}

function ageHint(fd: number): string {
  try {
    const ageSeconds = Math.max(0, (Date.now() - fstatSync(fd).mtimeMs) / 1000);
    return `last taken ${ageSeconds.toFixed(1)} s ago by the file's mtime`;
  } catch {
    return "age unknown";
  }
}

function notRegular(lockPath: string, what: string, cause?: unknown): RuntimeFailure {
  return new RuntimeFailure(
    `lock path ${lockPath} is ${what}; lock files must be regular files and this one is never removed automatically: ` +
      `remove it by hand once no fuzzfleet process uses this campaign`,
    { cause },
  );
}
