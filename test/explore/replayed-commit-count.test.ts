// A commit that passed its fence before its master died and is finished at --resume
// (ExploreMaster.replayCommitting) is counted in the final statistics, once, under every way a
// master counts: a lone master (computeStats over the table's done records) and a master under
// broadcast ownership (ownStats, what it reports in the statistics exchange). Each is compared
// with the same frontier explored in one session by a lone master: the single-host reference.
// The masters are real, on real lease tables on disk; the runs are real executions of a small
// shell target; the death is the state a kill between the commit fence and the completion leaves
// (the fence is on disk before the table answers, the completion never came).
import assert from "node:assert/strict";
import { mkdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { computeStats } from "../../src/explore/command/stats.ts";
import { DEFAULT_BUDGETS } from "../../src/explore/defaults.ts";
import { executeTask, type ExecuteSetup } from "../../src/explore/executor/execute.ts";
import { ownStats } from "../../src/explore/fleet/stats-round.ts";
import type { ExploreMaster } from "../../src/explore/master/master.ts";
import type { Ownership } from "../../src/explore/master/options.ts";
import { canonicalManifest, LeaseTable } from "../../src/explore/state/lease-table.ts";
import { loneMaster } from "../helpers/explore.ts";
import { scratchDirs } from "../helpers/scratch.ts";

const { freshDir } = scratchDirs("replayed-commit-count");
const NO_EXECUTORS = { local_slots: 0, remote_workers: 0 };
const SLOT = "local-0";

// Each input of fewer than three lines has two children (itself plus a line "a", plus a line "b")
// and a child "same" every such run writes alike (a duplicate after the first, itself a one-line
// input): 3 seeds give 4 one-line inputs, 8 of two lines and 16 of three, 28 runs in all.
const TARGET = [
  "/bin/sh",
  "-c",
  'test "$(wc -l < "$1")" -ge 3 && exit 0; { cat "$1"; echo a; } > "$SYMCC_OUTPUT_DIR/a"; { cat "$1"; echo b; } > "$SYMCC_OUTPUT_DIR/b"; echo same > "$SYMCC_OUTPUT_DIR/same"',
  "target",
  "@@",
];

interface Campaign {
  dir: string;
  corpusDir: string;
  inputDir: string;
  leasesRoot: string;
}

function campaign(): Campaign {
  const dir = freshDir();
  const c = { dir, corpusDir: join(dir, "corpus"), inputDir: join(dir, "in"), leasesRoot: join(dir, "leases") };
  mkdirSync(c.corpusDir);
  mkdirSync(c.inputDir);
  // Old seeds, as a seed directory is: admitted at first sight.
  const old = new Date(Date.now() - 3600_000);
  for (const name of ["x", "y", "z"]) {
    writeFileSync(join(c.inputDir, name), `${name}\n`);
    utimesSync(join(c.inputDir, name), old, old);
  }
  return c;
}

/** One session of a master of this campaign: a lone one, or rank 0 of two under broadcast ownership. */
function session(c: Campaign, ownership: Ownership | "lone"): { master: ExploreMaster; leases: LeaseTable; setup: ExecuteSetup } {
  const leases = new LeaseTable({ root: c.leasesRoot, durability: "fence" });
  const ranks = ownership === "lone" ? [0] : [0, 1];
  const master = loneMaster(c, { leases, ranks, ownership: ownership === "lone" ? "rendezvous" : ownership });
  const setup: ExecuteSetup = {
    corpusDir: c.corpusDir,
    stageRoot: master.stageRoot(SLOT),
    target: TARGET,
    targetCwd: c.dir,
    simulate: false,
    budgets: DEFAULT_BUDGETS,
    scratchRoot: join(c.dir, "scratch", SLOT),
  };
  return { master, leases, setup };
}

/** Runs every task the master has, and every task their commits bring, until it is idle. */
async function exploreToIdle(master: ExploreMaster, setup: ExecuteSetup): Promise<void> {
  const signal = new AbortController().signal;
  for (;;) {
    master.admitInputs();
    master.scanCorpus();
    const task = master.nextTask(SLOT);
    if (task === null) break;
    assert.equal(master.consumeResult(SLOT, await executeTask(task, setup, signal)), "committed");
  }
  assert.equal(master.idle, true);
}

function doneCounts(leases: LeaseTable): { observations: number; generated: number } {
  const done = leases.snapshot().filter((r) => r.status === "done" && r.commit && r.commit.worker !== "budget");
  return { observations: done.length, generated: done.reduce((n, r) => n + r.commit!.num_generated, 0) };
}

/** The single-host reference: the same frontier explored by a lone master in one session. */
async function reference(): Promise<{ observations: number; generated: number }> {
  const c = campaign();
  const { master, leases, setup } = session(c, "lone");
  await exploreToIdle(master, setup);
  master.close();
  const s = computeStats({ leases, master, corpusDir: c.corpusDir, elapsedSeconds: 1, executors: { local: 1, remote: 0 } });
  leases.close();
  assert.deepEqual({ observations: s.observations, generated: s.generated }, { observations: 28, generated: 36 }, "28 runs, 12 of them with 3 children");
  assert.deepEqual(s.session, { observations: 28, generated: 36 });
  return { observations: s.observations, generated: s.generated };
}

/**
 * A first session that commits one run, then dies with a second run's commit past its fence and
 * not completed (its children staged, the record `committing`), the other tasks leased. Returns
 * the id left committing.
 */
async function diedMidCommit(c: Campaign, ownership: Ownership | "lone"): Promise<{ committing: string }> {
  const { master, leases, setup } = session(c, ownership);
  const signal = new AbortController().signal;
  master.admitInputs();
  const first = master.nextTask(SLOT)!;
  assert.equal(master.consumeResult(SLOT, await executeTask(first, setup, signal)), "committed");
  const second = master.nextTask(SLOT)!;
  const r = await executeTask(second, setup, signal);
  assert.equal(r.children.length, 3);
  // What commitResult does up to the fence; the promotion and the completion never happen.
  const manifest = canonicalManifest({ worker: SLOT, staging_id: r.stagingId, hashes: r.children, num_generated: r.generated });
  assert.equal(leases.beginCommit(second.hash, second.fence, manifest, Date.now()), true);
  leases.close();
  return { committing: second.hash };
}

for (const ownership of ["lone", "broadcast"] as const) {
  test(`a commit left committing by a dead master and redone at --resume is counted once (${ownership === "lone" ? "a lone master" : "broadcast ownership"})`, async () => {
    const want = await reference();
    const c = campaign();
    const died = await diedMidCommit(c, ownership);

    const { master, leases, setup } = session(c, ownership);
    assert.equal(leases.record(died.committing)?.status, "committing");
    assert.equal(master.replayCommitting(), 1);
    assert.equal(leases.record(died.committing)?.status, "done");
    master.recoverExpired(0);
    await exploreToIdle(master, setup);
    master.close();
    assert.deepEqual(doneCounts(leases), want, "the table holds every commit of the frontier once");

    // This session ran everything but the two commits of the first: the replayed one is not its run.
    const thisSession = { observations: want.observations - 2, generated: want.generated - 6 };
    assert.deepEqual({ observations: master.counters.observations, generated: master.counters.generated }, thisSession);
    assert.equal(master.counters.replayedCommits, 1);
    if (ownership === "lone") {
      const s = computeStats({ leases, master, corpusDir: c.corpusDir, elapsedSeconds: 1, executors: { local: 1, remote: 0 } });
      assert.deepEqual({ observations: s.observations, generated: s.generated }, want);
      assert.deepEqual(s.session, thisSession);
      assert.deepEqual(s.by_master, { "0": want.observations });
    } else {
      const reported = ownStats(master, 0, NO_EXECUTORS);
      assert.deepEqual({ observations: reported.observations, generated: reported.generated }, want, "what this master reports in the statistics exchange");
    }
    leases.close();
  });
}
