// SessionDrain, the end of a coordinator's sweep session, driven by scripted turns and times: each
// test asserts the actions and the state after every turn. No socket, no clock, no store.
import assert from "node:assert/strict";
import { test } from "node:test";
import { fleetSweepsNothing, MAX_SLEEP_MS, SessionDrain, type DrainTurn } from "../../src/core/session-drain.ts";

const GRACE_MS = 60_000;

/** A session an hour from its deadline (floor 5 s), serving, nothing in flight, the store fine. */
const turn = (over: Partial<DrainTurn> = {}): DrainTurn => ({
  now: 1_000,
  remainingSeconds: 3600,
  floorSeconds: 5,
  interrupted: false,
  engineDraining: null,
  chunksInFlight: 0,
  storeBlocked: false,
  storeFailed: false,
  fleetSweepsNothing: false,
  ...over,
});

test("serving sleeps until the deadline floor is due; at the floor it drains, and with nothing in flight it is drained", () => {
  const d = new SessionDrain({ drainGraceMs: GRACE_MS });
  assert.deepEqual(d.turn(turn({ remainingSeconds: 65 })), [{ kind: "sleep", ms: 60_000 }]);
  assert.equal(d.state, "serving");
  assert.deepEqual(d.turn(turn({ remainingSeconds: 4.9 })), [{ kind: "drain", reason: "deadline", line: "deadline: draining — waiting for the chunks in flight" }]);
  assert.equal(d.state, "drained");
  d.stop();
  assert.equal(d.state, "stopping");
  d.stopped();
  assert.equal(d.state, "closed");
});

test("a serving sleep is never longer than an hour nor shorter than a millisecond", () => {
  const d = new SessionDrain({ drainGraceMs: GRACE_MS });
  assert.deepEqual(d.turn(turn({ remainingSeconds: 86_400 * 30 })), [{ kind: "sleep", ms: MAX_SLEEP_MS }]);
  assert.deepEqual(d.turn(turn({ remainingSeconds: 5.0000001 })), [{ kind: "sleep", ms: 1 }]);
});

test("Ctrl-C drains at once; the grace runs from that turn, and the drain ends when the last chunk lands", () => {
  const d = new SessionDrain({ drainGraceMs: GRACE_MS });
  assert.deepEqual(d.turn(turn({ interrupted: true, chunksInFlight: 2, now: 1_000 })), [
    { kind: "drain", reason: "interrupted", line: "interrupted: draining — no new chunks; chunks in flight that do not land will be re-swept" },
    { kind: "sleep", ms: GRACE_MS },
  ]);
  assert.equal(d.state, "draining");
  assert.deepEqual(d.turn(turn({ interrupted: true, engineDraining: "interrupted", chunksInFlight: 1, now: 31_000 })), [{ kind: "sleep", ms: 30_000 }]);
  assert.deepEqual(d.turn(turn({ interrupted: true, engineDraining: "interrupted", chunksInFlight: 0, now: 32_000 })), []);
  assert.equal(d.state, "drained");
});

test("a drain the engine started itself is followed without a second drain or line", () => {
  const d = new SessionDrain({ drainGraceMs: GRACE_MS });
  assert.deepEqual(d.turn(turn({ engineDraining: "every lane exhausted", interrupted: true, fleetSweepsNothing: true, chunksInFlight: 1 })), [{ kind: "sleep", ms: GRACE_MS }]);
  assert.equal(d.state, "draining");
});

test("a fleet that sweeps nothing drains as 'all lanes disabled', after Ctrl-C and the deadline in precedence", () => {
  const disabled = new SessionDrain({ drainGraceMs: GRACE_MS });
  assert.deepEqual(disabled.turn(turn({ fleetSweepsNothing: true })), [
    { kind: "drain", reason: "all lanes disabled", line: "every lane is disabled on every worker attached: draining — the sweep stopped sweeping" },
  ]);
  assert.equal(disabled.state, "drained");
  const both = new SessionDrain({ drainGraceMs: GRACE_MS });
  assert.equal((both.turn(turn({ fleetSweepsNothing: true, remainingSeconds: 1 }))[0] as { reason: string }).reason, "deadline");
  const all = new SessionDrain({ drainGraceMs: GRACE_MS });
  assert.equal((all.turn(turn({ fleetSweepsNothing: true, remainingSeconds: 1, interrupted: true }))[0] as { reason: string }).reason, "interrupted");
});

test("a grace that runs out abandons what is in flight; while the store refuses writes it waits for an event instead", () => {
  const d = new SessionDrain({ drainGraceMs: GRACE_MS });
  d.turn(turn({ interrupted: true, chunksInFlight: 3, now: 0 }));
  assert.deepEqual(d.turn(turn({ engineDraining: "interrupted", chunksInFlight: 3, now: GRACE_MS, storeBlocked: true })), [{ kind: "sleep", ms: MAX_SLEEP_MS }]);
  assert.equal(d.state, "draining");
  assert.deepEqual(d.turn(turn({ engineDraining: "interrupted", chunksInFlight: 3, now: GRACE_MS + 5_000 })), [{ kind: "abandon", chunks: 3 }]);
  assert.equal(d.state, "drained");
});

test("a store that failed ends the session whatever else the turn says", () => {
  const serving = new SessionDrain({ drainGraceMs: GRACE_MS });
  assert.deepEqual(serving.turn(turn({ storeFailed: true, interrupted: true, chunksInFlight: 4 })), []);
  assert.equal(serving.state, "drained");
  const draining = new SessionDrain({ drainGraceMs: GRACE_MS });
  draining.turn(turn({ interrupted: true, chunksInFlight: 4 }));
  assert.deepEqual(draining.turn(turn({ storeFailed: true, engineDraining: "interrupted", chunksInFlight: 4 })), []);
  assert.equal(draining.state, "drained");
});

test("impossible transitions are refused: a turn once drained, a stop before it, stopped before a stop", () => {
  const d = new SessionDrain({ drainGraceMs: GRACE_MS });
  assert.throws(() => d.stop(), /stop while serving/);
  assert.throws(() => d.stopped(), /stopped while serving/);
  d.turn(turn({ remainingSeconds: 0 }));
  assert.throws(() => d.turn(turn()), /a turn while drained/);
  d.stop();
  assert.throws(() => d.stop(), /stop while stopping/);
  d.stopped();
  assert.throws(() => d.turn(turn()), /a turn while closed/);
});

test("fleetSweepsNothing: every attached worker has every lane with seeds left disabled", () => {
  const lanes = [
    { name: "a", hasWork: true },
    { name: "b", hasWork: true },
  ];
  const off = (...names: string[]) => ({ disabled: new Set(names) });
  assert.equal(fleetSweepsNothing(lanes, []), false, "nobody attached: workers may still come");
  assert.equal(fleetSweepsNothing(lanes, [off("a", "b")]), true);
  assert.equal(fleetSweepsNothing(lanes, [off("a", "b"), off("a")]), false, "one worker still sweeps b");
  assert.equal(fleetSweepsNothing(lanes, [off("a", "b"), off("b", "a")]), true);
  assert.equal(fleetSweepsNothing([{ name: "a", hasWork: true }, { name: "b", hasWork: false }], [off("a")]), true, "b has no seeds left: only a counts");
  assert.equal(fleetSweepsNothing([{ name: "a", hasWork: false }], [off("a")]), false, "no lane has seeds left: that is exhaustion, not disabling");
});
