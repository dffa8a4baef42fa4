// PinnedDir and the tree placement built on it, against real directories, symlinks, a FIFO and
// (where the machine has one) a second file system.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, linkSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { FileProblem } from "../../src/files/file-problem.ts";
import { displayPath, PinnedDir, removeBelow } from "../../src/files/pinned-dir.ts";
import { placeFile, placeNote, placeTree, scanTree } from "../../src/files/tree.ts";
import { scratchDirs } from "../helpers/scratch.ts";
import { snapshot } from "../helpers/tree-snapshot.ts";

const { freshDir } = scratchDirs("pinned");

function problemOf(fn: () => unknown): FileProblem {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof FileProblem, `expected a FileProblem, got ${String(err)}`);
    return err;
  }
  assert.fail("expected a FileProblem");
}

/** A victim directory outside the tree under test, with a file and a subdirectory. */
function victim(): string {
  const v = freshDir();
  writeFileSync(join(v, "precious"), "keep me");
  mkdirSync(join(v, "sub"));
  writeFileSync(join(v, "sub", "deep"), "keep me too");
  return v;
}

describe("PinnedDir", () => {
  it("walks real directories and refuses a symlinked component, naming it and its target", () => {
    const root = freshDir();
    const v = victim();
    mkdirSync(join(root, "a", "b"), { recursive: true });
    symlinkSync(v, join(root, "a", "link"));
    const pin = PinnedDir.open(root);
    try {
      const b = pin.walk(["a", "b"]);
      assert.equal(b.shown, join(root, "a", "b"));
      b.close();
      const p = problemOf(() => pin.walk(["a", "link", "sub"]));
      assert.equal(p.problem, "symlink");
      assert.equal(p.message, `${join(root, "a", "link")} is a symbolic link to '${v}'; nothing is followed through a symlink`);
      assert.equal(problemOf(() => pin.walk(["a", "nope"])).problem, "missing");
      writeFileSync(join(root, "a", "file"), "x");
      const f = problemOf(() => pin.walk(["a", "file"]));
      assert.equal(f.problem, "not-directory");
      assert.match(f.message, /is a regular file, not a directory$/);
    } finally {
      pin.close();
    }
  });

  it("keeps reading the directory it pinned after its path was replaced by a symlink", () => {
    const root = freshDir();
    const v = victim();
    mkdirSync(join(root, "d"));
    writeFileSync(join(root, "d", "mine"), "pinned content");
    const pin = PinnedDir.openNoFollow(join(root, "d"));
    try {
      renameSync(join(root, "d"), join(root, "moved"));
      symlinkSync(v, join(root, "d"));
      assert.deepEqual(pin.list().map((e) => e.name), ["mine"]);
      assert.equal(pin.readFile("mine", 100).bytes.toString(), "pinned content");
      assert.equal(pin.lstat("precious"), null, "the symlink's target is not what the pin sees");
      assert.equal(displayPath(pin.entry("mine")), join(root, "d", "mine"));
    } finally {
      pin.close();
    }
  });

  it("openExpected refuses a directory that is no longer the one it was", () => {
    const root = freshDir();
    mkdirSync(join(root, "d"));
    const first = PinnedDir.openNoFollow(join(root, "d"));
    const id = first.identity();
    first.close();
    PinnedDir.openExpected(join(root, "d"), id).close();
    renameSync(join(root, "d"), join(root, "old"));
    mkdirSync(join(root, "d"));
    const p = problemOf(() => PinnedDir.openExpected(join(root, "d"), id));
    assert.equal(p.problem, "changed");
    assert.match(p.message, /is no longer the directory fuzzfleet created/);
    rmSync(join(root, "d"), { recursive: true });
    symlinkSync(join(root, "old"), join(root, "d"));
    assert.equal(problemOf(() => PinnedDir.openExpected(join(root, "d"), id)).problem, "symlink");
  });

  it("openFile takes regular files only, within the byte limit", () => {
    const root = freshDir();
    const v = victim();
    writeFileSync(join(root, "f"), "12345");
    symlinkSync(join(v, "precious"), join(root, "link"));
    mkdirSync(join(root, "sub"));
    assert.equal(spawnSync("mkfifo", [join(root, "fifo")]).status, 0);
    const pin = PinnedDir.open(root);
    try {
      assert.equal(pin.readFile("f", 5).bytes.toString(), "12345");
      const big = problemOf(() => pin.readFile("f", 4));
      assert.deepEqual([big.problem, big.detail], ["too-large", "larger than 4 bytes"]);
      const link = problemOf(() => pin.readFile("link", 100));
      assert.deepEqual([link.problem, link.detail], ["symlink", `a symbolic link to '${join(v, "precious")}'; nothing is followed through a symlink`]);
      assert.deepEqual([problemOf(() => pin.readFile("fifo", 100)).detail], ["a FIFO, not a regular file"]);
      assert.deepEqual([problemOf(() => pin.readFile("sub", 100)).detail], ["a directory, not a regular file"]);
      assert.deepEqual([problemOf(() => pin.readFile("absent", 100)).detail], ["missing"]);
    } finally {
      pin.close();
    }
  });

  it("remove takes a tree away without touching what its symlinks point to", () => {
    const root = freshDir();
    const v = victim();
    const before = snapshot(v);
    mkdirSync(join(root, "t", "inner"), { recursive: true });
    writeFileSync(join(root, "t", "inner", "f"), "x");
    symlinkSync(v, join(root, "t", "dirlink"));
    symlinkSync(join(v, "precious"), join(root, "t", "inner", "filelink"));
    const pin = PinnedDir.open(root);
    try {
      pin.remove("t");
      pin.remove("t"); // absent is fine
    } finally {
      pin.close();
    }
    assert.deepEqual(readdirSync(root), []);
    assert.deepEqual(snapshot(v), before);
  });
});

describe("removeBelow", () => {
  it("removes a chunk's scratch directory, but nothing through a symlink on the way to it", () => {
    const out = freshDir();
    const v = victim();
    mkdirSync(join(v, "chunk-7"));
    writeFileSync(join(v, "chunk-7", "x"), "the victim's");
    const before = snapshot(v);
    mkdirSync(join(out, "tmp", "chunk-1", "failures"), { recursive: true });
    writeFileSync(join(out, "tmp", "chunk-1", "failures", "f"), "scratch");
    symlinkSync(v, join(out, "tmp", "chunk-2"));
    assert.equal(removeBelow(out, "tmp/chunk-1"), true);
    assert.equal(removeBelow(out, "tmp/chunk-2"), true, "a symlinked scratch directory: the link goes");
    assert.equal(removeBelow(out, "tmp/chunk-3"), true, "absent is fine");
    assert.deepEqual(readdirSync(join(out, "tmp")), []);
    renameSync(join(out, "tmp"), join(out, "tmp-real"));
    symlinkSync(v, join(out, "tmp"));
    assert.equal(removeBelow(out, "tmp/chunk-7"), false, "a symlink on the way: nothing is removed");
    assert.deepEqual(snapshot(v), before);
    assert.throws(() => removeBelow(out, "../x"), assert.AssertionError);
  });
});

describe("scanTree and placeTree", () => {
  it("scans regular files and directories, and reports every other entry relative to the scanned directory", () => {
    const root = freshDir();
    const v = victim();
    mkdirSync(join(root, "e", "sub"), { recursive: true });
    writeFileSync(join(root, "e", "a"), "A");
    writeFileSync(join(root, "e", "sub", "b"), "B");
    symlinkSync(v, join(root, "e", "sub", "escape"));
    assert.equal(spawnSync("mkfifo", [join(root, "e", "pipe")]).status, 0);
    const pin = PinnedDir.open(root);
    const entry = pin.openDir("e", "");
    try {
      const refused: FileProblem[] = [];
      const nodes = scanTree(entry, refused);
      assert.deepEqual(
        nodes.map((n) => [n.kind, n.name]),
        [
          ["file", "a"],
          ["directory", "sub"],
        ],
      );
      assert.deepEqual(
        refused.map((p) => [p.path, p.detail]),
        [
          ["pipe", "a FIFO; only regular files and directories are accepted"],
          ["sub/escape", `a symbolic link to '${v}'; nothing is followed through a symlink`],
        ],
      );
    } finally {
      entry.close();
      pin.close();
    }
  });

  it("hard-links the tree, leaves the source as it was, reuses a destination holding exactly it, and skips a foreign one", () => {
    const root = freshDir();
    mkdirSync(join(root, "src", "sub"), { recursive: true });
    writeFileSync(join(root, "src", "a"), "A");
    writeFileSync(join(root, "src", "sub", "b"), "B");
    mkdirSync(join(root, "dest", "taken"), { recursive: true });
    writeFileSync(join(root, "dest", "taken", "marker"), "someone else's");
    const before = snapshot(join(root, "src"));
    const pin = PinnedDir.open(root);
    const src = pin.openDir("src", "");
    const dest = pin.openDir("dest");
    try {
      const nodes = scanTree(src, []);
      const names = () => ["taken", "x", "y"][Symbol.iterator]();
      assert.equal(placeTree(src, nodes, dest, names()), "x");
      assert.equal(statSync(join(root, "dest", "x", "sub", "b")).ino, statSync(join(root, "src", "sub", "b")).ino, "a hard link, not a copy");
      assert.equal(placeTree(src, nodes, dest, names()), "x", "a replay reuses its own leftover");
      assert.deepEqual(readdirSync(join(root, "dest")).sort(), ["taken", "x"]);
      assert.equal(readFileSync(join(root, "dest", "taken", "marker"), "utf8"), "someone else's");
      assert.deepEqual(snapshot(join(root, "src")), before);
      writeFileSync(join(root, "dest", "x", "extra"), "not from the source");
      assert.equal(placeTree(src, nodes, dest, names()), "y", "a destination with more in it is not ours");
    } finally {
      src.close();
      dest.close();
      pin.close();
    }
  });

  it("refuses a file swapped after the scan and leaves nothing behind", () => {
    const root = freshDir();
    mkdirSync(join(root, "src"));
    mkdirSync(join(root, "dest"));
    writeFileSync(join(root, "src", "a"), "scanned");
    const pin = PinnedDir.open(root);
    const src = pin.openDir("src", "");
    const dest = pin.openDir("dest");
    try {
      const nodes = scanTree(src, []);
      rmSync(join(root, "src", "a"));
      writeFileSync(join(root, "src", "a"), "swapped in");
      const p = problemOf(() => placeTree(src, nodes, dest, ["x"]));
      assert.equal(p.problem, "changed");
      assert.deepEqual(readdirSync(join(root, "dest")), []);
      const f = nodes[0]!;
      assert.equal(f.kind, "file");
      if (f.kind === "file") assert.equal(problemOf(() => placeFile(src, f, dest, "single")).problem, "changed");
      assert.deepEqual(readdirSync(join(root, "dest")), []);
    } finally {
      src.close();
      dest.close();
      pin.close();
    }
  });

  it("writes a note once and reuses it when the text is the same", () => {
    const root = freshDir();
    const pin = PinnedDir.open(root);
    try {
      const names = () => ["n.txt", "n-2.txt", "n-3.txt"][Symbol.iterator]();
      assert.equal(placeNote(pin, names(), "why\n"), "n.txt");
      assert.equal(placeNote(pin, names(), "why\n"), "n.txt");
      assert.equal(placeNote(pin, names(), "another reason\n"), "n-2.txt");
      symlinkSync(join(root, "n.txt"), join(root, "n-3.txt"));
      assert.throws(() => placeNote(pin, ["n-3.txt"], "x"), assert.AssertionError, "a symlink is never written through");
      assert.equal(readFileSync(join(root, "n.txt"), "utf8"), "why\n");
    } finally {
      pin.close();
    }
  });

  const shm = "/dev/shm";
  const crossFs = existsSync(shm) && statSync(shm).dev !== statSync(freshDir()).dev;
  it("copies across file systems and a replay reuses the byte-identical copy", { skip: crossFs ? false : "needs /dev/shm on another file system" }, () => {
    const other = mkdtempSync(join(shm, "fuzzfleet-pinned-"));
    after(() => rmSync(other, { recursive: true, force: true }));
    mkdirSync(join(other, "src"));
    writeFileSync(join(other, "src", "a"), "across");
    linkSync(join(other, "src", "a"), join(other, "src", "b"));
    const root = freshDir();
    const src = PinnedDir.open(join(other, "src"));
    const dest = PinnedDir.open(root);
    try {
      const nodes = scanTree(src, []);
      assert.equal(placeTree(src, nodes, dest, ["x", "y"]), "x");
      assert.notEqual(statSync(join(root, "x", "a")).dev, statSync(join(other, "src", "a")).dev);
      assert.equal(readFileSync(join(root, "x", "a"), "utf8"), "across");
      assert.equal(placeTree(src, nodes, dest, ["x", "y"]), "x");
      assert.deepEqual(readdirSync(root), ["x"]);
    } finally {
      src.close();
      dest.close();
    }
  });
});
