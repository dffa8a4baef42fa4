// Temp, fsync, rename (files/atomic-write.ts), the one implementation behind output files, launch
// records, the explore state's records, the token file and the campaign lock, against real files
// and symlinks.
import assert from "node:assert/strict";
import { lstatSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { createFileOnce, replaceFileSynced } from "../../src/files/atomic-write.ts";
import { scratchDirs } from "../helpers/scratch.ts";

const { freshDir } = scratchDirs("atomic-write");

test("replaceFileSynced replaces a file whole, and a symlink at the name without writing through it; no temporary file is left", () => {
  const dir = freshDir();
  writeFileSync(join(dir, "victim"), "keep me");
  symlinkSync(join(dir, "victim"), join(dir, "out"));
  replaceFileSynced(join(dir, "out"), "new content\n");
  assert.equal(lstatSync(join(dir, "out")).isFile(), true, "the link was replaced by the file");
  assert.equal(readFileSync(join(dir, "out"), "utf8"), "new content\n");
  assert.equal(readFileSync(join(dir, "victim"), "utf8"), "keep me");
  replaceFileSynced(join(dir, "out"), "again\n", { mode: 0o640, exactMode: true });
  assert.equal(readFileSync(join(dir, "out"), "utf8"), "again\n");
  assert.equal(statSync(join(dir, "out")).mode & 0o777, 0o640);
  assert.deepEqual(readdirSync(dir).sort(), ["out", "victim"]);
});

test("replaceFileSynced into a missing directory throws and leaves nothing", () => {
  const dir = freshDir();
  assert.throws(() => replaceFileSynced(join(dir, "no-dir", "out"), "x"), /ENOENT/);
  assert.deepEqual(readdirSync(dir), []);
});

test("createFileOnce creates a file only where nothing has the name: a file or a dangling link there stays as it is", () => {
  const dir = freshDir();
  assert.equal(createFileOnce(join(dir, "token"), "secret\n", { mode: 0o600, exactMode: true }), true);
  assert.equal(readFileSync(join(dir, "token"), "utf8"), "secret\n");
  assert.equal(statSync(join(dir, "token")).mode & 0o777, 0o600);
  assert.equal(createFileOnce(join(dir, "token"), "other\n"), false);
  assert.equal(readFileSync(join(dir, "token"), "utf8"), "secret\n");
  symlinkSync(join(dir, "nowhere"), join(dir, "link"));
  assert.equal(createFileOnce(join(dir, "link"), "through?\n"), false);
  assert.equal(readlinkSync(join(dir, "link")), join(dir, "nowhere"), "the link is untouched");
  assert.deepEqual(readdirSync(dir).sort(), ["link", "token"], "nothing created through the link, no temporary file left");
});
