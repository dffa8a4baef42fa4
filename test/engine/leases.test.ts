// Leases (sweep/engine/leases.ts), the one bookkeeping of who holds a chunk or a minimize unit, with
// plain values and injected time: a heartbeat counts only from the holder, silence past the lease
// expires a unit, and a checkpoint's snapshot puts back who held what.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Leases, type Lease } from "../../src/sweep/engine/leases.ts";
import { localWorker, type WorkerView } from "../../src/sweep/engine/sweep-engine.ts";

const worker = (label: string): WorkerView => ({ ...localWorker([], new Map()), label });
interface Unit extends Lease {
  readonly id: number;
}

test("a heartbeat counts only from the holder; a unit silent for the lease is expired, one that beat is not", () => {
  const clock = { now: 0 };
  const a = worker("a");
  const b = worker("b");
  const leases = new Leases<Unit>(() => clock.now);
  leases.hold(1, { id: 1, worker: a, lastBeatMs: 0 });
  leases.hold(2, { id: 2, worker: b, lastBeatMs: 0 });
  clock.now = 9_000;
  assert.equal(leases.heartbeat(b, 1), false, "b does not hold unit 1");
  assert.equal(leases.heartbeat(a, 1), true);
  assert.equal(leases.heartbeat(a, 3), false, "nobody holds unit 3");
  clock.now = 10_001;
  assert.deepEqual(
    leases.expired(10).map((u) => u.id),
    [2],
  );
  assert.deepEqual(
    leases.heldBy(a).map((u) => u.id),
    [1],
  );
  assert.equal(leases.release(2)?.id, 2);
  assert.equal(leases.release(2), undefined, "released once");
  assert.deepEqual(leases.expired(10), []);
  assert.equal(leases.size, 1);
});

test("restoring a snapshot puts back who held what: a unit handed out after it is gone, one released after it is held again", () => {
  const a = worker("a");
  const leases = new Leases<Unit>(() => 0);
  leases.hold(1, { id: 1, worker: a, lastBeatMs: 0 });
  const mark = leases.snapshot();
  leases.hold(2, { id: 2, worker: a, lastBeatMs: 0 });
  leases.release(1);
  leases.restore(mark);
  assert.deepEqual(
    [...leases.values()].map((u) => u.id),
    [1],
  );
  leases.hold(3, { id: 3, worker: a, lastBeatMs: 0 });
  assert.equal(mark.size, 1, "the snapshot is not the live table");
});
