// The content-addressed corpus: every public object is named by the lowercase hex SHA-256 of its
// bytes. Every read opens without following a final symlink, insists on a regular file, streams in
// 1 MiB chunks and compares the file's identity (dev, ino, size, mtime, ctime) before and after the
// read, both through the open descriptor and through the path, so a file that was modified or
// replaced while it was read is reported as "changed" instead of yielding a digest of mixed bytes.
// Publication is temp file + fsync + rename + directory fsync, then the destination is re-hashed.
import { createHash } from "node:crypto";
import { randomHex } from "../util/random-hex.ts";
import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  lstatSync,
  openSync,
  readSync,
  readdirSync,
  renameSync,
  unlinkSync,
  type Stats,
} from "node:fs";
import { join } from "node:path";
import { RuntimeFailure } from "../errors.ts";
import { fsyncDir, lstatOrNull, writeFully } from "./durable.ts";

export const HASH_RE = /^[0-9a-f]{64}$/;
export const STAGE_ID_RE = /^[0-9a-f]{32}$/;
export const CHUNK_BYTES = 1024 * 1024;

export { DEFAULT_BUDGETS, type Budgets } from "./defaults.ts";

export type ReadProblem = "missing" | "symlink" | "not-regular" | "changed" | "too-large" | "unreadable";

/** A file could not be read as one stable regular file within its byte limit. */
export class FileProblem extends RuntimeFailure {
  readonly problem: ReadProblem;
  readonly path: string;
  readonly observed?: number;
  readonly limit?: number;
  constructor(problem: ReadProblem, path: string, message: string, extra?: { observed?: number; limit?: number; cause?: unknown }) {
    super(message, extra?.cause === undefined ? undefined : { cause: extra.cause });
    this.problem = problem;
    this.path = path;
    if (extra?.observed !== undefined) this.observed = extra.observed;
    if (extra?.limit !== undefined) this.limit = extra.limit;
  }
}

/** A corpus file whose name is a hash but whose bytes are not. */
export class IntegrityError extends RuntimeFailure {}

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
  return new FileProblem("changed", path, `${path} ${what} while it was being read; leave it alone until it has been read, then retry`);
}

/**
 * Opens path read-only without following a final symlink and checks that it is a regular file of
 * at most maxBytes. O_NONBLOCK keeps a FIFO from blocking the open; fstat then refuses it.
 */
export function openRegular(path: string, maxBytes: number): { fd: number; identity: FileIdentity } {
  if (typeof constants.O_NOFOLLOW !== "number") {
    throw new RuntimeFailure(`cannot open ${path} safely: this platform cannot refuse symbolic links when opening a file`);
  }
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | (constants.O_NONBLOCK ?? 0));
  } catch (err) {
    const code = errnoOf(err);
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new FileProblem("missing", path, `${path} does not exist`, { cause: err });
    }
    if (code === "ELOOP" || code === "EMLINK" || code === "EFTYPE") {
      throw new FileProblem("symlink", path, `${path} is a symbolic link; only regular files are accepted`, { cause: err });
    }
    throw new FileProblem("unreadable", path, `cannot open ${path}: ${(err as Error).message}`, { cause: err });
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) {
      throw new FileProblem("not-regular", path, `${path} is not a regular file; only regular files are accepted`);
    }
    if (st.size > maxBytes) {
      throw new FileProblem("too-large", path, `${path} holds ${st.size} bytes, above the limit of ${maxBytes}; raise the byte budget or remove the file`, {
        observed: st.size,
        limit: maxBytes,
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
  fd: number,
  identity: FileIdentity,
  onData: (chunk: Buffer) => void,
  hooks?: StreamHooks,
): string {
  const hash = createHash("sha256");
  const buf = chunkBuffer();
  let total = 0;
  for (;;) {
    let n: number;
    try {
      n = readSync(fd, buf, 0, CHUNK_BYTES, null);
    } catch (err) {
      throw new FileProblem("unreadable", path, `cannot read ${path}: ${(err as Error).message}`, { cause: err });
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
  const { fd, identity } = openRegular(path, maxBytes);
  try {
    const hash = streamOpened(path, fd, identity, ignore, hooks);
    return { hash, size: identity.size, identity };
  } finally {
    closeSync(fd);
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if (errnoOf(err) !== "ENOENT") throw err;
  }
}

/**
 * Streams src into a new file dest (O_EXCL, mode 0o600) while hashing, then fsyncs dest (unless
 * `durable` is false: a private scratch copy that nobody reads after a crash). Source problems
 * throw FileProblem; destination I/O errors propagate as they are. On any failure after dest was
 * opened, dest is removed. An existing dest is an error and is left alone, unless `reuse` is
 * set: then an existing regular file is truncated and rewritten (never a symlink), which spares
 * the cost of creating a file for a private scratch copy made again and again.
 */
export function copyHashing(
  src: string,
  dest: string,
  maxBytes: number,
  hooks?: StreamHooks,
  durable = true,
  reuse = false,
): { hash: string; size: number } {
  const { fd, identity } = openRegular(src, maxBytes);
  try {
    // A reused file is overwritten in place and cut to length afterwards: truncating it to zero
    // first frees its blocks only to allocate them again, which costs ~0.5 ms on ext4 here.
    const mode = reuse ? 0 : constants.O_EXCL;
    const out = openSync(dest, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | mode, 0o600);
    try {
      let hash: string;
      try {
        hash = streamOpened(src, fd, identity, (chunk) => writeFully(out, chunk), hooks);
        if (reuse) ftruncateSync(out, identity.size);
        if (durable) fsyncSync(out);
      } finally {
        closeSync(out);
      }
      return { hash, size: identity.size };
    } catch (err) {
      unlinkQuietly(dest);
      throw err;
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * Seed admission: copies src into a hidden temp in corpusDir while hashing, then either verifies
 * the object that already holds that name (the temp is dropped) or renames the temp into place,
 * fsyncs the directory and re-hashes the destination. The temp never outlives the call.
 * With `durable` false the fsyncs are skipped: for inputs whose source stays in the input
 * directory, a publication lost to a machine crash is simply repeated by the next scan.
 */
export function publishFile(
  corpusDir: string,
  src: string,
  maxBytes: number,
  hooks?: StreamHooks,
  durable = true,
): { hash: string; size: number; created: boolean } {
  const temp = join(corpusDir, `.tmp-${randomHex(16)}`);
  try {
    const { hash, size } = copyHashing(src, temp, maxBytes, hooks, durable);
    const dest = join(corpusDir, hash);
    if (lstatOrNull(dest) !== null) {
      verifyPublic(corpusDir, hash, maxBytes);
      return { hash, size, created: false };
    }
    renameSync(temp, dest);
    if (durable) fsyncDir(corpusDir);
    verifyPublic(corpusDir, hash, maxBytes);
    return { hash, size, created: true };
  } finally {
    unlinkQuietly(temp);
  }
}

/** Re-hashes a public object: IntegrityError when its bytes are not its name, FileProblem when unreadable. */
export function verifyPublic(corpusDir: string, hash: string, maxBytes: number): void {
  if (!HASH_RE.test(hash)) {
    throw new RuntimeFailure(`'${hash}' is not a corpus object name (64 lowercase hex digits)`);
  }
  const path = join(corpusDir, hash);
  const actual = hashFile(path, maxBytes).hash;
  if (actual !== hash) {
    throw new IntegrityError(`shared corpus digest mismatch: ${path} holds ${actual}`);
  }
}

/** Names in corpusDir that are valid hashes of regular files (symlinks and directories excluded), unsorted. */
export function listCorpus(corpusDir: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync(corpusDir)) {
    if (!HASH_RE.test(name)) continue;
    const st = lstatOrNull(join(corpusDir, name));
    if (st?.isFile()) found.push(name);
  }
  return found;
}

/** Regular, non-symlink files of dir with their lstat identity, unsorted. */
export function listRegularFiles(dir: string): { name: string; identity: FileIdentity }[] {
  const found: { name: string; identity: FileIdentity }[] = [];
  for (const name of readdirSync(dir)) {
    const st = lstatOrNull(join(dir, name));
    if (st?.isFile()) found.push({ name, identity: identityOf(st) });
  }
  return found;
}

