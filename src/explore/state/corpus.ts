// The content-addressed corpus: every public object is named by the lowercase hex SHA-256 of its
// bytes. Every read holds the file still while it is read (stable-read.ts: no final symlink
// followed, a regular file, the same identity before and after), so a file modified or replaced
// meanwhile is reported as "changed" instead of yielding a digest of mixed bytes.
// Publication is temp file + fsync + link under the hash name (never replacing one another master
// published meanwhile) + directory fsync, then the destination is re-hashed;
// the temp file lives in the hidden state directory beside the corpus (same file system), never in
// the corpus directory itself, which other tools (AFL++'s -F) read. Corpus files get the corpus
// file mode (0600 unless `explore --corpus-mode` says otherwise), set exactly, whatever the umask.
// Paths may be descriptor paths of a PinnedDir (src/files/pinned-dir.ts): messages name the
// directory the user knows.
import { randomHex } from "../../util/random-hex.ts";
import { closeSync, constants, fchmodSync, fstatSync, fsyncSync, ftruncateSync, mkdirSync, openSync, readdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { RuntimeFailure } from "../../errors.ts";
import { FileProblem } from "../../files/file-problem.ts";
import { displayPath, type EntryKind, PinnedDir } from "../../files/pinned-dir.ts";
import { fsyncDir, lstatOrNull, moveNoReplace, writeFully } from "./durable.ts";
import { type FileIdentity, identityOf, openRegular, type StreamHooks, streamOpened } from "./stable-read.ts";
import { HEX64 } from "../../core/message-checks.ts";
import { DEFAULT_CORPUS_MODE, octalMode, parseCorpusMode } from "../corpus-mode.ts";

export { DEFAULT_CORPUS_MODE, parseCorpusMode } from "../corpus-mode.ts";

export const STAGE_ID_RE = /^[0-9a-f]{32}$/;

let corpusMode = DEFAULT_CORPUS_MODE;
/** setCorpusMode was called: verified objects are brought to the mode too. */
let modeSet = false;

/**
 * Sets the mode every corpus file this process creates gets from now on (inputs it publishes,
 * children its executors stage): one setting per process, from `explore --corpus-mode`.
 */
export function setCorpusMode(mode: number): void {
  const checked = parseCorpusMode(octalMode(mode));
  if (typeof checked !== "number") throw new RuntimeFailure(`corpus file mode: ${checked.error}`);
  corpusMode = checked;
  modeSet = checked !== DEFAULT_CORPUS_MODE;
}

/** The mode corpus files get (DEFAULT_CORPUS_MODE unless setCorpusMode changed it). */
export function currentCorpusMode(): number {
  return corpusMode;
}

/**
 * Where publication stages its temp files: a directory of the hidden state beside the corpus
 * (the same file system, so the rename into the corpus is atomic), never the corpus itself.
 */
export function publishTempDir(corpusDir: string): string {
  return join(corpusDir, ".fuzzfleet", "tmp");
}

export { DEFAULT_BUDGETS, type Budgets } from "../defaults.ts";

export { FileProblem, type ReadProblem } from "../../files/file-problem.ts";

/** A corpus file whose name is a hash but whose bytes are not. */
export class IntegrityError extends RuntimeFailure {}


function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

export interface CopyOptions {
  /** A source larger than this is refused (FileProblem "too-large"). */
  maxBytes: number;
  hooks?: StreamHooks;
  /** Default true: fsync the copy. False for a private scratch copy that nobody reads after a crash. */
  durable?: boolean;
  /** Default false: rewrite an existing regular file at dest instead of refusing it. */
  reuse?: boolean;
  /** The copy's mode, set exactly (default: the corpus file mode, currentCorpusMode()). */
  mode?: number;
}

/**
 * Streams src into a new file dest (O_EXCL, the corpus file mode unless `mode` says) while hashing, then fsyncs dest (unless
 * `durable` is false). Source problems throw FileProblem; destination I/O errors propagate as
 * they are. On any failure after dest was opened, dest is removed. An existing dest is an error
 * and is left alone, unless `reuse` is set: then an existing regular file is truncated and
 * rewritten (never a symlink), which spares the cost of creating a file for a private scratch
 * copy made again and again.
 */
export function copyHashing(src: string, dest: string, c: CopyOptions): { hash: string; size: number } {
  const { maxBytes, hooks, durable = true, reuse = false, mode: fileMode = corpusMode } = c;
  const opened = openRegular(src, maxBytes);
  const { fd, identity } = opened;
  try {
    // A reused file is overwritten in place and cut to length afterwards: truncating it to zero
    // first frees its blocks only to allocate them again, which costs ~0.5 ms on ext4 here.
    const mode = reuse ? 0 : constants.O_EXCL;
    const out = openSync(dest, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | mode, 0o600);
    try {
      let hash: string;
      try {
        // Exactly this mode: the umask narrows what open(2) creates, and a reused file keeps its own.
        fchmodSync(out, fileMode);
        hash = streamOpened(src, opened, (chunk) => writeFully(out, chunk), hooks);
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

/** The temp directory, pinned; created (0700) the first time it is missing. */
function openTempDir(dir: string): PinnedDir {
  try {
    return PinnedDir.openNoFollow(dir);
  } catch (err) {
    if (!(err instanceof FileProblem && err.problem === "missing")) throw err;
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return PinnedDir.openNoFollow(dir);
}

/**
 * Seed admission: copies src into a temp file of the hidden state (publishTempDir) while hashing,
 * then either verifies the object that already holds that name (the temp is dropped) or renames
 * the temp into place, fsyncs the directory and re-hashes the destination. No temp file ever
 * appears in the corpus directory, and none outlives the call. With `durable` false the fsyncs are
 * skipped: for inputs whose source stays in the input directory, a publication lost to a machine
 * crash is simply repeated by the next scan.
 */
export function publishFile(corpusDir: string, src: string, c: Omit<CopyOptions, "reuse">): { hash: string; size: number; created: boolean } {
  const { maxBytes, durable = true } = c;
  // Below a pin: a temp directory replaced by a symlink is refused, never written through.
  const pin = openTempDir(publishTempDir(corpusDir));
  const temp = pin.entry(`.tmp-${randomHex(16)}`);
  try {
    const { hash, size } = copyHashing(src, temp, { maxBytes, hooks: c.hooks, durable, mode: c.mode });
    const dest = join(corpusDir, hash);
    if (lstatOrNull(dest) !== null) {
      verifyPublic(corpusDir, hash, maxBytes);
      return { hash, size, created: false };
    }
    // Another master may publish the same content between the check above and here: its file stays.
    const created = moveNoReplace(temp, dest);
    if (durable) fsyncDir(corpusDir);
    verifyPublic(corpusDir, hash, maxBytes);
    return { hash, size, created };
  } finally {
    try {
      unlinkQuietly(temp);
    } finally {
      pin.close();
    }
  }
}

/**
 * Removes the temp files a publication left behind (a master killed in mid-copy) below
 * publishTempDir; never follows a symlink. Only for the holder of the campaign lock, before any
 * other master of its campaign publishes. Returns how many were removed.
 */
export function clearPublishTemps(corpusDir: string): number {
  let pin: PinnedDir;
  try {
    pin = PinnedDir.openNoFollow(publishTempDir(corpusDir));
  } catch (err) {
    if (err instanceof FileProblem && err.problem === "missing") return 0;
    throw err;
  }
  try {
    let n = 0;
    for (const e of pin.list()) {
      if (!e.name.startsWith(".tmp-")) continue;
      pin.remove(e.name);
      n++;
    }
    return n;
  } finally {
    pin.close();
  }
}

/**
 * Re-hashes a public object: IntegrityError when its bytes are not its name, FileProblem when
 * unreadable. When the corpus mode was set (setCorpusMode), a verified object of this process's
 * user with another mode is given it: children that a remote worker's process staged arrive with
 * that process's mode, and are verified right after their promotion.
 */
export function verifyPublic(corpusDir: string, hash: string, maxBytes: number): void {
  if (!HEX64.test(hash)) {
    throw new RuntimeFailure(`'${hash}' is not a corpus object name (64 lowercase hex digits)`);
  }
  const path = join(corpusDir, hash);
  for (let attempt = 1; ; attempt++) {
    try {
      verifyOnce(path, hash, maxBytes);
      return;
    } catch (err) {
      // Another master publishing or verifying the same object changes its inode's ctime (the
      // link count when it moves the object in, the mode when it conforms it): read it again.
      // A file that keeps changing is still refused.
      if (!(err instanceof FileProblem && err.problem === "changed") || attempt === VERIFY_ATTEMPTS) throw err;
    }
  }
}

/** How often verifyPublic reads an object that changed while it was read before it gives up. */
const VERIFY_ATTEMPTS = 3;

function verifyOnce(path: string, hash: string, maxBytes: number): void {
  const opened = openRegular(path, maxBytes);
  try {
    const actual = streamOpened(path, opened, () => {});
    if (actual !== hash) {
      throw new IntegrityError(`shared corpus digest mismatch: ${displayPath(path)} holds ${actual}`);
    }
    if (modeSet) conformMode(opened.fd);
  } finally {
    closeSync(opened.fd);
  }
}

/** Gives an object of this process's user the corpus mode (another user's is left as it is). */
function conformMode(fd: number): void {
  const st = fstatSync(fd);
  if ((st.mode & 0o7777) === corpusMode || st.uid !== process.geteuid?.()) return;
  try {
    fchmodSync(fd, corpusMode);
  } catch {
    // Not ours to change after all (a race with another owner): left as it is.
  }
}

/** Names in corpusDir that are valid hashes of regular files (symlinks and directories excluded), unsorted. */
export function listCorpus(corpusDir: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync(corpusDir)) {
    if (!HEX64.test(name)) continue;
    const st = lstatOrNull(join(corpusDir, name));
    if (st?.isFile()) found.push(name);
  }
  return found;
}

/**
 * Regular, non-symlink files of dir with their lstat identity, unsorted. Symlinks and special
 * files are never followed: each is reported to `refused` (directories are simply not inputs).
 */
export function listRegularFiles(
  dir: string | PinnedDir,
  refused?: (name: string, kind: Exclude<EntryKind, "file" | "directory">) => void,
): { name: string; identity: FileIdentity }[] {
  const pin = typeof dir === "string" ? PinnedDir.openNoFollow(dir) : dir;
  try {
    const found: { name: string; identity: FileIdentity }[] = [];
    for (const e of pin.list()) {
      if (e.kind === "directory") continue;
      const st = e.kind === "file" ? pin.lstat(e.name) : null;
      if (st?.isFile()) found.push({ name: e.name, identity: identityOf(st) });
      else if (e.kind !== "file") refused?.(e.name, e.kind);
    }
    return found;
  } finally {
    if (pin !== dir) pin.close();
  }
}
