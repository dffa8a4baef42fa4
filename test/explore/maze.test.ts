// The maze example explored to quiescence: the same unique inputs whatever the slot count, and a
// SIGKILLed master resumed with --resume finishes the frontier with every input committed once.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { campaignStateLeft } from "./leftovers.ts";
import { pathToFileURL } from "node:url";
import { processesMentioning, waitFor } from "../helpers/campaign.ts";
import { ExploreDir, MAZE, MAZE_SEEDS } from "../helpers/explore.ts";

// 95 unique inputs and 1,314 children: enough for two slots to race, each run a Node start.
const DEPTH = "5";

interface MazeCore {
  closure(seeds: Uint8Array[], options?: { depth?: number }): Map<string, { children: number } | null>;
}

async function expectedFrontier(): Promise<{ hashes: string[]; generated: number; seeds: number }> {
  const core = (await import(pathToFileURL(join(MAZE, "..", "maze-core.mjs")).href)) as MazeCore;
  const seeds = readdirSync(MAZE_SEEDS).map((n) => readFileSync(join(MAZE_SEEDS, n)));
  const runs = core.closure(seeds, { depth: Number(DEPTH) });
  const hashes = [...runs.keys()].map((hex) => createHash("sha256").update(Buffer.from(hex, "hex")).digest("hex")).sort();
  const generated = [...runs.values()].reduce((n, r) => n + (r?.children ?? 0), 0);
  return { hashes, generated, seeds: seeds.length };
}

function seedFrom(e: ExploreDir): void {
  for (const n of readdirSync(MAZE_SEEDS)) e.seed(n, readFileSync(join(MAZE_SEEDS, n)));
}

/** The maze behind a wrapper that logs the SHA-256 of every input it is run on. */
function loggedMaze(e: ExploreDir): { target: string[]; executions: () => string[] } {
  const log = join(e.dir, "executions.log");
  const wrapper = e.script("maze.sh", `sha256sum "$1" | cut -c1-64 >> "${log}"\nexec "${process.execPath}" "${MAZE}" "$1"`);
  return { target: [wrapper, "@@"], executions: () => (existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : []) };
}

function repeats(runs: string[]): number {
  return runs.length - new Set(runs).size;
}

test("the maze reaches quiescence with the same unique inputs at -j 1 and -j 2, each executed once", async () => {
  const want = await expectedFrontier();
  const sets: string[][] = [];
  for (const jobs of ["1", "2"]) {
    const e = new ExploreDir();
    try {
      seedFrom(e);
      const maze = loggedMaze(e);
      const r = e.run(["-j", jobs, "--max-idle", "1", "-t", "10"], maze.target, { MAZE_DEPTH: DEPTH });
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.deepEqual([...maze.executions()].sort(), want.hashes, "every unique input executed exactly once");
      const s = e.stats();
      assert.equal(s.observations, want.hashes.length, "one observation per unique input");
      assert.equal(s.generated, want.generated, "children counted once per committed execution");
      assert.equal(s.interesting, want.hashes.length - want.seeds);
      assert.deepEqual(e.corpusFiles().sort(), want.hashes);
      assert.deepEqual(campaignStateLeft(e.corpus), [], "no hidden state after a clean end");
      sets.push(e.corpusFiles().sort());
    } finally {
      e.cleanup();
    }
  }
  assert.deepEqual(sets[0], sets[1]);
});

test("a SIGKILLed master resumed with --resume EPOCH finishes the frontier, every unique input committed exactly once", async () => {
  const want = await expectedFrontier();
  const e = new ExploreDir();
  try {
    seedFrom(e);
    const maze = loggedMaze(e);
    const first = e.start(["-j", "2", "--max-idle", "1", "-t", "10"], maze.target, { MAZE_DEPTH: DEPTH, MAZE_COST_MS: "40" });
    const epoch = await waitFor("the epoch", () => /epoch ([0-9a-f]{64})/.exec(first.output())?.[1]);
    await waitFor("a third of the frontier", () => (e.corpusFiles().length > want.hashes.length / 3 ? true : undefined), 120_000);
    first.child.kill("SIGKILL");
    await first.done;
    for (const pid of processesMentioning(e.dir)) process.kill(pid, "SIGKILL");
    assert.ok(e.corpusFiles().length < want.hashes.length, "killed before the end");
    assert.ok(readdirSync(join(e.corpus, ".fuzzfleet")).includes(`work-${epoch}`), "the crashed campaign's state is there");

    const r = e.run(["-j", "2", "--max-idle", "1", "-t", "10", "--resume", epoch], maze.target, { MAZE_DEPTH: DEPTH });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /\(resumed\)/);
    const resumed = /resumed: (\d+) interrupted commit\(s\) redone, (\d+) lease\(s\) taken over/.exec(r.stdout);
    assert.ok(resumed, r.stdout);
    const takenOver = Number(resumed[2]);
    assert.ok(Number(resumed[1]) + takenOver > 0, "the crash left work in flight, and the resume took it over");
    const runs = maze.executions();
    assert.deepEqual([...new Set(runs)].sort(), want.hashes, "every unique input was executed");
    assert.ok(repeats(runs) <= takenOver, `only tasks in flight at the crash ran twice (${repeats(runs)} repeats, ${takenOver} taken over)`);
    const s = e.stats();
    assert.equal(s.observations, want.hashes.length, "every unique input committed, none twice");
    assert.equal(s.generated, want.generated, "no commit was counted twice");
    assert.deepEqual(e.corpusFiles().sort(), want.hashes);
    assert.deepEqual(campaignStateLeft(e.corpus), [], "no hidden state after the resumed campaign ended cleanly");
  } finally {
    e.cleanup();
  }
});
