// The statistics exchange after a stall: a master that stalled past its lease while another took
// its share over, and wakes only to report, must not count that share's commits too — the master
// that took it over reports them. Without the renewal before counting, the campaign's sum counts
// each of those commits twice. Masters of one campaign on one lease directory, the clock injected;
// the run is a real execution (simulate mode).
import assert from "node:assert/strict";
import { test } from "node:test";
import { executeTask } from "../../src/explore/executor/execute.ts";
import { ownStats } from "../../src/explore/fleet/stats-round.ts";
import { LeaseTable } from "../../src/explore/state/lease-table.ts";
import { scratchDirs } from "../helpers/scratch.ts";
import { ownedSeedMaster } from "./owned-seed.ts";

const { freshDir } = scratchDirs("stats-after-stall");
const TTL = 60_000;
const NO_EXECUTORS = { local_slots: 0, remote_workers: 0 };

test("a master woken from a stall after its share was taken over reports none of that share's commits; the taker reports them once", async () => {
  const { leasesRoot, master, clock, setup } = ownedSeedMaster(freshDir(), TTL);
  assert.equal(master.admitInputs(), 1);
  const task = master.nextTask("local-0");
  assert.ok(task);
  const r = await executeTask(task, setup("local-0"), new AbortController().signal);
  master.consumeResult("local-0", r);
  assert.equal(ownStats(master, 0, NO_EXECUTORS).observations, 1, "the commit is counted by the master that serves its share");

  // The master stalls past its lease; another takes its share over (the lease directory alone says so).
  clock.now += TTL + 1;
  const other = new LeaseTable({ root: leasesRoot, durability: "fence" });
  other.takePartition({ rank: 1, ranks: [0, 1], holder: "other-master", epoch: "e", ttlMs: TTL, wallNow: () => clock.now, needLockFree: false });
  assert.deepEqual(other.takeOverShares().map((t) => [t.kind, t.rank]), [["taken", 0]]);
  const takerCounts = other.snapshot().filter((rec) => rec.status === "done" && rec.commit && rec.commit.worker !== "budget").length;
  assert.equal(takerCounts, 1, "the taker serves the commit now");

  // Woken, the first thing the master does is report its statistics.
  const woken = ownStats(master, 0, NO_EXECUTORS);
  assert.equal(woken.observations + takerCounts, 1, `each commit once in the sum (the woken master reported ${woken.observations})`);
  assert.equal(woken.generated, 0);
  other.close();
  master.close();
});
