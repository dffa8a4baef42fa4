// executeTask with real targets that replace parts of their scratch directory with symlinks:
// the executor reads its outputs and cleans up only through the directory it created, so the
// links' targets are never read, copied or emptied, and the next task runs in a sound scratch.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { DEFAULT_BUDGETS } from "../../src/explore/state/corpus.ts";
import { disposeScratch, executeTask, type ExecuteSetup } from "../../src/explore/executor/execute.ts";
import { scratchDirs, sha256 } from "../helpers/scratch.ts";
import { snapshot } from "../helpers/tree-snapshot.ts";

const { freshDir } = scratchDirs("execute-links");

/** A corpus with one input, a target script, and a victim directory the script points its links at. */
function bench(script: (victim: string) => string): { setup: ExecuteSetup; hash: string; victim: string; before: Record<string, string> } {
  const dir = freshDir();
  const corpusDir = join(dir, "corpus");
  mkdirSync(corpusDir);
  const input = "the input\n";
  writeFileSync(join(corpusDir, sha256(input)), input);
  const victim = join(dir, "victim");
  mkdirSync(join(victim, "out"), { recursive: true });
  writeFileSync(join(victim, "precious"), "keep me");
  writeFileSync(join(victim, "out", "also precious"), "keep me too");
  const target = join(dir, "target.sh");
  writeFileSync(target, `#!/bin/sh\n${script(victim)}\n`);
  chmodSync(target, 0o755);
  const setup: ExecuteSetup = {
    corpusDir,
    stageRoot: join(dir, "staging", "local-0"),
    target: [target, "@@"],
    targetCwd: dir,
    simulate: false,
    budgets: DEFAULT_BUDGETS,
    scratchRoot: join(dir, "scratch"),
    killGraceMs: 1000,
  };
  return { setup, hash: sha256(input), victim, before: snapshot(victim, true) };
}

const task = (hash: string, id: number) => ({ id, hash, fence: "f", timeoutSeconds: 10 });

describe("executeTask and a target's symlinks", () => {
  it("a target that replaces SYMCC_OUTPUT_DIR with a symlink gets a corpus-publication error; the link's target keeps every file", async () => {
    const b = bench((v) => `rmdir "$SYMCC_OUTPUT_DIR" && ln -s "${v}" "$SYMCC_OUTPUT_DIR"`);
    try {
      const r = await executeTask(task(b.hash, 1), b.setup, new AbortController().signal);
      assert.deepEqual(snapshot(b.victim, true), b.before);
      assert.equal(r.failure, "corpus-publication");
      assert.match(r.detail ?? "", /^the target replaced its SYMCC_OUTPUT_DIR: .*\/out is a symbolic link to '.*victim'; nothing is followed through a symlink$/);
      assert.deepEqual(r.children, [], "nothing behind the link was staged");
    } finally {
      disposeScratch(b.setup.scratchRoot);
    }
  });

  it("a target that swaps its whole scratch directory for a symlink: nothing behind the link is emptied, and the next task runs", async () => {
    const b = bench((v) => `d=$(dirname "$SYMCC_OUTPUT_DIR"); [ -e "${v}.done" ] && exit 0; touch "${v}.done"; mv "$d" "$d.away" && ln -s "${v}" "$d"`);
    try {
      const first = await executeTask(task(b.hash, 1), b.setup, new AbortController().signal);
      assert.equal(first.failure, null);
      assert.deepEqual(snapshot(b.victim, true), b.before);
      const second = await executeTask(task(b.hash, 2), b.setup, new AbortController().signal);
      assert.equal(second.failure, null, second.detail ?? "");
      assert.equal(second.inputHash, b.hash);
      assert.deepEqual(snapshot(b.victim, true), b.before);
    } finally {
      disposeScratch(b.setup.scratchRoot);
    }
  });

  it("a symlink among the outputs or in place of the input is refused and only the link is removed", async () => {
    const b = bench((v) => `ln -s "${v}/precious" "$SYMCC_OUTPUT_DIR/child"; rm -f "$1"; ln -s "${v}/precious" "$1"`);
    try {
      const r = await executeTask(task(b.hash, 1), b.setup, new AbortController().signal);
      assert.equal(r.failure, "corpus-publication");
      assert.match(r.detail ?? "", /child is not a regular file \(it is a symbolic link; nothing is followed through a symlink\)/);
      assert.deepEqual(snapshot(b.victim, true), b.before);
      const again = await executeTask(task(b.hash, 2), b.setup, new AbortController().signal);
      assert.equal(again.inputHash, b.hash, "the next task's input is a fresh copy, not written through the link");
      assert.deepEqual(snapshot(b.victim, true), b.before);
    } finally {
      disposeScratch(b.setup.scratchRoot);
    }
  });
});
