// The master join's machines (core/peer-join.ts), driven by scripted frames and times: the root's
// admission of one submaster, the seats and the roster, the submaster's join, and the link after
// the roster. Each test feeds events and asserts the whole sequence of actions and states, with
// the real wire schemas as validators. No socket, no clock.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { z } from "zod";
import { JoinRoster } from "../../src/core/join-roster.ts";
import { MasterLink } from "../../src/core/master-link.ts";
import { RootAdmission, SubmasterJoin, type AdmissionRules } from "../../src/core/peer-join.ts";
import { check, FromPeer, FromRoot, HandshakeReply, Prove, Refuse, Roster, type ProveFrame } from "../../src/net/messages.ts";

const PEER = "10.0.0.8:41000";
const EPOCH = "e".repeat(64);
const SETUP = "5".repeat(64);
const NONCE = { path: "/shared/corpus/.fuzzfleet/nonce-1", value: "n0nce" };

const rules: AdmissionRules<ProveFrame> = {
  speaks: 1,
  nonce: NONCE,
  setup: { hash: SETUP, differences: (theirs) => `compared with '${theirs}'` },
  handshakeMs: 30_000,
  validate: { prove: (raw) => check(Prove, raw) },
};
const hello = (over: Record<string, unknown> = {}) => ({ type: "peer_hello" as const, protocol: 1, host: "m2", setup: SETUP, setup_text: "{}", ...over });
const prove = (nonce: string | null = "n0nce", problem: string | null = null) => ({ type: "prove", nonce, gen_hash: null, app_build: null, problem });
const challenge = { kind: "send", frame: { type: "challenge", nonce_path: NONCE.path, identity: null, app_path: null } };

describe("RootAdmission and JoinRoster", () => {
  test("peer_hello -> challenge -> prove -> seated; the roster goes out once every submaster is seated", () => {
    const seats = new JoinRoster(3, EPOCH);
    assert.deepEqual(seats.open(0, 60_000), { kind: "wait", deadline: 60_000 });
    const a = new RootAdmission(rules, PEER, seats);
    const states: string[] = [a.state];
    assert.deepEqual(a.hello(hello(), 10), [challenge, { kind: "receive", deadline: 30_010 }]);
    states.push(a.state);
    assert.deepEqual(a.frame(prove(), 20), [{ kind: "seated", rank: 1, host: "m2", line: "master m2 joined as rank 1 (2 of 3)" }]);
    states.push(a.state);
    assert.deepEqual(states, ["new", "proving", "seated"]);
    assert.deepEqual(seats.check(21), { kind: "wait", deadline: 60_000 }, "one of two submasters is not a roster");
    const b = new RootAdmission(rules, PEER, seats);
    b.hello(hello({ host: "m3" }), 30);
    assert.deepEqual(b.frame(prove(), 40), [{ kind: "seated", rank: 2, host: "m3", line: "master m3 joined as rank 2 (3 of 3)" }]);
    const step = seats.check(41);
    assert.deepEqual(step, {
      kind: "roster",
      frames: [
        { type: "roster", epoch: EPOCH, rank: 1, ranks: [0, 1, 2] },
        { type: "roster", epoch: EPOCH, rank: 2, ranks: [0, 1, 2] },
      ],
    });
    for (const f of step.kind === "roster" ? step.frames : []) assert.ok(check(Roster, f).ok, "the roster frame passes the wire schema");
    const late = new RootAdmission(rules, PEER, seats);
    assert.deepEqual(late.hello(hello({ host: "m4" }), 50), [
      { kind: "refuse", reason: "all 3 masters have joined already (start the root with a larger --masters)" },
      { kind: "close" },
    ]);
  });

  test("every refusal names what to fix: version, setup, seats, nonce, the proof's shape, the wait, a peer gone", () => {
    const refused = (script: (a: RootAdmission<ProveFrame>) => unknown[], seats = new JoinRoster(2, EPOCH)) => {
      const a = new RootAdmission(rules, PEER, seats);
      const actions = script(a);
      assert.equal(a.state, "closed");
      return actions;
    };
    const refusal = (reason: string) => [{ kind: "refuse", reason }, { kind: "close" }];
    assert.deepEqual(refused((a) => a.hello(hello({ protocol: 2 }), 0)), refusal("protocol version 2, this root speaks 1: the master runs a different fuzzfleet"));
    assert.deepEqual(
      refused((a) => a.hello(hello({ setup: "6".repeat(64), setup_text: '{"timeout_seconds":9}' }), 0)),
      refusal(`the campaign setup differs — compared with '{"timeout_seconds":9}'`),
    );
    const proving = (a: RootAdmission<ProveFrame>) => a.hello(hello(), 0);
    assert.deepEqual(
      refused((a) => (proving(a), a.frame(prove(null, "ENOENT"), 5))),
      refusal(`the master cannot read the nonce at ${NONCE.path} (ENOENT): every master must mount the corpus directory at the same path`),
    );
    assert.deepEqual(refused((a) => (proving(a), a.frame({ ...prove(), extra: 1 }, 5))), refusal("frame 'prove': unexpected field(s) extra"));
    assert.deepEqual(refused((a) => (proving(a), a.timeout(30_000))), refusal(`no frame from ${PEER} within 30s`));
    assert.deepEqual(refused((a) => (proving(a), a.closed(`${PEER} closed the connection`))), refusal(`${PEER} closed the connection`));
    assert.deepEqual(refused((a) => (proving(a), a.broken("frame of 99999999 bytes\x1b[2J"))), refusal("frame of 99999999 bytes\\x1b[2J"));
  });

  test("a timer that fires before the deadline waits on to the same deadline", () => {
    const a = new RootAdmission(rules, PEER, new JoinRoster(2, EPOCH));
    a.hello(hello(), 0);
    assert.deepEqual(a.timeout(29_999), [{ kind: "receive", deadline: 30_000 }]);
    assert.equal(a.state, "proving");
    assert.equal(a.frame(prove(), 29_999.5)[0]!.kind, "seated");
  });

  test("two submasters proving at once for the last seat: the first proof takes it, the second is refused", () => {
    const seats = new JoinRoster(2, EPOCH);
    const first = new RootAdmission(rules, PEER, seats);
    const second = new RootAdmission(rules, PEER, seats);
    first.hello(hello(), 0);
    second.hello(hello({ host: "m3" }), 1);
    assert.equal(second.frame(prove(), 2)[0]!.kind, "seated");
    assert.deepEqual(first.frame(prove(), 3), [
      { kind: "refuse", reason: "all 2 masters have joined already (start the root with a larger --masters)" },
      { kind: "close" },
    ]);
  });

  test("the roster wait fails at its deadline, naming the count and the fix; no seat is taken after it", () => {
    const seats = new JoinRoster(4, EPOCH);
    seats.open(1_000, 60_000);
    new RootAdmission(rules, PEER, seats).hello(hello(), 2_000);
    const a = new RootAdmission(rules, PEER, seats);
    a.hello(hello(), 2_000);
    a.frame(prove(), 2_100);
    assert.deepEqual(seats.check(60_999), { kind: "wait", deadline: 61_000 });
    assert.deepEqual(seats.check(61_000), { kind: "failed", message: "only 2 of 4 masters joined within 60s; start the others with --join, or lower --masters" });
    assert.deepEqual(seats.take("m9"), { refused: "the root gave up waiting for its masters" });
    assert.throws(() => seats.check(61_001), /the roster wait is over/);
  });

  test("a root whose submasters are all seated before it waits sends the roster at once; fewer than two masters is misuse", () => {
    const seats = new JoinRoster(2, EPOCH);
    const a = new RootAdmission(rules, PEER, seats);
    a.hello(hello(), 0);
    a.frame(prove(), 1);
    assert.deepEqual(seats.open(5, 1_000), { kind: "roster", frames: [{ type: "roster", epoch: EPOCH, rank: 1, ranks: [0, 1] }] });
    assert.throws(() => new JoinRoster(1, EPOCH), /at least one submaster/);
  });

  test("misuse is asserted: a frame before the challenge, a second hello", () => {
    const a = new RootAdmission(rules, PEER, new JoinRoster(2, EPOCH));
    assert.throws(() => a.frame(prove(), 0), /a frame while new, with no wait/);
    a.hello(hello(), 0);
    assert.throws(() => a.hello(hello(), 1), /peer_hello while proving/);
  });
});

const RosterOrRefuse = z.discriminatedUnion("type", [Roster, Refuse]);
type Reply = z.infer<typeof HandshakeReply>;
type RosterReply = z.infer<typeof RosterOrRefuse>;
const HELLO = { type: "peer_hello", token: "t", protocol: 1, host: "m2", setup: SETUP, setup_text: "{}" };

function join(joinTimeoutMs = 60_000) {
  const j = new SubmasterJoin<typeof HELLO, Reply, RosterReply>({
    handshakeMs: 30_000,
    joinTimeoutMs,
    validate: { reply: (raw) => check(HandshakeReply, raw), roster: (raw) => check(RosterOrRefuse, raw) },
  });
  return j;
}
const rootChallenge = { type: "challenge", nonce_path: NONCE.path, identity: null, app_path: null };
const roster = { type: "roster", epoch: EPOCH, rank: 1, ranks: [0, 1] };

describe("SubmasterJoin", () => {
  test("peer_hello -> challenge -> prove -> roster: joined, each wait with its own deadline", () => {
    const j = join();
    const states: string[] = [j.state];
    assert.deepEqual(j.start(HELLO, 100), [{ kind: "send", frame: HELLO }, { kind: "receive", deadline: 30_100 }]);
    states.push(j.state);
    assert.deepEqual(j.frame(rootChallenge, 200), [{ kind: "prove", challenge: rootChallenge }, { kind: "receive", deadline: 60_200 }]);
    states.push(j.state);
    assert.deepEqual(j.frame(roster, 5_000), [{ kind: "joined", roster }]);
    states.push(j.state);
    assert.deepEqual(states, ["new", "greeting", "awaiting-roster", "joined"]);
  });

  test("a refusal at either step fails as refused, its reason escaped; every other failure names what happened", () => {
    const failed = (script: (j: SubmasterJoin<typeof HELLO, Reply, RosterReply>) => unknown[]) => {
      const j = join();
      j.start(HELLO, 0);
      const actions = script(j);
      assert.equal(j.state, "failed");
      return actions;
    };
    const refusedWith = (reason: string) => [{ kind: "failed", refused: true, message: `the root master refused this master:\n  ${reason}` }];
    const failedWith = (message: string) => [{ kind: "failed", refused: false, message }];
    assert.deepEqual(
      failed((j) => j.frame({ type: "refuse", reason: "the campaign setup differs — target\nREFUSED forged" }, 1)),
      refusedWith("the campaign setup differs — target\\x0aREFUSED forged"),
    );
    assert.deepEqual(failed((j) => (j.frame(rootChallenge, 1), j.frame({ type: "refuse", reason: "all 2 masters have joined already" }, 2))), refusedWith("all 2 masters have joined already"));
    const welcome = { type: "welcome", worker_id: 1, session: 1, mode: "explore", lease_seconds: 20, heartbeat_seconds: 5, generation: 0, explore: null };
    assert.deepEqual(failed((j) => j.frame(welcome, 1)), failedWith("unexpected reply 'welcome' from the root master"));
    assert.deepEqual(failed((j) => j.frame({ type: "assign" }, 1)), failedWith("protocol error from the root master: unknown frame type 'assign'"));
    assert.deepEqual(
      failed((j) => (j.frame(rootChallenge, 1), j.frame({ type: "status", rank: 0, sequence: 1, idle: true }, 2))),
      failedWith("protocol error from the root master: unknown frame type 'status'"),
    );
    assert.deepEqual(failed((j) => j.timeout(30_000)), failedWith("no frame from the root master within 30s"));
    assert.deepEqual(failed((j) => (j.frame(rootChallenge, 1), j.timeout(60_001))), failedWith("the root master sent no roster within 60s (are all --masters started?)"));
    assert.deepEqual(
      failed((j) => j.closed("127.0.0.1:9 closed the connection")),
      failedWith("the root master closed the connection during the join (127.0.0.1:9 closed the connection)"),
    );
    assert.deepEqual(failed((j) => j.broken("frame too large")), failedWith("protocol error from the root master: frame too large"));
  });

  test("an early timer waits on to the same deadline; nothing is accepted after the join ended", () => {
    const j = join(10_000);
    j.start(HELLO, 0);
    j.frame(rootChallenge, 5);
    assert.deepEqual(j.timeout(9_000), [{ kind: "receive", deadline: 10_005 }]);
    assert.equal(j.state, "awaiting-roster");
    j.frame(roster, 9_500);
    assert.throws(() => j.frame(roster, 9_600), /a frame while joined, with no wait/);
  });
});

describe("MasterLink", () => {
  test("every frame is delivered and moves the deadline on; an abandon's reason is made printable", () => {
    const link = new MasterLink(5_000, (raw) => check(FromPeer, raw));
    assert.deepEqual(link.start(0), [{ kind: "receive", deadline: 5_000 }]);
    const status = { type: "status", rank: 1, sequence: 1, idle: false };
    assert.deepEqual(link.frame(status, 4_000), [{ kind: "deliver", frame: status }, { kind: "receive", deadline: 9_000 }]);
    assert.deepEqual(link.frame({ type: "abandon", rank: 1, reason: "disk full\x1b[2J" }, 4_500), [
      { kind: "deliver", frame: { type: "abandon", rank: 1, reason: "disk full\\x1b[2J" } },
      { kind: "receive", deadline: 9_500 },
    ]);
    assert.equal(link.state, "linked");
  });

  test("silence beyond the grace, a close and a bad frame each lose the link with their own reason", () => {
    const lost = (script: (l: MasterLink<z.infer<typeof FromRoot>>) => unknown[]) => {
      const l = new MasterLink(5_000, (raw) => check(FromRoot, raw));
      l.start(0);
      const actions = script(l);
      assert.equal(l.state, "lost");
      return actions;
    };
    assert.deepEqual(lost((l) => (assert.deepEqual(l.timeout(4_999), [{ kind: "receive", deadline: 5_000 }]), l.timeout(5_000))), [
      { kind: "lost", why: "silent for more than 5s" },
    ]);
    assert.deepEqual(lost((l) => l.closed("x closed the connection")), [{ kind: "lost", why: "connection closed" }]);
    assert.deepEqual(lost((l) => l.frame({ type: "vote", rank: 1, token: EPOCH, idle: true }, 1)), [{ kind: "lost", why: "protocol error: unknown frame type 'vote'" }]);
    assert.deepEqual(lost((l) => l.broken("bad length prefix")), [{ kind: "lost", why: "protocol error: bad length prefix" }]);
  });
});

describe("JoinRoster: a rank asked for", () => {
  test("submasters that ask for their launcher ranks get exactly those, whatever the join order", () => {
    const seats = new JoinRoster(4, EPOCH);
    seats.open(0, 60_000);
    const join = (host: string, rank: number) => {
      const a = new RootAdmission(rules, PEER, seats);
      assert.deepEqual(a.hello(hello({ host, rank }), 1), [challenge, { kind: "receive", deadline: 30_001 }]);
      return a.frame(prove(), 2);
    };
    assert.deepEqual(join("m3", 3), [{ kind: "seated", rank: 3, host: "m3", line: "master m3 joined as rank 3 (as asked) (2 of 4)" }]);
    assert.deepEqual(join("m1", 1), [{ kind: "seated", rank: 1, host: "m1", line: "master m1 joined as rank 1 (as asked) (3 of 4)" }]);
    assert.deepEqual(join("m2", 2), [{ kind: "seated", rank: 2, host: "m2", line: "master m2 joined as rank 2 (as asked) (4 of 4)" }]);
    const step = seats.check(3);
    assert.equal(step.kind, "roster");
    assert.deepEqual(step.kind === "roster" ? step.frames.map((f) => f.rank) : [], [1, 2, 3]);
  });

  test("a rank out of range or held already is refused at peer_hello, naming it and the fix", () => {
    const seats = new JoinRoster(3, EPOCH);
    seats.open(0, 60_000);
    const a = new RootAdmission(rules, PEER, seats);
    a.hello(hello({ host: "m2", rank: 2 }), 1);
    a.frame(prove(), 2);
    const held = new RootAdmission(rules, PEER, seats).hello(hello({ host: "m9", rank: 2 }), 3);
    assert.equal(held[0]!.kind, "refuse");
    assert.match((held[0] as { reason: string }).reason, /rank 2 is held already \(by m2\).*give each launched rank its own/);
    for (const rank of [0, 3, 7]) {
      const out = new RootAdmission(rules, PEER, seats).hello(hello({ rank }), 4);
      assert.equal(out[0]!.kind, "refuse");
      assert.match((out[0] as { reason: string }).reason, new RegExp(`asked for rank ${rank}, which is no submaster rank of a campaign of 3 masters \\(1 to 2\\)`));
    }
    // One that asks for none takes the lowest free rank.
    const free = new RootAdmission(rules, PEER, seats);
    free.hello(hello({ host: "m1" }), 5);
    assert.deepEqual(free.frame(prove(), 6), [{ kind: "seated", rank: 1, host: "m1", line: "master m1 joined as rank 1 (3 of 3)" }]);
  });

  test("two masters asking for one rank: the second proof finds it taken and is refused", () => {
    const seats = new JoinRoster(3, EPOCH);
    seats.open(0, 60_000);
    const first = new RootAdmission(rules, PEER, seats);
    const second = new RootAdmission(rules, PEER, seats);
    first.hello(hello({ host: "a", rank: 1 }), 1);
    second.hello(hello({ host: "b", rank: 1 }), 1);
    assert.equal(first.frame(prove(), 2)[0]!.kind, "seated");
    const out = second.frame(prove(), 2);
    assert.equal(out[0]!.kind, "refuse");
    assert.match((out[0] as { reason: string }).reason, /rank 1 is held already \(by a\)/);
  });
});
