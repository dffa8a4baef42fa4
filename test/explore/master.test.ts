import assert from "node:assert/strict";
import { mkdirSync, readdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { ExploreMaster } from "../../src/explore/master/master.ts";
import { scratchDirs, sha256 } from "../helpers/scratch.ts";
import { loneMaster } from "../helpers/explore.ts";

const { freshDir } = scratchDirs("master");

function setup(inputs: number): { master: ExploreMaster; inputDir: string; corpusDir: string } {
  const dir = freshDir();
  const inputDir = join(dir, "in");
  const corpusDir = join(dir, "corpus");
  mkdirSync(inputDir);
  mkdirSync(corpusDir);
  // Old seeds, as a seed directory is: admitted at first sight (a fresh file waits to settle).
  const old = new Date(Date.now() - 3600_000);
  for (let i = 0; i < inputs; i++) {
    writeFileSync(join(inputDir, `seed-${i}`), `seed ${i}\n`);
    utimesSync(join(inputDir, `seed-${i}`), old, old);
  }
  const master = loneMaster({ dir, corpusDir: corpusDir, inputDir });
  return { master, inputDir, corpusDir };
}

describe("ExploreMaster input admission", () => {
  it("admits at most `limit` inputs per call and is not idle while listed inputs wait", () => {
    const { master, corpusDir } = setup(7);
    // A listing with nothing admitted yet: nothing pending, nothing running, and still not idle.
    assert.equal(master.admitInputs(0), 0);
    assert.equal(master.inputBacklogCount, 7);
    assert.equal(master.pendingCount + master.activeCount, 0);
    assert.equal(master.idle, false);
    assert.equal(master.admitInputs(3), 3);
    assert.equal(master.inputBacklogCount, 4);
    assert.equal(master.pendingCount, 3);
    assert.equal(readdirSync(corpusDir).filter((n) => !n.startsWith(".")).length, 3);
    while (master.nextTask("local-0")) {
      /* drain the queue */
    }
    assert.equal(master.pendingCount, 0);
    assert.equal(master.idle, false);
    assert.equal(master.admitInputs(3), 3);
    assert.equal(master.admitInputs(3), 1);
    assert.equal(master.inputBacklogCount, 0);
    assert.equal(master.external.size, 7);
  });

  it("a call without a limit lists the directory again and admits everything, backlog and new files alike", () => {
    const { master, inputDir } = setup(5);
    assert.equal(master.admitInputs(2), 2);
    writeFileSync(join(inputDir, "late"), "late seed\n");
    utimesSync(join(inputDir, "late"), new Date(Date.now() - 3600_000), new Date(Date.now() - 3600_000));
    assert.equal(master.admitInputs(), 4, "the 3 left from the first listing and the new file");
    assert.equal(master.inputBacklogCount, 0);
    assert.ok(master.external.has(sha256("late seed\n")));
    assert.equal(master.admitInputs(), 0, "nothing is admitted twice");
  });
});
