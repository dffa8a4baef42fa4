// A tree of regular files and real directories that someone else wrote (a failure entry of a
// generator), scanned below a pin, and placed elsewhere without changing the source: each file is
// hard-linked (link(2): the same bytes, no copy, the source keeps its name) or, where a link is
// impossible (another file system, a file another user owns), copied through a descriptor opened
// without following a symlink. A placed file is checked to be the very inode that was scanned, so
// a file swapped between the scan and the placement is refused, not taken in.
//
// Placing is replayable: a destination that already holds exactly this tree (the same inodes, or
// the same bytes) is the leftover of an earlier attempt and is used as it is; any other existing
// destination is left alone and the next candidate name is tried.
import assert from "node:assert/strict";
import { closeSync, constants, linkSync, openSync, readSync, type Stats } from "node:fs";
import { FileProblem } from "./file-problem.ts";
import { MAX_DEPTH, type PinnedDir } from "./pinned-dir.ts";
import { writeFully } from "./write.ts";

export interface TreeFile {
  kind: "file";
  name: string;
  dev: number;
  ino: number;
  size: number;
  /** With dev, ino and size: the file as scanned (link(2) changes ctime, not mtime; an inode number can be reused). */
  mtimeMs: number;
  mode: number;
}
export interface TreeDir {
  kind: "directory";
  name: string;
  entries: TreeNode[];
}
export type TreeNode = TreeFile | TreeDir;

const COPY_CHUNK = 1 << 20;
/** link(2) errors that mean "copy instead": another file system, not permitted, too many links, unsupported. */
const LINK_FALLBACK = new Set(["EXDEV", "EPERM", "EMLINK", "ENOTSUP", "EOPNOTSUPP"]);

/**
 * The regular files and directories below `dir`, sorted by name. Anything else (a symlink, a
 * FIFO, a socket, a device, a tree deeper than MAX_DEPTH) is left out and reported to `refused`,
 * its path relative to `dir` in the problem.
 */
export function scanTree(dir: PinnedDir, refused: FileProblem[], depth = 0): TreeNode[] {
  const nodes: TreeNode[] = [];
  const entries = dir.list().sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    if (e.kind === "directory") {
      if (depth + 1 >= MAX_DEPTH) {
        const detail = `nested deeper than ${MAX_DEPTH} directories`;
        refused.push(new FileProblem("too-deep", dir.shownEntry(e.name), `${dir.shownEntry(e.name)} is ${detail}`, { detail }));
        continue;
      }
      let sub: PinnedDir;
      try {
        sub = dir.openDir(e.name);
      } catch (err) {
        if (!(err instanceof FileProblem)) throw err;
        refused.push(err);
        continue;
      }
      try {
        nodes.push({ kind: "directory", name: e.name, entries: scanTree(sub, refused, depth + 1) });
      } finally {
        sub.close();
      }
    } else if (e.kind === "file") {
      const st = dir.lstat(e.name);
      if (st?.isFile()) nodes.push(scannedFile(e.name, st));
      else refused.push(dir.refusal(e.name));
    } else {
      refused.push(dir.refusal(e.name));
    }
  }
  return nodes;
}

export function scannedFile(name: string, st: Stats): TreeFile {
  return { kind: "file", name, dev: st.dev, ino: st.ino, size: st.size, mtimeMs: st.mtimeMs, mode: st.mode & 0o777 };
}

/** Whether `st` is the scanned file `f` itself. */
export function isScanned(f: TreeFile, st: Stats): boolean {
  return st.isFile() && st.dev === f.dev && st.ino === f.ino && st.size === f.size && st.mtimeMs === f.mtimeMs;
}

/**
 * Places `nodes` (scanned from `src`) under the first of `candidates` in `parent` that is free or
 * already holds exactly this tree, and returns that name. A FileProblem (a source file changed
 * since the scan, or cannot be read) removes the partial destination again and propagates;
 * errors of the destination propagate as they are.
 */
export function placeTree(src: PinnedDir, nodes: readonly TreeNode[], parent: PinnedDir, candidates: Iterable<string>): string {
  for (const name of candidates) {
    const fresh = parent.createDir(name);
    if (fresh === null) {
      if (holdsTree(parent, name, src, nodes)) return name;
      continue;
    }
    try {
      fill(src, nodes, fresh);
    } catch (err) {
      fresh.close();
      if (err instanceof FileProblem) parent.remove(name);
      throw err;
    }
    fresh.close();
    return name;
  }
  assert.fail("placeTree: no candidate name was free");
}

/** Writes `text` as a new file under the first of `candidates` that is free or already holds exactly `text`. */
export function placeNote(parent: PinnedDir, candidates: Iterable<string>, text: string): string {
  const bytes = Buffer.from(text, "utf8");
  for (const name of candidates) {
    let fd: number;
    try {
      fd = openSync(parent.entry(name), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      try {
        if (parent.readFile(name, bytes.length).bytes.equals(bytes)) return name;
      } catch (problem) {
        if (!(problem instanceof FileProblem)) throw problem;
      }
      continue;
    }
    try {
      writeFully(fd, bytes);
    } finally {
      closeSync(fd);
    }
    return name;
  }
  assert.fail("placeNote: no candidate name was free");
}

function fill(src: PinnedDir, nodes: readonly TreeNode[], dest: PinnedDir): void {
  for (const node of nodes) {
    if (node.kind === "file") {
      placeFile(src, node, dest, node.name);
      continue;
    }
    const from = src.openDir(node.name);
    try {
      const to = dest.makeDir(node.name);
      try {
        fill(from, node.entries, to);
      } finally {
        to.close();
      }
    } finally {
      from.close();
    }
  }
}

/**
 * Gives `dest/name` the bytes of the scanned file `f` of `src`: a hard link, else a copy. The
 * result must be the scanned inode (or a copy read from it), or it is removed and refused.
 */
export function placeFile(src: PinnedDir, f: TreeFile, dest: PinnedDir, name: string): void {
  try {
    linkSync(src.entry(f.name), dest.entry(name));
  } catch (err) {
    if (!LINK_FALLBACK.has((err as NodeJS.ErrnoException).code ?? "")) throw err;
    copyFile(src, f, dest, name);
    return;
  }
  const st = dest.lstat(name);
  if (st === null || !isScanned(f, st)) {
    dest.remove(name);
    throw changed(src, f);
  }
}

function copyFile(src: PinnedDir, f: TreeFile, dest: PinnedDir, name: string): void {
  const { fd, stats } = src.openFile(f.name, Number.MAX_SAFE_INTEGER);
  try {
    if (!isScanned(f, stats)) throw changed(src, f);
    const out = openSync(dest.entry(name), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, f.mode);
    try {
      const buf = Buffer.allocUnsafe(COPY_CHUNK);
      // Exactly the size it was opened with: a file still being written cannot make this copy forever.
      for (let pos = 0; pos < stats.size; ) {
        let n: number;
        try {
          n = readSync(fd, buf, 0, Math.min(COPY_CHUNK, stats.size - pos), pos);
        } catch (err) {
          const detail = `unreadable (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
          throw new FileProblem("unreadable", src.shownEntry(f.name), `cannot read ${src.shownEntry(f.name)}: ${(err as Error).message}`, { cause: err, detail });
        }
        if (n === 0) throw changed(src, f);
        writeFully(out, buf.subarray(0, n));
        pos += n;
      }
    } catch (err) {
      closeSync(out);
      dest.remove(name);
      throw err;
    }
    closeSync(out);
  } finally {
    closeSync(fd);
  }
}

function changed(src: PinnedDir, f: TreeFile): FileProblem {
  const shown = src.shownEntry(f.name);
  return new FileProblem("changed", shown, `${shown} was replaced while it was being ingested`, { detail: "replaced while it was being ingested" });
}

/** Whether parent/name is a real directory holding exactly `nodes`: the same names, each file the same inode or the same bytes. */
function holdsTree(parent: PinnedDir, name: string, src: PinnedDir, nodes: readonly TreeNode[]): boolean {
  let dir: PinnedDir;
  try {
    dir = parent.openDir(name);
  } catch (err) {
    if (err instanceof FileProblem) return false;
    throw err;
  }
  try {
    return sameEntries(dir, src, nodes);
  } finally {
    dir.close();
  }
}

function sameEntries(dir: PinnedDir, src: PinnedDir, nodes: readonly TreeNode[]): boolean {
  const have = dir.list();
  if (have.length !== nodes.length) return false;
  const byName = new Map(have.map((e) => [e.name, e.kind]));
  for (const node of nodes) {
    if (byName.get(node.name) !== node.kind) return false;
    if (node.kind === "directory") {
      const sub = dir.openDir(node.name);
      const from = src.openDir(node.name);
      try {
        if (!sameEntries(sub, from, node.entries)) return false;
      } finally {
        sub.close();
        from.close();
      }
      continue;
    }
    const st = dir.lstat(node.name);
    if (!st?.isFile()) return false;
    if (isScanned(node, st)) continue;
    if (st.size !== node.size || !sameBytes(dir, src, node)) return false;
  }
  return true;
}

function sameBytes(dir: PinnedDir, src: PinnedDir, f: TreeFile): boolean {
  const a = dir.openFile(f.name, Number.MAX_SAFE_INTEGER);
  try {
    const b = src.openFile(f.name, Number.MAX_SAFE_INTEGER);
    try {
      if (!isScanned(f, b.stats)) throw changed(src, f);
      const x = Buffer.allocUnsafe(COPY_CHUNK);
      const y = Buffer.allocUnsafe(COPY_CHUNK);
      for (let pos = 0; ; ) {
        const n = readSync(a.fd, x, 0, COPY_CHUNK, pos);
        const m = readSync(b.fd, y, 0, COPY_CHUNK, pos);
        if (n !== m) return false;
        if (n === 0) return true;
        if (!x.subarray(0, n).equals(y.subarray(0, n))) return false;
        pos += n;
      }
    } finally {
      closeSync(b.fd);
    }
  } finally {
    closeSync(a.fd);
  }
}
