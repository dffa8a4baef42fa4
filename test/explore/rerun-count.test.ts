// An input executed twice because its lease was lost while the first run was still going (a
// stalled master whose share another master took over, then let expire) is counted once: the
// result under the lost fence is refused and adds nothing to `generated`, in whichever order the
// two results arrive. Only masters that serve shares of one campaign can lose a lease this way (a
// lone master's table is its own journal), so the master is rank 0 of two; the takeover is made
// by a second table on the same directory, the clock is injected; both runs are real executions
// (simulate mode, whose children depend only on the input).
import assert from "node:assert/strict";
import { test } from "node:test";
import { computeStats } from "../../src/explore/command/stats.ts";
import { executeTask } from "../../src/explore/executor/execute.ts";
import { LeaseTable } from "../../src/explore/state/lease-table.ts";
import type { TaskResult } from "../../src/explore/task.ts";
import { scratchDirs } from "../helpers/scratch.ts";
import { ownedSeedMaster } from "./owned-seed.ts";

const { freshDir } = scratchDirs("rerun-count");
const TTL = 60_000;

async function twiceRun(order: "lost-first" | "current-first"): Promise<void> {
  const { corpusDir, leasesRoot, leases, master, clock, setup } = ownedSeedMaster(freshDir(), TTL);
  assert.equal(master.admitInputs(), 1);
  const first = master.nextTask("local-0");
  assert.ok(first);

  const signal = new AbortController().signal;
  const r1: TaskResult = await executeTask(first, setup("local-0"), signal);
  assert.equal(r1.failure, null);
  assert.ok(r1.generated > 0, "simulate mode gives the run children");

  // The first run is still "going": its master stalls past the TTL and its share is taken over by
  // another master (as on a file system that drops a stalled holder's lock with its lease), which
  // runs the input again under a new fence and dies in turn; the first master's heartbeat finds
  // its share, and so its fence, lost.
  clock.now += TTL + 1;
  const other = new LeaseTable({ root: leasesRoot, durability: "fence" });
  other.takePartition({ rank: 1, ranks: [0, 1], holder: "other-master", epoch: "e", ttlMs: TTL, wallNow: () => clock.now, needLockFree: false });
  assert.deepEqual(other.takeOverShares().map((t) => [t.kind, t.rank]), [["taken", 0]]);
  const record = other.snapshot().find((r) => r.id === first.hash);
  assert.ok(record);
  assert.ok(other.claim(first.hash, record.payload, "other-master", { now: clock.now, ttlMs: 0, worker: 1 }));
  other.partition!.abandon();
  master.heartbeat();
  assert.equal(master.counters.lostLeases, 1);
  clock.now += TTL + 1;
  assert.equal(master.recoverExpired(), 1, "the lapsed lease is taken back under a new fence");
  const second = master.nextTask("local-1");
  assert.ok(second);
  assert.equal(second.hash, first.hash);
  assert.notEqual(second.fence, first.fence);
  const r2 = await executeTask(second, setup("local-1"), signal);
  assert.equal(r2.generated, r1.generated, "the same input gives the same children");

  const notes =
    order === "lost-first"
      ? [master.consumeResult("local-0", r1), master.consumeResult("local-1", r2)]
      : [master.consumeResult("local-1", r2), master.consumeResult("local-0", r1)];
  // A batched commit settles on a later turn.
  master.close();
  assert.equal(master.counters.observations, 1, `one observation (acks ${notes.join(", ")})`);
  assert.equal(master.counters.generated, r1.generated, "the children of one execution");
  assert.equal(master.counters.staleResults, 1, "the run under the lost fence is refused");
  const s = computeStats({ leases, master, corpusDir, elapsedSeconds: 1, executors: { local: 2, remote: 0 } });
  assert.deepEqual([s.observations, s.generated], [1, r1.generated]);
}

test("a run whose lease was lost and run again counts once: the lost run's result arrives first", () => twiceRun("lost-first"));
test("a run whose lease was lost and run again counts once: the lost run's result arrives last", () => twiceRun("current-first"));
