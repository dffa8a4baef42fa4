// readSmallFile (files/small-file.ts), the one reader of small trusted files (token files, launch
// records), against real files, symlinks and a FIFO.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { FileProblem } from "../../src/files/file-problem.ts";
import { readSmallFile } from "../../src/files/small-file.ts";
import { scratchDirs } from "../helpers/scratch.ts";

const { freshDir } = scratchDirs("small-file");

function problemOf(fn: () => unknown): FileProblem {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof FileProblem, `expected a FileProblem, got ${String(err)}`);
    return err;
  }
  assert.fail("expected a FileProblem");
}

test("reads a regular file whole, up to and including maxBytes; a missing file or directory is null", () => {
  const dir = freshDir();
  writeFileSync(join(dir, "token"), "0123456789\n");
  assert.equal(readSmallFile(join(dir, "token"), 11)?.toString(), "0123456789\n");
  assert.equal(readSmallFile(join(dir, "absent"), 11), null);
  assert.equal(readSmallFile(join(dir, "no-dir", "token"), 11), null);
});

test("one byte over maxBytes is refused as too large", () => {
  const dir = freshDir();
  writeFileSync(join(dir, "big"), "x".repeat(12));
  const p = problemOf(() => readSmallFile(join(dir, "big"), 11));
  assert.equal(p.problem, "too-large");
  assert.equal(p.message, `${join(dir, "big")} is longer than 11 bytes`);
});

test("a symlink at the name is refused, never followed, even to a good file; one among the directories is followed", () => {
  const dir = freshDir();
  writeFileSync(join(dir, "real"), "secret\n");
  symlinkSync(join(dir, "real"), join(dir, "link"));
  assert.equal(problemOf(() => readSmallFile(join(dir, "link"), 100)).problem, "symlink");
  symlinkSync(dir, join(dir, "via"));
  assert.equal(readSmallFile(join(dir, "via", "real"), 100)?.toString(), "secret\n");
});

test("a directory or a FIFO at the name is refused without blocking", () => {
  const dir = freshDir();
  mkdirSync(join(dir, "sub"));
  assert.equal(problemOf(() => readSmallFile(join(dir, "sub"), 100)).problem, "not-regular");
  const fifo = join(dir, "fifo");
  assert.equal(spawnSync("mkfifo", [fifo]).status, 0, "mkfifo made the FIFO");
  assert.equal(problemOf(() => readSmallFile(fifo, 100)).problem, "not-regular");
});

test("accept sees the opened file's stats first, and its refusal stands: nothing is read", () => {
  const dir = freshDir();
  writeFileSync(join(dir, "shared"), "x".repeat(500), { mode: 0o644 });
  const refusal = new Error("open to others");
  const seen: number[] = [];
  assert.throws(
    () =>
      readSmallFile(join(dir, "shared"), 100, (st) => {
        seen.push(st.mode & 0o777);
        throw refusal;
      }),
    (err) => err === refusal,
    "the owner's refusal comes before the size check",
  );
  assert.deepEqual(seen, [0o644]);
});
