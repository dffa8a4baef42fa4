// Two-phase quiescence: the root proposes only after a stable idle window and its own refresh,
// commits only on unanimous YES, aborts a cancelled token exactly once, and treats busy after
// COMMIT as a conflict; participants freeze on YES and only the exact token moves them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ParticipantQuiescence } from "../../src/core/quiescence-participant.ts";
import { type Action, RootQuiescence } from "../../src/core/quiescence.ts";
import { FromPeer, FromRoot } from "../../src/net/messages.ts";

const T = (c: string) => c.repeat(64);
const T1 = T("a");
const T2 = T("b");
const T3 = T("c");
const MAX_IDLE = 1000;
const FRESH = 500;

/** A root with peers 1 and 2 whose statuses are published by `say`. */
function fleet() {
  const root = new RootQuiescence({ peers: [2, 1], maxIdleMs: MAX_IDLE, freshMs: FRESH });
  const seq = new Map<number, number>();
  const say = (rank: number, idle: boolean, now: number) => {
    const sequence = (seq.get(rank) ?? 0) + 1;
    seq.set(rank, sequence);
    return root.onStatus(rank, { rank, sequence, idle }, now);
  };
  /** Both peers report idle every 400 ms from `from` to `to`, ticking after each report. */
  const idleUntil = (from: number, to: number): Action[] => {
    const actions: Action[] = [];
    for (let t = from; t <= to; t += 400) {
      say(1, true, t);
      say(2, true, t);
      actions.push(...root.tick(t));
    }
    return actions;
  };
  return { root, say, idleUntil };
}

/** A fleet that has just sent PREPARE T1 at time 1200. */
function proposing() {
  const f = fleet();
  f.root.localIdle(true, 0);
  assert.deepEqual(f.idleUntil(0, 1200), [{ kind: "refresh" }]);
  assert.deepEqual(f.root.afterRefresh(true, 1200, T1), [{ kind: "prepare", token: T1, to: [1, 2] }]);
  return f;
}

/** A fleet that has just sent COMMIT T1 at time 1300. */
function committing() {
  const f = proposing();
  f.root.onVote(1, { rank: 1, token: T1, idle: true }, 1300);
  assert.deepEqual(f.root.onVote(2, { rank: 2, token: T1, idle: true }, 1300).actions, [{ kind: "commit", token: T1, to: [1, 2] }]);
  return f;
}

test("no PREPARE before the idle window; the root refreshes first, then prepares", () => {
  const { root, idleUntil } = fleet();
  assert.deepEqual(root.localIdle(true, 0), []);
  assert.deepEqual(idleUntil(0, 800), [], "window of 1000 ms not yet elapsed");
  assert.deepEqual(root.tick(999), []);
  assert.deepEqual(root.tick(1000), [{ kind: "refresh" }]);
  assert.deepEqual(root.tick(1100), [], "one refresh at a time");
  assert.equal(root.phase, "refreshing");
  assert.deepEqual(root.afterRefresh(true, 1100, T1), [{ kind: "prepare", token: T1, to: [1, 2] }]);
  assert.equal(root.phase, "proposing");
  assert.deepEqual(root.tick(1200), [], "no second PREPARE while one is open");
});

test("a busy refresh uses no token and restarts the idle window", () => {
  const { root, idleUntil } = fleet();
  root.localIdle(true, 0);
  assert.deepEqual(idleUntil(0, 1200), [{ kind: "refresh" }]);
  assert.deepEqual(root.afterRefresh(false, 1200, T1), []);
  assert.equal(root.phase, "watching");
  assert.deepEqual(idleUntil(1600, 2400), [], "the root counts as busy until it says otherwise");
  root.localIdle(true, 2500);
  assert.deepEqual(idleUntil(2800, 3200), []);
  assert.deepEqual(root.tick(3499), []);
  assert.deepEqual(root.tick(3500), [{ kind: "refresh" }]);
  assert.deepEqual(root.afterRefresh(true, 3500, T1), [{ kind: "prepare", token: T1, to: [1, 2] }], "the unused token is still fresh");
});

test("a peer that turns busy during the root's refresh prevents the PREPARE", () => {
  const { root, say, idleUntil } = fleet();
  root.localIdle(true, 0);
  assert.deepEqual(idleUntil(0, 1200), [{ kind: "refresh" }]);
  say(2, false, 1250);
  say(2, true, 1300);
  assert.deepEqual(root.afterRefresh(true, 1300, T1), [], "the window restarted at 1300");
  assert.deepEqual(idleUntil(1600, 2000), []);
  assert.deepEqual(idleUntil(2400, 2400), [{ kind: "refresh" }]);
});

test("every YES while still globally idle commits; exact ACKs from all peers end the loop", () => {
  const { root, idleUntil } = proposing();
  assert.deepEqual(root.onVote(1, { rank: 1, token: T1, idle: true }, 1300), { class: "yes", actions: [] });
  assert.deepEqual(root.onVote(2, { rank: 2, token: T1, idle: true }, 1300), {
    class: "yes",
    actions: [{ kind: "commit", token: T1, to: [1, 2] }],
  });
  assert.equal(root.phase, "committing");
  assert.deepEqual(root.onAck(2, { rank: 2, token: T1, committed: true }), { class: "committed", actions: [] });
  assert.deepEqual(root.onAck(2, { rank: 2, token: T1, committed: true }), { class: "stale", actions: [] }, "one ACK per peer");
  assert.deepEqual(root.onAck(1, { rank: 1, token: T1, committed: true }), { class: "committed", actions: [{ kind: "committed" }] });
  assert.equal(root.phase, "committed");
  assert.deepEqual(idleUntil(1400, 9000), [], "nothing is proposed after the decision");
  assert.deepEqual(root.counters, { "ack.stale": 1 });
});

test("a BUSY vote emits exactly one ABORT with the proposal's token, then none", () => {
  const { root, idleUntil } = proposing();
  assert.deepEqual(root.onVote(1, { rank: 1, token: T1, idle: false }, 1300), {
    class: "busy",
    actions: [{ kind: "abort", token: T1, to: [1, 2] }],
  });
  assert.deepEqual(root.onVote(2, { rank: 2, token: T1, idle: false }, 1300), { class: "stale", actions: [] });
  assert.deepEqual(root.onVote(2, { rank: 2, token: T1, idle: true }, 1300), { class: "stale", actions: [] });
  assert.deepEqual(root.tick(1300), []);
  assert.equal(root.phase, "watching");
  // The window restarts from the next idle observation, and a new round needs a new token.
  assert.deepEqual(idleUntil(1400, 2200), []);
  assert.deepEqual(idleUntil(2600, 2600), [{ kind: "refresh" }]);
  assert.throws(() => root.afterRefresh(true, 2600, T1), /never be reused/);
});

test("a second round after an abort commits on its own token only", () => {
  const { root, idleUntil } = proposing();
  root.onVote(2, { rank: 2, token: T1, idle: false }, 1300);
  assert.deepEqual(idleUntil(1400, 2600), [{ kind: "refresh" }]);
  assert.deepEqual(root.afterRefresh(true, 2600, T2), [{ kind: "prepare", token: T2, to: [1, 2] }]);
  assert.equal(root.onVote(1, { rank: 1, token: T1, idle: true }, 2700).class, "stale");
  assert.equal(root.onVote(2, { rank: 2, token: T1, idle: true }, 2700).class, "stale");
  assert.equal(root.phase, "proposing", "votes for the aborted token do not count");
  root.onVote(1, { rank: 1, token: T2, idle: true }, 2700);
  assert.deepEqual(root.onVote(2, { rank: 2, token: T2, idle: true }, 2700).actions, [{ kind: "commit", token: T2, to: [1, 2] }]);
});

test("a current BUSY status cancels an open proposal with one ABORT", () => {
  const { root, say } = proposing();
  assert.deepEqual(say(2, false, 1300), { class: "current", actions: [{ kind: "abort", token: T1, to: [1, 2] }] });
  assert.deepEqual(say(2, false, 1400), { class: "current", actions: [] });
  assert.equal(root.onVote(1, { rank: 1, token: T1, idle: true }, 1400).class, "stale");
});

test("the root turning busy cancels an open proposal", () => {
  const { root } = proposing();
  assert.deepEqual(root.localIdle(false, 1300), [{ kind: "abort", token: T1, to: [1, 2] }]);
  assert.deepEqual(root.localIdle(false, 1301), []);
});

test("an unfresh peer status blocks the proposal until the peer reports again", () => {
  const { root, say } = fleet();
  root.localIdle(true, 0);
  say(2, true, 0);
  const actions: Action[] = [];
  for (let t = 0; t <= 2000; t += 400) {
    say(1, true, t);
    actions.push(...root.tick(t));
  }
  assert.deepEqual(actions, [], "peer 2 went silent after 0 and its status is older than freshMs");
  say(2, true, 2100);
  say(1, true, 2100);
  assert.deepEqual(root.tick(2100), []);
  for (const t of [2500, 2900]) {
    say(1, true, t);
    say(2, true, t);
  }
  assert.deepEqual(root.tick(3099), []);
  assert.deepEqual(root.tick(3100), [{ kind: "refresh" }], "the window started when peer 2 was fresh again");
});

test("a peer status going unfresh during a proposal aborts it", () => {
  const { root, say } = proposing();
  say(1, true, 1500);
  assert.deepEqual(root.tick(1599), []);
  assert.deepEqual(root.tick(1701), [{ kind: "abort", token: T1, to: [1, 2] }], "peer 2 last reported at 1200");
});

test("the last YES arriving when the fleet is no longer globally idle aborts instead of committing", () => {
  const { root } = proposing();
  root.onVote(1, { rank: 1, token: T1, idle: true }, 1300);
  assert.deepEqual(root.onVote(2, { rank: 2, token: T1, idle: true }, 1800), {
    class: "yes",
    actions: [{ kind: "abort", token: T1, to: [1, 2] }],
  });
  assert.equal(root.phase, "watching");
});

test("a BUSY status after COMMIT is a conflict, never a silent success", () => {
  const { root, say } = committing();
  assert.deepEqual(say(1, true, 1400), { class: "current", actions: [] });
  assert.deepEqual(say(1, false, 1500), {
    class: "conflict",
    actions: [{ kind: "conflict", reason: "master 1 reported busy after COMMIT was sent" }],
  });
  assert.equal(root.phase, "conflict");
  assert.deepEqual(root.onAck(1, { rank: 1, token: T1, committed: true }).actions, []);
  assert.deepEqual(root.onAck(2, { rank: 2, token: T1, committed: true }).actions, [], "no 'committed' after a conflict");
  assert.deepEqual(root.tick(5000), []);
});

test("the root finding work after COMMIT is a conflict", () => {
  const { root } = committing();
  assert.deepEqual(root.localIdle(true, 1400), []);
  assert.deepEqual(root.localIdle(false, 1500), [{ kind: "conflict", reason: "the root found work after COMMIT was sent" }]);
});

test("a rejected commit ACK is a conflict", () => {
  const { root } = committing();
  assert.deepEqual(root.onAck(1, { rank: 1, token: T1, committed: false }), {
    class: "rejected",
    actions: [{ kind: "conflict", reason: "master 1 rejected the COMMIT" }],
  });
  assert.equal(root.phase, "conflict");
});

test("stale and foreign messages change nothing and are counted", () => {
  const { root, say } = proposing();
  // Peer 1's last sequence is 4 (reports at 0, 400, 800, 1200).
  assert.equal(root.onStatus(1, { rank: 1, sequence: 4, idle: false }, 1300).class, "stale");
  assert.equal(root.onStatus(1, { rank: 1, sequence: 2, idle: false }, 1300).class, "stale");
  assert.equal(root.onStatus(1, { rank: 2, sequence: 99, idle: false }, 1300).class, "foreign", "a status naming another rank");
  assert.equal(root.onStatus(9, { rank: 9, sequence: 99, idle: false }, 1300).class, "unowned");
  assert.equal(root.onVote(1, { rank: 1, token: T2, idle: false }, 1300).class, "stale");
  assert.equal(root.onVote(1, { rank: 2, token: T1, idle: false }, 1300).class, "foreign");
  assert.equal(root.onVote(9, { rank: 9, token: T1, idle: false }, 1300).class, "unowned");
  assert.equal(root.onAck(1, { rank: 1, token: T1, committed: false }).class, "stale", "no ACK before the decision");
  assert.equal(root.phase, "proposing");
  // The proposal survived all of that: two YES votes still commit.
  root.onVote(1, { rank: 1, token: T1, idle: true }, 1300);
  assert.deepEqual(root.onVote(2, { rank: 2, token: T1, idle: true }, 1300).actions, [{ kind: "commit", token: T1, to: [1, 2] }]);
  assert.equal(root.onAck(1, { rank: 1, token: T2, committed: false }).class, "stale");
  assert.equal(root.onAck(9, { rank: 9, token: T1, committed: false }).class, "unowned");
  assert.equal(root.onAck(1, { rank: 2, token: T1, committed: false }).class, "foreign");
  assert.equal(root.phase, "committing");
  assert.equal(say(1, true, 1400).class, "current");
  assert.deepEqual(root.counters, {
    "status.stale": 2,
    "status.foreign": 1,
    "status.unowned": 1,
    "vote.stale": 1,
    "vote.foreign": 1,
    "vote.unowned": 1,
    "ack.stale": 2,
    "ack.unowned": 1,
    "ack.foreign": 1,
  });
});

test("malformed quiescence messages never reach the machines: the one wire check refuses them", () => {
  const refused = [
    { type: "status", rank: 1, sequence: 0, idle: false },
    { type: "status", rank: 1, sequence: 99, idle: "no" },
    { type: "status", rank: -1, sequence: 1, idle: false },
    [1, 99, false],
    { type: "vote", rank: 1, token: T1.toUpperCase(), idle: false },
    { type: "vote", rank: 1, token: T1 },
    { type: "commit_ack", rank: 1, token: "abc", committed: true },
    { type: "status", rank: 1, sequence: 5, idle: false, extra: 1 },
  ];
  for (const frame of refused) assert.equal(FromPeer.safeParse(frame).success, false, JSON.stringify(frame));
  for (const frame of [{ type: "probe", token: 7 }, { type: "commit", token: T1.slice(1) }, { type: "abort" }]) {
    assert.equal(FromRoot.safeParse(frame).success, false, JSON.stringify(frame));
  }
  // What the machines are given is what the schema let through, typed.
  const ok = FromPeer.parse({ type: "status", rank: 1, sequence: 5, idle: true });
  assert.equal(ok.type === "status" && ok.sequence, 5);
});

test("the root refuses a malformed PREPARE token and an afterRefresh it did not ask for", () => {
  const { root, idleUntil } = fleet();
  root.localIdle(true, 0);
  idleUntil(0, 1200);
  assert.throws(() => root.afterRefresh(true, 1200, "abc"), /64 lowercase hex/);
  assert.throws(() => root.afterRefresh(true, 1200, T1), /without a pending refresh/);
});

test("a participant freezes on YES and only the exact ABORT unfreezes it", () => {
  const p = new ParticipantQuiescence({ rank: 1, root: 0 });
  assert.deepEqual(p.onPrepare(0, { token: T1 }), { class: "refresh", token: T1 });
  assert.deepEqual(p.vote(T1, true), { frozen: true, reply: { rank: 1, token: T1, idle: true } });
  assert.equal(p.frozen, true);
  assert.deepEqual(p.onPrepare(0, { token: T1 }), { class: "repeat", token: T1 });
  assert.deepEqual(p.vote(T1, true), { frozen: true, reply: { rank: 1, token: T1, idle: true } });
  assert.deepEqual(p.onPrepare(0, { token: T2 }), { class: "ignored" }, "a different token while one is accepted");
  assert.deepEqual(p.onAbort(0, { token: T2 }), { unfrozen: false });
  assert.deepEqual(p.onAbort(5, { token: T1 }), { unfrozen: false }, "not from the root");
  assert.deepEqual(p.onAbort(0, { token: "f".repeat(64) }), { unfrozen: false }, "an ABORT of a token never proposed");
  assert.equal(p.frozen, true);
  assert.deepEqual(p.onAbort(0, { token: T1 }), { unfrozen: true });
  assert.equal(p.frozen, false);
  assert.deepEqual(p.onAbort(0, { token: T1 }), { unfrozen: false }, "ABORT is idempotent");
  assert.deepEqual(p.onPrepare(0, { token: T1 }), { class: "ignored" }, "an aborted token never comes back");
  assert.deepEqual(p.onPrepare(0, { token: T2 }), { class: "ignored" }, "T2 was aborted too");
  assert.deepEqual(p.onPrepare(0, { token: T3 }), { class: "refresh", token: T3 });
  assert.deepEqual(p.counters, { "prepare.foreign": 1, "abort.unowned": 1, "prepare.retired": 2 });
});

test("a BUSY vote does not freeze the participant", () => {
  const p = new ParticipantQuiescence({ rank: 2, root: 0 });
  p.onPrepare(0, { token: T1 });
  assert.deepEqual(p.vote(T1, false), { frozen: false, reply: { rank: 2, token: T1, idle: false } });
  assert.deepEqual(p.onAbort(0, { token: T1 }), { unfrozen: false });
  assert.deepEqual(p.onPrepare(0, { token: T2 }), { class: "refresh", token: T2 });
});

test("an ABORT that arrives during the refresh keeps the late YES from freezing", () => {
  const p = new ParticipantQuiescence({ rank: 1, root: 0 });
  p.onPrepare(0, { token: T1 });
  assert.deepEqual(p.onAbort(0, { token: T1 }), { unfrozen: false });
  assert.deepEqual(p.vote(T1, true), { frozen: false, reply: { rank: 1, token: T1, idle: true } });
  assert.equal(p.frozen, false);
  assert.throws(() => p.vote(T2, true), /never passed on/);
});

test("a participant commits only the accepted token while locally idle, and busy afterwards is a conflict", () => {
  const p = new ParticipantQuiescence({ rank: 1, root: 0 });
  p.onPrepare(0, { token: T1 });
  p.vote(T1, true);
  assert.equal(p.busyAfterCommit(), null, "busy before a commit is no conflict");
  assert.deepEqual(p.onCommit(0, { token: T2 }, true), { reply: { rank: 1, token: T2, committed: false }, leave: false });
  assert.deepEqual(p.onCommit(0, { token: T1 }, false), { reply: { rank: 1, token: T1, committed: false }, leave: false });
  assert.deepEqual(p.onCommit(3, { token: T1 }, true), { reply: null, leave: false });
  assert.equal(p.left, false);
  assert.deepEqual(p.onCommit(0, { token: T1 }, true), { reply: { rank: 1, token: T1, committed: true }, leave: true });
  assert.equal(p.left, true);
  assert.deepEqual(p.busyAfterCommit(), { kind: "conflict", reason: "master 1 found work after committing quiescence" });
  assert.deepEqual(p.onPrepare(0, { token: T2 }), { class: "ignored" });
  assert.deepEqual(p.counters, { "commit.rejected": 2, "commit.unowned": 1, "prepare.after-commit": 1 });
});

test("a COMMIT without any accepted token is refused", () => {
  const p = new ParticipantQuiescence({ rank: 1, root: 0 });
  assert.deepEqual(p.onCommit(0, { token: T1 }, true), { reply: { rank: 1, token: T1, committed: false }, leave: false });
});

/** Delivers root actions to participants and their replies back, until nothing moves. */
function run(root: RootQuiescence, parts: Map<number, ParticipantQuiescence>, first: Action[], idle: Map<number, boolean>, now: number) {
  const log: string[] = [];
  const queue = [...first];
  while (queue.length > 0) {
    const a = queue.shift()!;
    log.push(a.kind);
    if (a.kind !== "prepare" && a.kind !== "abort" && a.kind !== "commit") continue;
    for (const rank of a.to) {
      const p = parts.get(rank)!;
      if (a.kind === "prepare") {
        const r = p.onPrepare(0, { token: a.token });
        if (r.class === "ignored") continue;
        queue.push(...root.onVote(rank, p.vote(a.token, idle.get(rank)!).reply, now).actions);
      } else if (a.kind === "abort") {
        p.onAbort(0, { token: a.token });
      } else {
        const r = p.onCommit(0, { token: a.token }, idle.get(rank)!);
        assert.ok(r.reply, "a COMMIT from the root is always answered");
        queue.push(...root.onAck(rank, r.reply).actions);
      }
    }
  }
  return log;
}

test("a root and two participants reach COMMIT through exact messages", () => {
  const { root, idleUntil } = fleet();
  const parts = new Map([1, 2].map((r) => [r, new ParticipantQuiescence({ rank: r, root: 0 })]));
  root.localIdle(true, 0);
  idleUntil(0, 1200);
  const log = run(root, parts, root.afterRefresh(true, 1200, T1), new Map([[1, true], [2, true]]), 1200);
  assert.deepEqual(log, ["prepare", "commit", "committed"]);
  assert.deepEqual([parts.get(1)!.left, parts.get(2)!.left, root.phase], [true, true, "committed"]);
});

test("a participant that finds work on PREPARE aborts the round and unfreezes the others", () => {
  const { root, idleUntil } = fleet();
  const parts = new Map([1, 2].map((r) => [r, new ParticipantQuiescence({ rank: r, root: 0 })]));
  root.localIdle(true, 0);
  idleUntil(0, 1200);
  const log = run(root, parts, root.afterRefresh(true, 1200, T1), new Map([[1, true], [2, false]]), 1200);
  assert.deepEqual(log, ["prepare", "abort"]);
  assert.deepEqual([parts.get(1)!.frozen, parts.get(2)!.frozen, root.phase], [false, false, "watching"]);
});
