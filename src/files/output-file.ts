// Files fuzzfleet writes for the user at a path the user named (`export -o`, `--stats-json`,
// `report -o`). The destination itself is never opened: a new file is created beside it
// (O_EXCL|O_NOFOLLOW), written, fsynced and renamed over the destination (atomic-write.ts), so a symlink or a hard
// link there is replaced, never written through, and a reader sees the old file or the whole new
// one. What is at the destination is looked at with lstat only: a FIFO, a device, a socket or a
// directory is refused before anything is opened (opening a FIFO for writing blocks until a
// reader comes). The directory the file goes into is the user's path and is followed like any
// path the user types, but it must exist and be a directory: a missing one or a dangling symlink
// is a one-line UsageError. A destination inside a directory the caller keeps out (a corpus, its
// state, a sweep's artifacts) is refused, also when reached through a symlink.
//
// Contract: a bad path throws UsageError (exit 2) naming the flag, the path and the fix; a
// failing write (disk full, permission) throws RuntimeFailure naming the path. Either way the
// destination is as it was and no temporary file is left.
import { existsSync, fsyncSync, lstatSync, mkdirSync, readlinkSync, realpathSync, type Stats } from "node:fs";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { RuntimeFailure, UsageError } from "../errors.ts";
import { FileProblem } from "./file-problem.ts";
import { PinnedDir } from "./pinned-dir.ts";
import { replaceFileSynced } from "./atomic-write.ts";

/** A directory no output may land in, and how messages call it ("the corpus"). */
export interface KeptOut {
  dir: string;
  what: string;
}

export interface OutputRules {
  /** The flag that named the path, for messages: "-o", "--stats-json". */
  flag: string;
  /** What is written, for messages: "the export", "the statistics". */
  what: string;
  keepOut?: readonly KeptOut[];
  /** Mode of a new file (the umask narrows it); a replaced regular file keeps its own. */
  mode?: number;
}

function codeOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

function kindOf(st: Stats): string {
  if (st.isDirectory()) return "a directory";
  if (st.isFIFO()) return "a FIFO";
  if (st.isSocket()) return "a socket";
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device file";
  return "not a regular file";
}

function linkTarget(path: string): string {
  try {
    const t = readlinkSync(path);
    return ` to '${t.length > 200 ? `${t.slice(0, 200)}…` : t}'`;
  } catch {
    return "";
  }
}

/** Whether `path` (a real path) is `dir` or lies below it. */
function within(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${sep}`) && !rel.startsWith(sep));
}

/**
 * The directory `dir`, opened (its path followed: the user's), or a UsageError saying why it
 * cannot hold the output: missing, a dangling symlink, not a directory.
 */
function openParent(dir: string, shown: string, r: OutputRules): PinnedDir {
  try {
    return PinnedDir.open(dir);
  } catch (err) {
    if (!(err instanceof FileProblem)) throw err;
    const st = lstatSync(dir, { throwIfNoEntry: false });
    let why: string;
    if (st === undefined) why = `${dir} does not exist`;
    else if (st.isSymbolicLink()) why = `${dir} is a symbolic link${linkTarget(dir)} that leads to no directory`;
    else if (!st.isDirectory()) why = `${dir} is ${kindOf(st) === "not a regular file" ? "a regular file" : kindOf(st)}, not a directory`;
    else why = `${dir} cannot be opened (${err.detail})`;
    throw new UsageError(`${r.flag} ${shown}: ${why}; create the directory first or choose another path for ${r.flag}`, { cause: err });
  }
}

/** Where `path` lands once created: its nearest existing ancestor's real path, and the rest. */
function landing(path: string): string {
  let at = resolve(path);
  const rest: string[] = [];
  while (!existsSync(at) && dirname(at) !== at) {
    rest.unshift(basename(at));
    at = dirname(at);
  }
  return join(realpathSync(at), ...rest);
}

/**
 * Refuses a destination inside a directory kept out (also one not created yet, also by way of a
 * symlink on its path). A file's own name is not followed: a symlink there is replaced.
 */
export function refuseKeptOut(path: string, shown: string, r: OutputRules, followLast: boolean): void {
  const abs = resolve(path);
  const lands = followLast ? landing(abs) : join(landing(dirname(abs)), basename(abs));
  for (const k of r.keepOut ?? []) {
    if (within(lands, landing(k.dir))) {
      throw new UsageError(`${r.flag} ${shown} lies in ${k.what} ${k.dir}, which fuzzfleet never writes ${r.what} into; choose a path outside it`);
    }
  }
}

/** What is at `name` in `dir` now, refused unless it is absent, a regular file or a symlink (replaced). */
function checkDestination(dir: PinnedDir, name: string, shown: string, r: OutputRules): Stats | null {
  const st = dir.lstat(name);
  if (st === null || st.isFile() || st.isSymbolicLink()) return st;
  throw new UsageError(`${r.flag} ${shown} is ${kindOf(st)}; ${r.what} is written as a regular file: choose a file path (nothing was opened)`);
}

/**
 * Checks that `path` can take the output, without opening or creating anything: its directory
 * exists, nothing kept out contains it, what is there now is a regular file, a symlink or nothing.
 * For a flag that is written long after it is given (--stats-json at a campaign's end).
 */
export function checkOutputFile(path: string, r: OutputRules): void {
  refuseKeptOut(path, path, r, false);
  const parent = openParent(dirname(resolve(path)), path, r);
  try {
    checkDestination(parent, basename(resolve(path)), path, r);
  } finally {
    parent.close();
  }
}

/** Writes `data` as the file `path` (see the header); returns the absolute path written. */
export function writeOutputFile(path: string, data: string | Uint8Array, r: OutputRules): string {
  const abs = resolve(path);
  const name = basename(abs);
  refuseKeptOut(abs, path, r, false);
  const parent = openParent(dirname(abs), path, r);
  try {
    writeInto(parent, name, path, data, r);
    return abs;
  } finally {
    parent.close();
  }
}

/**
 * The directory `path` to write output files into, pinned: created when missing (its parent must
 * exist), followed when it is the user's symlink to a directory; a dangling symlink, a file or a
 * directory kept out is a UsageError.
 */
export function openOutputDir(path: string, r: OutputRules): PinnedDir {
  const abs = resolve(path);
  refuseKeptOut(abs, path, r, true);
  const parent = openParent(dirname(abs), path, r);
  try {
    const st = parent.lstat(basename(abs));
    if (st === null) {
      try {
        mkdirSync(parent.entry(basename(abs)), { mode: 0o755 });
      } catch (err) {
        if (codeOf(err) !== "EEXIST") throw new RuntimeFailure(`cannot create ${path} for ${r.flag}: ${(err as Error).message}`, { cause: err });
      }
    } else if (!st.isDirectory() && !st.isSymbolicLink()) {
      throw new UsageError(`${r.flag} ${path} is ${st.isFile() ? "a regular file" : kindOf(st)}, not a directory; choose a directory for ${r.flag}`);
    }
    // The user's link to a directory is followed; one that leads nowhere is refused here.
    return openParent(abs, path, r);
  } finally {
    parent.close();
  }
}

/** Writes `data` as the file `name` in the pinned output directory `dir` (see the header). */
export function writeOutputEntry(dir: PinnedDir, name: string, data: string | Uint8Array, r: OutputRules): string {
  const shown = dir.shownEntry(name);
  writeInto(dir, name, shown, data, r);
  return shown;
}

function writeInto(dir: PinnedDir, name: string, shown: string, data: string | Uint8Array, r: OutputRules): void {
  const before = checkDestination(dir, name, shown, r);
  try {
    // Beside the destination, so the rename stays in one directory (one file system). A regular
    // file replaced keeps its permissions (an export kept 0600 stays 0600).
    replaceFileSynced(dir.entry(name), data, before !== null && before.isFile() ? { mode: before.mode & 0o777, exactMode: true } : { mode: r.mode ?? 0o666 });
  } catch (err) {
    if (codeOf(err) === "EISDIR" || codeOf(err) === "ENOTEMPTY") {
      throw new UsageError(`${r.flag} ${shown} became a directory while it was written; choose a file path`, { cause: err });
    }
    throw cannotWrite(shown, r, err);
  }
  try {
    fsyncSync(dir.fd);
  } catch {
    // Some file systems refuse a directory fsync; the file itself is complete and named.
  }
}

function cannotWrite(shown: string, r: OutputRules, err: unknown): RuntimeFailure {
  const reason = (err as Error).message.replace(/, \w+ '.*'$/, "");
  return new RuntimeFailure(`cannot write ${r.what} to ${shown} (${reason}); pick a writable path for ${r.flag}`, { cause: err });
}
