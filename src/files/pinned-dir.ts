// PinnedDir: a directory held by an open descriptor, so that nothing below it is reached through
// a symlink. Node has no openat(2); on Linux the kernel resolves /proc/self/fd/<fd> to the very
// directory that descriptor opened, so "/proc/self/fd/<fd>/<name>" looks `name` up in that
// directory, whatever was renamed or replaced on its path since. Every name below a pin is opened
// with O_NOFOLLOW (directories with O_DIRECTORY too), so a symlink is refused, never followed, and
// a walk is a chain of pins: a component swapped for a symlink in the middle of a walk is refused
// as well. Without /proc (not Linux, or not mounted) names resolve through the pinned directory's
// path instead: symlinks are still refused at every step, but a swap racing the walk is not seen.
//
// Contract: methods that read what someone else wrote throw FileProblem (missing, symlink,
// not-directory, not-regular, too-large, too-deep, unreadable, changed); anything else they throw
// is an I/O error of the caller's own directories. Messages name the path the user knows
// (`shown`), never the /proc one; displayPath() maps a descriptor path back for code that was
// handed one as a plain string. The words of each refusal are refusals.ts.
import assert from "node:assert/strict";
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readSync, rmdirSync, statSync, unlinkSync, mkdirSync, type Stats } from "node:fs";
import { join } from "node:path";
import { FileProblem } from "./file-problem.ts";
import { codeOf, describeNonDirectory, kindPhrase, missing, symlinkProblem, unreadable } from "./refusals.ts";

const VIA_PROC = (() => {
  try {
    return statSync("/proc/self/fd").isDirectory();
  } catch {
    return false;
  }
})();

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
// O_NONBLOCK keeps a FIFO from blocking the open; fstat then refuses it.
const FILE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | (constants.O_NONBLOCK ?? 0);
/** Deepest directory nesting that is walked or removed (each level holds a descriptor). */
export const MAX_DEPTH = 64;
const PROC_PREFIX = "/proc/self/fd/";

/** What each open pin is called in messages, by descriptor. */
const shownByFd = new Map<number, string>();

export type EntryKind = "file" | "directory" | "symlink" | "special";
export interface Entry {
  name: string;
  kind: EntryKind;
}
export interface DirIdentity {
  dev: number;
  ino: number;
}

/** A path for messages: the /proc path of an open pin becomes the pinned directory's own path. */
export function displayPath(path: string): string {
  if (!path.startsWith(PROC_PREFIX)) return path;
  const rest = path.slice(PROC_PREFIX.length);
  const slash = rest.indexOf("/");
  const shown = shownByFd.get(Number(slash < 0 ? rest : rest.slice(0, slash)));
  if (shown === undefined) return path;
  return slash < 0 ? shown : join(shown, rest.slice(slash + 1));
}

function checkName(name: string): void {
  assert.ok(name !== "" && name !== "." && name !== ".." && !name.includes("/") && !name.includes("\0"), `'${name}' is not a single directory entry name`);
}

export class PinnedDir {
  /** A path that resolves to this very directory (for APIs that want a directory path). */
  readonly path: string;
  private open = true;

  private constructor(
    readonly fd: number,
    /** The directory's path as the user knows it, for messages. */
    readonly shown: string,
    realPath: string,
  ) {
    this.path = VIA_PROC ? `${PROC_PREFIX}${fd}` : realPath;
    shownByFd.set(fd, shown);
  }

  /** Opens a directory the caller trusts (a path the user chose): symlinks on it are followed. */
  static open(path: string): PinnedDir {
    let fd: number;
    try {
      fd = openSync(path, constants.O_RDONLY | constants.O_DIRECTORY);
    } catch (err) {
      throw describeNonDirectory(path, path, err);
    }
    return new PinnedDir(fd, path, path);
  }

  /** Opens a directory whose last component must not be a symlink (its parents are trusted). */
  static openNoFollow(path: string): PinnedDir {
    let fd: number;
    try {
      fd = openSync(path, DIR_FLAGS);
    } catch (err) {
      throw describeNonDirectory(path, path, err);
    }
    return new PinnedDir(fd, path, path);
  }

  /**
   * Opens `path` (last component not followed) and insists that it is still the directory
   * `identity` was taken from: a directory fuzzfleet created, however its parents were renamed
   * or replaced since.
   */
  static openExpected(path: string, identity: DirIdentity): PinnedDir {
    const dir = PinnedDir.openNoFollow(path);
    const now = dir.identity();
    if (now.dev !== identity.dev || now.ino !== identity.ino) {
      dir.close();
      throw new FileProblem("changed", path, `${path} is no longer the directory fuzzfleet created (it was replaced); nothing is read from it`, {
        detail: "no longer the directory fuzzfleet created (it was replaced)",
      });
    }
    return dir;
  }

  /** A path that resolves `name` inside this directory; its last component is never followed by the no-follow calls. */
  entry(name: string): string {
    checkName(name);
    return VIA_PROC ? `${this.path}/${name}` : join(this.path, name);
  }

  shownEntry(name: string): string {
    return join(this.shown, name);
  }

  identity(): DirIdentity {
    const st = fstatSync(this.fd);
    return { dev: st.dev, ino: st.ino };
  }

  /** The directory's own stat, in nanoseconds: its mtime and ctime change when a name in it is added, removed or renamed. */
  stats(): { mtimeNs: bigint; ctimeNs: bigint; size: bigint } {
    const st = fstatSync(this.fd, { bigint: true });
    return { mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs, size: st.size };
  }

  /** The subdirectory `name`, which must be a real directory; `shown` names it in messages. */
  openDir(name: string, shown = this.shownEntry(name)): PinnedDir {
    const path = this.entry(name);
    let fd: number;
    try {
      fd = openSync(path, DIR_FLAGS);
    } catch (err) {
      throw describeNonDirectory(path, shown, err);
    }
    return new PinnedDir(fd, shown, VIA_PROC ? shown : path);
  }

  /** The subdirectory `name`, or null when there is none; any other entry under that name is refused. */
  openDirIfPresent(name: string): PinnedDir | null {
    try {
      return this.openDir(name);
    } catch (err) {
      if (err instanceof FileProblem && err.problem === "missing") return null;
      throw err;
    }
  }

  /** The subdirectory `name`, created when missing; an existing symlink or file is refused. */
  makeDir(name: string, mode = 0o755): PinnedDir {
    try {
      mkdirSync(this.entry(name), { mode });
    } catch (err) {
      if (codeOf(err) !== "EEXIST") throw err;
    }
    return this.openDir(name);
  }

  /** A new subdirectory `name`, or null when that name exists already (whatever it is). */
  createDir(name: string, mode = 0o755): PinnedDir | null {
    try {
      mkdirSync(this.entry(name), { mode });
    } catch (err) {
      if (codeOf(err) === "EEXIST") return null;
      throw err;
    }
    return this.openDir(name);
  }

  /** Successive subdirectories; the result is a new pin (this one stays open). */
  walk(names: readonly string[]): PinnedDir {
    if (names.length === 0) return PinnedDir.reopen(this);
    let at: PinnedDir = this;
    try {
      for (const name of names) {
        const next = at.openDir(name);
        if (at !== this) at.close();
        at = next;
      }
    } catch (err) {
      if (at !== this) at.close();
      throw err;
    }
    return at;
  }

  private static reopen(dir: PinnedDir): PinnedDir {
    return new PinnedDir(openSync(dir.path, constants.O_RDONLY | constants.O_DIRECTORY), dir.shown, dir.path);
  }

  /** Every entry with its kind, in directory order. */
  list(): Entry[] {
    try {
      return readdirSync(this.path, { withFileTypes: true }).map((d) => ({
        name: d.name,
        kind: d.isFile() ? "file" : d.isDirectory() ? "directory" : d.isSymbolicLink() ? "symlink" : "special",
      }));
    } catch (err) {
      throw unreadable(this.shown, "list", err);
    }
  }

  /** lstat of `name` (never followed); null when absent. */
  lstat(name: string): Stats | null {
    return lstatSync(this.entry(name), { throwIfNoEntry: false }) ?? null;
  }

  /** Opens `name` read-only; it must be a regular file (not a symlink) of at most maxBytes. */
  openFile(name: string, maxBytes: number): { fd: number; stats: Stats } {
    const path = this.entry(name);
    const shown = this.shownEntry(name);
    let fd: number;
    try {
      fd = openSync(path, FILE_FLAGS);
    } catch (err) {
      const code = codeOf(err);
      if (code === "ENOENT") throw missing(shown, err);
      if (code === "ELOOP") throw symlinkProblem(path, shown);
      throw unreadable(shown, "open", err);
    }
    try {
      const stats = fstatSync(fd);
      if (!stats.isFile()) {
        const detail = `${kindPhrase(stats)}, not a regular file`;
        throw new FileProblem("not-regular", shown, `${shown} is ${detail}`, { detail });
      }
      if (stats.size > maxBytes) {
        throw new FileProblem("too-large", shown, `${shown} holds ${stats.size} bytes, above the limit of ${maxBytes}`, {
          observed: stats.size,
          limit: maxBytes,
          detail: `larger than ${maxBytes} bytes`,
        });
      }
      return { fd, stats };
    } catch (err) {
      closeSync(fd);
      throw err;
    }
  }

  /** The whole of the regular file `name` (see openFile), with the identity it was read under. */
  readFile(name: string, maxBytes: number): { bytes: Buffer; stats: Stats } {
    const { fd, stats } = this.openFile(name, maxBytes);
    try {
      const bytes = Buffer.allocUnsafe(stats.size);
      let off = 0;
      while (off < bytes.length) {
        let n: number;
        try {
          n = readSync(fd, bytes, off, bytes.length - off, off);
        } catch (err) {
          throw unreadable(this.shownEntry(name), "read", err);
        }
        if (n === 0) throw new FileProblem("changed", this.shownEntry(name), `${this.shownEntry(name)} shrank while it was read`, { detail: "changed while it was read" });
        off += n;
      }
      return { bytes, stats };
    } finally {
      closeSync(fd);
    }
  }

  /** Why `name` cannot be used as a directory or a file: the refusal for a symlink or special entry. */
  refusal(name: string): FileProblem {
    const path = this.entry(name);
    const shown = this.shownEntry(name);
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (st === undefined) return missing(shown);
    if (st.isSymbolicLink()) return symlinkProblem(path, shown);
    const detail = `${kindPhrase(st)}; only regular files and directories are accepted`;
    return new FileProblem("not-regular", shown, `${shown} is ${detail}`, { detail });
  }

  /**
   * Removes `name` and, for a directory, everything in it, never following a symlink: a link is
   * unlinked, its target untouched. Absent is fine. A tree deeper than MAX_DEPTH is refused.
   */
  remove(name: string, depth = 0): void {
    const st = this.lstat(name);
    if (st === null) return;
    if (!st.isDirectory()) {
      unlinkQuietly(this.entry(name));
      return;
    }
    if (depth >= MAX_DEPTH) {
      const detail = `nested deeper than ${MAX_DEPTH} directories`;
      throw new FileProblem("too-deep", this.shownEntry(name), `${this.shownEntry(name)} is ${detail}; remove it by hand`, { detail });
    }
    let sub: PinnedDir;
    try {
      sub = this.openDir(name);
    } catch (err) {
      // Replaced since the lstat: whatever is there now is only a name to unlink.
      if (err instanceof FileProblem && (err.problem === "symlink" || err.problem === "not-directory")) unlinkQuietly(this.entry(name));
      else if (!(err instanceof FileProblem && err.problem === "missing")) throw err;
      return;
    }
    try {
      for (const e of sub.list()) sub.remove(e.name, depth + 1);
    } finally {
      sub.close();
    }
    try {
      rmdirSync(this.entry(name));
    } catch (err) {
      if (codeOf(err) !== "ENOENT") throw err;
    }
  }

  close(): void {
    if (!this.open) return;
    this.open = false;
    shownByFd.delete(this.fd);
    closeSync(this.fd);
  }
}

/**
 * Removes `root/rel` (rel: a relative path below root) and everything in it without following a
 * symlink anywhere below `root`: a symlink on the way leaves everything as it is (returns false),
 * a symlink at the end or inside is unlinked, never followed. Absent is fine (true).
 */
export function removeBelow(root: string, rel: string): boolean {
  const names = rel.split("/").filter((n) => n !== "" && n !== ".");
  const last = names.pop();
  assert.ok(last !== undefined && !names.includes("..") && last !== "..", `'${rel}' is not a path below ${root}`);
  let top: PinnedDir;
  try {
    top = PinnedDir.open(root);
  } catch (err) {
    if (err instanceof FileProblem && err.problem === "missing") return true;
    throw err;
  }
  try {
    let parent: PinnedDir;
    try {
      parent = top.walk(names);
    } catch (err) {
      if (!(err instanceof FileProblem)) throw err;
      return err.problem === "missing";
    }
    try {
      parent.remove(last);
      return true;
    } finally {
      parent.close();
    }
  } finally {
    top.close();
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if (codeOf(err) !== "ENOENT") throw err;
  }
}
