// The stats exchange: one valid report per peer, exact ACKs only when all reported, totals and
// per-master breakdown, quarantine of anything else (malformed frames are the wire schema's), and a bounded wait that names the silent.
import assert from "node:assert/strict";
import { test } from "node:test";
import { StatsCollector, StatsSender } from "../../src/core/stats-exchange.ts";
import { FromPeer, FromRoot } from "../../src/net/messages.ts";

const T = (c: string) => c.repeat(64);

const ROOT = { observations: 7, generated: 10, interesting: 3, external: 2, late: 0, local_slots: 2, remote_workers: 0 };
const PEER1 = { observations: 3, generated: 4, interesting: 2, external: 0, late: 1, local_slots: 1, remote_workers: 4 };
const PEER2 = { observations: 5, generated: 6, interesting: 1, external: 1, late: 0, local_slots: 0, remote_workers: 3 };

test("the root sums every report with its own and acknowledges each peer with its exact token", () => {
  const c = new StatsCollector({ rank: 0, own: ROOT, peers: [2, 1] });
  const s1 = new StatsSender(1, T("a"));
  const s2 = new StatsSender(2, T("b"));
  assert.deepEqual(c.onStats(2, s2.message(PEER2)), { class: "accepted", acks: [] });
  assert.deepEqual(c.outcome(0, 1000), {
    complete: false,
    settled: false,
    received: [2],
    pending: [1],
    totals: { observations: 12, generated: 16, interesting: 4, external: 3, late: 0, local_slots: 2, remote_workers: 3 },
    byMaster: { 0: 7, 2: 5 },
    quarantined: 0,
  });
  const last = c.onStats(1, s1.message(PEER1));
  assert.deepEqual(last, {
    class: "accepted",
    acks: [
      { rank: 1, token: T("a") },
      { rank: 2, token: T("b") },
    ],
  });
  assert.deepEqual(c.outcome(10, 1000), {
    complete: true,
    settled: true,
    received: [1, 2],
    pending: [],
    totals: { observations: 15, generated: 20, interesting: 6, external: 3, late: 1, local_slots: 3, remote_workers: 7 },
    byMaster: { 0: 7, 1: 3, 2: 5 },
    quarantined: 0,
  });
  for (const [sender, ack] of [[s1, last.acks[0]], [s2, last.acks[1]]] as const) {
    assert.equal(sender.onAck(ack), "exact");
    assert.equal(sender.done, true);
  }
});

test("foreign and duplicate reports are quarantined and change nothing", () => {
  const c = new StatsCollector({ rank: 0, own: ROOT, peers: [1, 2] });
  const good = { rank: 1, token: T("a"), ...PEER1 };
  assert.equal(c.onStats(1, { ...good, rank: 2 }).class, "foreign", "rank must be the sender");
  assert.equal(c.onStats(7, { ...good, rank: 7 }).class, "unowned");
  assert.equal(c.onStats(1, good).class, "accepted", "a peer whose bad reports were refused may still report");
  assert.equal(c.onStats(1, { ...good, generated: 999 }).class, "duplicate");
  assert.equal(c.onStats(1, good).class, "duplicate");
  assert.deepEqual(c.counters, { foreign: 1, unowned: 1, duplicate: 2 });
  const out = c.outcome(0, 1000);
  assert.deepEqual([out.received, out.pending, out.totals.generated, out.quarantined], [[1], [2], 14, 4]);
});

test("malformed statistics frames never reach the ledgers: the one wire check refuses them", () => {
  const good = { type: "stats", rank: 1, token: T("a"), ...PEER1 };
  for (const bad of [
    { ...good, generated: -1 },
    { ...good, interesting: 1.5 },
    { ...good, external: true },
    { ...good, local_slots: -1 },
    { ...good, remote_workers: undefined },
    { ...good, observations: undefined },
    { ...good, token: "abc" },
    { ...good, extra: 0 },
    "stats",
  ]) {
    assert.equal(FromPeer.safeParse(bad).success, false, JSON.stringify(bad));
  }
  assert.equal(FromPeer.safeParse(good).success, true);
  for (const bad of [{ type: "stats_ack", rank: 2, token: "b" }, { type: "stats_ack", rank: "2", token: T("b") }, null]) {
    assert.equal(FromRoot.safeParse(bad).success, false, JSON.stringify(bad));
  }
});

test("a silent peer is listed as pending and the exchange settles incomplete at the deadline", () => {
  const c = new StatsCollector({ rank: 0, own: ROOT, peers: [1, 2] });
  c.onStats(1, { rank: 1, token: T("a"), ...PEER1 });
  c.onStats(2, { rank: 1, token: T("b"), ...PEER2 });
  assert.deepEqual(c.outcome(149, 150), {
    complete: false,
    settled: false,
    received: [1],
    pending: [2],
    totals: { observations: 10, generated: 14, interesting: 5, external: 2, late: 1, local_slots: 3, remote_workers: 4 },
    byMaster: { 0: 7, 1: 3 },
    quarantined: 1,
  });
  const late = c.outcome(150, 150);
  assert.deepEqual([late.complete, late.settled, late.received, late.pending], [false, true, [1], [2]]);
  assert.equal(c.complete, false);
});

test("a root without the peers' reports never hands out ACKs", () => {
  const c = new StatsCollector({ rank: 3, own: ROOT, peers: [0] });
  assert.deepEqual(c.onStats(0, { rank: 2, token: T("c"), ...PEER1 }), { class: "foreign", acks: [] });
  assert.deepEqual(c.onStats(0, { rank: 0, token: T("c"), ...PEER1 }), { class: "accepted", acks: [{ rank: 0, token: T("c") }] });
  assert.deepEqual(c.outcome(0, 0).byMaster, { 3: 7, 0: 3 });
});

test("a participant accepts only the ACK with its own rank and token", () => {
  const s = new StatsSender(2, T("b"));
  assert.deepEqual(s.message(PEER2), { rank: 2, token: T("b"), ...PEER2 });
  assert.equal(s.onAck({ rank: 2, token: T("c") }), "foreign");
  assert.equal(s.onAck({ rank: 1, token: T("b") }), "foreign");
  assert.equal(s.done, false);
  assert.deepEqual(s.outcome(99, 100), { complete: false, settled: false });
  assert.equal(s.onAck({ rank: 2, token: T("b") }), "exact");
  assert.equal(s.done, true);
  assert.equal(s.onAck({ rank: 2, token: T("b") }), "duplicate");
  assert.deepEqual(s.counters, { foreign: 2, duplicate: 1 });
  assert.deepEqual(s.outcome(99, 100), { complete: true, settled: true });
});

test("a participant that never hears the exact ACK settles incomplete at its deadline", () => {
  const s = new StatsSender(1, T("a"));
  s.onAck({ rank: 1, token: T("f") });
  assert.deepEqual(s.outcome(100, 100), { complete: false, settled: true });
});

test("senders refuse bad tokens and bad counters", () => {
  assert.throws(() => new StatsSender(1, "short"), /64 lowercase hex/);
  assert.throws(() => new StatsSender(-1, T("a")), /non-negative integer/);
  assert.throws(() => new StatsSender(1, T("a")).message({ ...PEER1, generated: -2 }), /non-negative integers/);
  assert.throws(() => new StatsCollector({ rank: 0, own: ROOT, peers: [0, 1] }), /other than the root's/);
});

