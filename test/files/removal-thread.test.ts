// The removal thread: entries removed in a directory named by path or by a descriptor the caller
// holds, never through a symlink; what it cannot remove handed back by name; many requests of one
// turn answered together.
import assert from "node:assert/strict";
import { closeSync, constants, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { removeEntriesOffLoop } from "../../src/files/removal-thread.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-removal-"));
after(() => rmSync(root, { recursive: true, force: true }));

function outside(name: string): string {
  const dir = join(root, name);
  mkdirSync(dir);
  writeFileSync(join(dir, "precious"), "keep me");
  return dir;
}

test("by path: an empty directory and a file go, a full directory and a link to a directory stay; a link named as a file is unlinked, its target kept", async () => {
  const dir = join(root, "by-path");
  mkdirSync(join(dir, "empty"), { recursive: true });
  mkdirSync(join(dir, "full"));
  writeFileSync(join(dir, "full", "x"), "x");
  writeFileSync(join(dir, "log"), "log");
  const target = outside("target-1");
  symlinkSync(target, join(dir, "dir-link"));
  symlinkSync(join(target, "precious"), join(dir, "file-link"));
  const left = await removeEntriesOffLoop({ dir }, [
    { name: "empty", kind: "directory" },
    { name: "log", kind: "file" },
    { name: "full", kind: "directory" },
    { name: "dir-link", kind: "directory" },
    { name: "file-link", kind: "file" },
    { name: "absent", kind: "file" },
  ]);
  assert.deepEqual(left.sort(), ["dir-link", "full"]);
  assert.deepEqual(readdirSync(dir).sort(), ["dir-link", "full"]);
  assert.deepEqual(readdirSync(target), ["precious"]);
});

test("a directory that is a link is not entered: every name comes back, nothing behind it is touched", async () => {
  const target = outside("target-2");
  const link = join(root, "link-to-dir");
  symlinkSync(target, link);
  const left = await removeEntriesOffLoop({ dir: link }, [{ name: "precious", kind: "file" }]);
  assert.deepEqual(left, ["precious"]);
  assert.deepEqual(readdirSync(target), ["precious"]);
});

test("by descriptor, a directory of files: emptied and removed, a link in it unlinked and its target kept; one with a subdirectory comes back", async () => {
  const parent = join(root, "stages");
  const target = outside("target-3");
  mkdirSync(join(parent, "plain"), { recursive: true });
  for (const n of ["a", "b", "c"]) writeFileSync(join(parent, "plain", n), n);
  symlinkSync(join(target, "precious"), join(parent, "plain", "link"));
  mkdirSync(join(parent, "nested", "sub"), { recursive: true });
  writeFileSync(join(parent, "nested", "file"), "f");
  const fd = openSync(parent, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    const left = await removeEntriesOffLoop({ fd }, [
      { name: "plain", kind: "files-dir" },
      { name: "nested", kind: "files-dir" },
    ]);
    assert.deepEqual(left, ["nested"]);
  } finally {
    closeSync(fd);
  }
  assert.deepEqual(readdirSync(parent), ["nested"]);
  assert.deepEqual(readdirSync(join(parent, "nested")), ["sub"], "its files went, the subdirectory stayed");
  assert.deepEqual(readdirSync(target), ["precious"]);
});

test("a hundred requests of one turn are all answered, and each gets only its own names back", async () => {
  const dir = join(root, "many");
  mkdirSync(dir);
  for (let i = 0; i < 100; i++) mkdirSync(join(dir, `d${i}`));
  writeFileSync(join(dir, "d7", "x"), "x");
  const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => removeEntriesOffLoop({ dir }, [{ name: `d${i}`, kind: "directory" }])));
  assert.deepEqual(answers.flatMap((a, i) => (a.length ? [[i, a]] : [])), [[7, ["d7"]]]);
  assert.deepEqual(readdirSync(dir), ["d7"]);
  assert.ok(!existsSync(join(dir, "d0")));
});

test("a name that is not a single entry is refused before anything is tried", () => {
  for (const name of ["", ".", "..", "a/b", "a\0b"]) {
    assert.throws(() => removeEntriesOffLoop({ dir: root }, [{ name, kind: "file" }]), /is not a single directory entry name/);
  }
});
