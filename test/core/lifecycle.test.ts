// The stop ledger: only exact ACKs count, the deadline bounds the wait, the gate closes at stop.
import assert from "node:assert/strict";
import { test } from "node:test";
import { StopLedger } from "../../src/core/lifecycle.ts";

const T = (c: string) => c.repeat(32);

test("every participant acknowledging its exact token completes the shutdown", () => {
  const l = new StopLedger();
  l.add("a");
  l.add("b");
  assert.ok(l.mayAssign("a"));
  l.begin("a", T("1"));
  l.begin("b", T("2"));
  assert.ok(!l.mayAssign("a"), "no work after the stop began");
  l.setDeadline(1000);
  assert.deepEqual(l.outcome(0), { complete: false, settled: false, acked: [], pending: ["a", "b"], gone: [], available: [] });
  assert.equal(l.ack("a", T("1")), "exact");
  assert.equal(l.ack("b", T("2")), "exact");
  assert.deepEqual(l.outcome(10), { complete: true, settled: true, acked: ["a", "b"], pending: [], gone: [], available: [] });
});

test("a wrong or foreign token changes nothing; the deadline settles the shutdown as incomplete", () => {
  const l = new StopLedger();
  l.add("a");
  l.add("b");
  l.begin("a", T("1"));
  l.begin("b", T("2"));
  l.setDeadline(500);
  assert.equal(l.ack("a", T("2")), "wrong-token", "b's token is not a's");
  assert.equal(l.ack("zz", T("1")), "unknown");
  assert.equal(l.wrongAcks("a"), 1);
  assert.equal(l.state("a"), "stopping");
  assert.equal(l.outcome(499).settled, false);
  const end = l.outcome(500);
  assert.deepEqual([end.settled, end.complete, end.pending], [true, false, ["a", "b"]]);
});

test("acking twice, or acking before a stop, does not count twice", () => {
  const l = new StopLedger();
  l.add("a");
  assert.equal(l.ack("a", T("1")), "not-stopping");
  l.begin("a", T("1"));
  assert.equal(l.ack("a", T("1")), "exact");
  assert.equal(l.ack("a", T("1")), "not-stopping");
  assert.throws(() => l.begin("a", T("3")), /acked, cannot begin/);
});

test("leaving before the stop removes a participant; leaving after it makes the shutdown incomplete", () => {
  const l = new StopLedger();
  l.add("early");
  l.add("late");
  assert.ok(l.leaveBeforeStop("early"));
  l.begin("late", T("9"));
  assert.ok(!l.leaveBeforeStop("late"));
  l.gone("late", "connection closed");
  assert.deepEqual(l.outcome(0), { complete: false, settled: true, acked: [], pending: [], gone: [{ name: "late", why: "connection closed" }], available: [] });
});

test("tokens must look random", () => {
  const l = new StopLedger();
  l.add("a");
  assert.throws(() => l.begin("a", "short"), /at least 16/);
});
