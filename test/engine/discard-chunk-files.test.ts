// A booked chunk's files are removed off the event loop, never through a link: an empty scratch
// directory and its log at once in the pool, a directory with files left in it by the no-follow
// walk, a scratch directory swapped for a link as a link (its target untouched).
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { chunkPaths, discardChunkFiles } from "../../src/sweep/engine/chunk-files.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-discard-"));
after(() => rmSync(root, { recursive: true, force: true }));

async function gone(path: string): Promise<void> {
  for (let i = 0; i < 200 && existsSync(path); i++) await new Promise((r) => setTimeout(r, 10));
}

test("empty, full and swapped scratch directories: each removed, no link followed, the log kept when asked", async () => {
  const out = join(root, "out");
  mkdirSync(join(out, "tmp"), { recursive: true });
  const empty = chunkPaths(out, 1);
  mkdirSync(empty.scratchDir);
  writeFileSync(empty.logPath, "log\n");
  const full = chunkPaths(out, 2);
  mkdirSync(join(full.scratchDir, "failures", "7"), { recursive: true });
  writeFileSync(join(full.scratchDir, "failures", "7", "meta.json"), "{}");
  writeFileSync(full.logPath, "log\n");
  const elsewhere = join(root, "elsewhere");
  mkdirSync(elsewhere);
  writeFileSync(join(elsewhere, "precious"), "keep me");
  const swapped = chunkPaths(out, 3);
  symlinkSync(elsewhere, swapped.scratchDir);

  discardChunkFiles(out, empty, false);
  discardChunkFiles(out, full, true);
  discardChunkFiles(out, swapped, false);
  assert.ok(existsSync(empty.scratchDir), "nothing is removed on the caller's turn");
  for (const p of [empty.scratchDir, empty.logPath, full.scratchDir, swapped.scratchDir]) await gone(p);
  assert.deepEqual(readdirSync(join(out, "tmp")).sort(), ["chunk-2.log"], "only the log asked to be kept is left");
  assert.deepEqual(readdirSync(elsewhere), ["precious"], "the link's target is untouched");
});
