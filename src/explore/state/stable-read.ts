// Reading a file that must hold still while it is read: open without following a final symlink,
// insist on a regular file within a byte limit, stream it in 1 MiB chunks and compare the file's
// identity (dev, ino, size, mtime, ctime) before and after the read, both through the open
// descriptor and through the path, so a file that was modified or replaced while it was read is
// reported as "changed" instead of yielding a digest of mixed bytes. Every corpus object, input,
// stage and target file is hashed this way (corpus.ts publishes and verifies with it).
// Paths may be descriptor paths of a PinnedDir (src/files/pinned-dir.ts): messages name the
// directory the user knows.
import { createHash } from "node:crypto";
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, type Stats } from "node:fs";
import { RuntimeFailure } from "../../errors.ts";
import { FileProblem } from "../../files/file-problem.ts";
import { displayPath } from "../../files/pinned-dir.ts";

export const CHUNK_BYTES = 1024 * 1024;

export interface FileIdentity {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
}

/** Called after every chunk read from a source file; lets tests act between the identity checks. */
export interface StreamHooks {
  afterChunk?: (bytesSoFar: number) => void;
}

export function identityOf(st: Stats): FileIdentity {
  return { dev: st.dev, ino: st.ino, size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs };
}

export function sameIdentity(a: FileIdentity, b: FileIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs && a.ctimeMs === b.ctimeMs;
}

function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

function changed(path: string, what: string): FileProblem {
  const shown = displayPath(path);
  return new FileProblem("changed", shown, `${shown} ${what} while it was being read; leave it alone until it has been read, then retry`, {
    detail: `${what} while it was being read`,
  });
}

/**
 * Opens path read-only without following a final symlink and checks that it is a regular file of
 * at most maxBytes. O_NONBLOCK keeps a FIFO from blocking the open; fstat then refuses it.
 */
export function openRegular(path: string, maxBytes: number): { fd: number; identity: FileIdentity } {
  const shown = displayPath(path);
  if (typeof constants.O_NOFOLLOW !== "number") {
    throw new RuntimeFailure(`cannot open ${shown} safely: this platform cannot refuse symbolic links when opening a file`);
  }
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | (constants.O_NONBLOCK ?? 0));
  } catch (err) {
    const code = errnoOf(err);
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new FileProblem("missing", shown, `${shown} does not exist`, { cause: err, detail: "missing" });
    }
    if (code === "ELOOP" || code === "EMLINK" || code === "EFTYPE") {
      throw new FileProblem("symlink", shown, `${shown} is a symbolic link; only regular files are accepted`, { cause: err, detail: "a symbolic link" });
    }
    throw new FileProblem("unreadable", shown, `cannot open ${shown}: ${(err as Error).message}`, { cause: err, detail: `unreadable (${code ?? "?"})` });
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) {
      throw new FileProblem("not-regular", shown, `${shown} is not a regular file; only regular files are accepted`, { detail: "not a regular file" });
    }
    if (st.size > maxBytes) {
      throw new FileProblem("too-large", shown, `${shown} holds ${st.size} bytes, above the limit of ${maxBytes}; raise the byte budget or remove the file`, {
        observed: st.size,
        limit: maxBytes,
        detail: `larger than ${maxBytes} bytes`,
      });
    }
    return { fd, identity: identityOf(st) };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/**
 * Streams the already opened regular file through onData (a view valid only during the call) and
 * proves that the bytes seen are the whole file as it was opened, still reachable at path.
 */
export function streamOpened(
  path: string,
  opened: { fd: number; identity: FileIdentity },
  onData: (chunk: Buffer) => void,
  hooks?: StreamHooks,
): string {
  const { fd, identity } = opened;
  const hash = createHash("sha256");
  const buf = chunkBuffer();
  let total = 0;
  for (;;) {
    let n: number;
    try {
      n = readSync(fd, buf, 0, CHUNK_BYTES, null);
    } catch (err) {
      const shown = displayPath(path);
      throw new FileProblem("unreadable", shown, `cannot read ${shown}: ${(err as Error).message}`, { cause: err, detail: `unreadable (${errnoOf(err) ?? "?"})` });
    }
    if (n === 0) break;
    total += n;
    if (total > identity.size) throw changed(path, "grew");
    const view = buf.subarray(0, n);
    hash.update(view);
    onData(view);
    hooks?.afterChunk?.(total);
  }
  if (total !== identity.size) throw changed(path, "shrank");
  if (!sameIdentity(identity, identityOf(fstatSync(fd)))) throw changed(path, "was modified");
  let now: Stats;
  try {
    now = lstatSync(path);
  } catch (err) {
    if (errnoOf(err) === "ENOENT" || errnoOf(err) === "ENOTDIR") throw changed(path, "was removed");
    throw err;
  }
  if (!sameIdentity(identity, identityOf(now))) throw changed(path, "was replaced");
  return hash.digest("hex");
}

function ignore(): void {}

// One read buffer for every stream: they are all synchronous, so none overlaps another, and a
// fresh 1 MiB buffer per file would be garbage to collect after every task.
let shared: Buffer | null = null;
function chunkBuffer(): Buffer {
  shared ??= Buffer.allocUnsafe(CHUNK_BYTES);
  return shared;
}

/** SHA-256 of a regular file, streamed; throws FileProblem. */
export function hashFile(path: string, maxBytes: number, hooks?: StreamHooks): { hash: string; size: number; identity: FileIdentity } {
  const opened = openRegular(path, maxBytes);
  try {
    const hash = streamOpened(path, opened, ignore, hooks);
    const { identity } = opened;
    return { hash, size: identity.size, identity };
  } finally {
    closeSync(opened.fd);
  }
}
