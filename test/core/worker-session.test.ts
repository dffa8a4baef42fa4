// WorkerSession, the server side of one connection, driven by scripted frames and times: every
// test feeds events and asserts the whole sequence of actions and states, with the real wire
// schemas as validators and a real StopLedger. No socket, no clock, no campaign.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { StopLedger } from "../../src/core/lifecycle.ts";
import { WorkerSession, type SessionRules } from "../../src/core/worker-session.ts";
import { check, FirstFrame, Prove, WorkerFrame, WorkerFrameOrPut, type FirstFrameT, type Frame, type ProveFrame, type WorkerFrameT } from "../../src/net/messages.ts";

const TOKEN = "session-test-token-0123456789";
const PEER = "10.0.0.7:40000";
const STOP = "5".repeat(32);

const rules = (over: Partial<SessionRules<FirstFrameT, ProveFrame, WorkerFrameT>> = {}): SessionRules<FirstFrameT, ProveFrame, WorkerFrameT> => ({
  token: TOKEN,
  speaks: 1,
  acceptsPeers: false,
  nonce: { path: "/shared/out/tmp/nonce-1", value: "n0nce" },
  maxSlots: 8,
  firstFrameMs: 5_000,
  handshakeMs: 30_000,
  idleMs: 60_000,
  validate: { first: (raw) => check(FirstFrame, raw), prove: (raw) => check(Prove, raw), work: (raw) => check(WorkerFrame, raw) },
  ...over,
});

function session(over: Partial<SessionRules<FirstFrameT, ProveFrame, WorkerFrameT>> = {}) {
  const ledger = new StopLedger();
  const s = new WorkerSession<FirstFrameT, ProveFrame, WorkerFrameT, Frame>(rules(over), PEER, ledger);
  return { s, ledger };
}

const hello = (over: Record<string, unknown> = {}) => ({ type: "hello", token: TOKEN, protocol: 1, host: "w1", jobs: 4, slots: 12, ...over });
const prove = (nonce: string | null = "n0nce", problem: string | null = null) => ({ type: "prove", nonce, gen_hash: "g", app_build: null, problem });
const challenge: Frame = { type: "challenge", nonce_path: "/shared/out/tmp/nonce-1", identity: null, app_path: null };
const welcome: Frame = { type: "welcome", worker_id: 3, session: 1, generation: 1, mode: "sweep", lease_seconds: 20, heartbeat_seconds: 5, explore: null };
const ack: Frame = { type: "ack", drain: false, known: [], note: null };
const done = { type: "done", chunk_id: 9, elapsed: 1.5, rc: 0, outcome: "complete", error: null };

/** A session through the handshake, at t = 100, serving worker `w1#3`. */
function admitted() {
  const { s, ledger } = session();
  s.accepted(0);
  s.frame(hello(), 10);
  s.answer({ to: "screen", challenge }, 10);
  s.frame(prove(), 20);
  s.answer({ to: "proof", problem: null }, 20);
  s.answer({ to: "admit", label: "w1#3", welcome }, 100);
  assert.equal(s.state, "serving");
  return { s, ledger };
}

describe("WorkerSession handshake", () => {
  test("hello -> challenge -> prove -> admit -> welcome: each step asks the campaign, each wait has its deadline", () => {
    const { s, ledger } = session();
    const states: string[] = [s.state];
    const step = <T>(actions: T) => {
      states.push(s.state);
      return actions;
    };
    assert.deepEqual(step(s.accepted(0)), [{ kind: "receive", deadline: 5_000 }]);
    assert.deepEqual(step(s.frame(hello({ host: "w1\x1b[2J" }), 10)), [
      { kind: "authenticated" },
      { kind: "ask", question: { to: "screen", hello: { ...hello(), host: "w1\\x1b[2J" } } },
    ]);
    assert.deepEqual(step(s.answer({ to: "screen", challenge }, 10)), [
      { kind: "send", frame: challenge },
      { kind: "receive", deadline: 30_010 },
    ]);
    assert.deepEqual(step(s.frame(prove(), 20)), [{ kind: "ask", question: { to: "proof", prove: prove(), files: "shared" } }]);
    assert.deepEqual(step(s.answer({ to: "proof", problem: null }, 20)), [
      { kind: "ask", question: { to: "admit", hello: { ...hello(), host: "w1\\x1b[2J" }, slots: 8, files: "shared" } },
    ]);
    assert.deepEqual(step(s.answer({ to: "admit", label: "w1#3", welcome }, 100)), [
      { kind: "send", frame: welcome },
      { kind: "receive", deadline: 60_100 },
    ]);
    assert.deepEqual(states, ["new", "awaiting-first", "screening", "proving", "checking-proof", "admitting", "serving"]);
    assert.equal(s.worker, "w1#3");
    assert.equal(ledger.state("w1#3"), "available", "admission enters the worker in the stop ledger");
  });

  test("a wrong or missing token is refused before the frame is looked at, and the cap is never lifted", () => {
    for (const raw of [hello({ token: "not-the-token" }), { type: "nonsense", extra: 1 }, { type: "status", token: 42, json: false }]) {
      const { s } = session();
      s.accepted(0);
      assert.deepEqual(s.frame(raw, 1), [
        { kind: "refuse", reason: "bad or missing token" },
        { kind: "close", how: "end" },
      ]);
      assert.equal(s.state, "closed");
    }
  });

  test("with the token, a first frame that breaks its schema is refused naming the field", () => {
    const { s } = session();
    s.accepted(0);
    assert.deepEqual(s.frame(hello({ x: 1 }), 1), [
      { kind: "authenticated" },
      { kind: "refuse", reason: "frame 'hello': unexpected field(s) x" },
      { kind: "close", how: "end" },
    ]);
  });

  test("the first frame's deadline: an early timer waits on, the deadline refuses naming the wait; a peer gone first is closed quietly", () => {
    const { s } = session();
    s.accepted(1_000);
    assert.deepEqual(s.timeout(5_999), [{ kind: "receive", deadline: 6_000 }], "the timer fired before the deadline on our clock");
    assert.deepEqual(s.timeout(6_000), [
      { kind: "refuse", reason: `no frame from ${PEER} within 5s` },
      { kind: "close", how: "end" },
    ]);
    const quiet = session().s;
    quiet.accepted(0);
    assert.deepEqual(quiet.closed(`${PEER} closed the connection`), [{ kind: "close", how: "end" }]);
    const broken = session().s;
    broken.accepted(0);
    assert.deepEqual(broken.broken("frame header is not a decimal length"), [
      { kind: "refuse", reason: "frame header is not a decimal length" },
      { kind: "close", how: "end" },
    ]);
  });

  test("a read request is answered once and closed; a failing read service refuses with its message, escaped", () => {
    const { s } = session();
    s.accepted(0);
    const status = { type: "status", token: TOKEN, json: true };
    assert.deepEqual(s.frame(status, 1), [{ kind: "authenticated" }, { kind: "ask", question: { to: "read", request: status } }]);
    const reply: Frame = { type: "json", data: { ok: 1 } };
    assert.deepEqual(s.answer({ to: "read", reply }, 2), [{ kind: "send", frame: reply }, { kind: "close", how: "end" }]);
    const failing = session().s;
    failing.accepted(0);
    failing.frame(status, 1);
    assert.deepEqual(failing.answer({ to: "read", failed: "database is locked\nREFUSED forged" }, 2), [
      { kind: "refuse", reason: "cannot answer 'status': database is locked\\x0aREFUSED forged" },
      { kind: "close", how: "end" },
    ]);
  });

  test("a submaster is handed over where masters are accepted, and refused elsewhere", () => {
    const peerHello = { type: "peer_hello", token: TOKEN, protocol: 1, host: "m\n2", setup: "a".repeat(64), setup_text: "" };
    const root = session({ acceptsPeers: true }).s;
    root.accepted(0);
    assert.deepEqual(root.frame(peerHello, 1), [{ kind: "authenticated" }, { kind: "hand-over", hello: { ...peerHello, host: "m\\x0a2" } }]);
    assert.equal(root.state, "handed-over");
    const worker = session().s;
    worker.accepted(0);
    assert.deepEqual(worker.frame(peerHello, 1), [
      { kind: "authenticated" },
      { kind: "refuse", reason: "this process accepts workers, not masters: join the root master (started with --masters N)" },
      { kind: "close", how: "end" },
    ]);
  });

  test("every refusal of the handshake names what to fix: version, a closed campaign, the nonce, the proof, the admission", () => {
    const refusedAt = (script: (s: WorkerSession<FirstFrameT, ProveFrame, WorkerFrameT, Frame>) => unknown[]) => {
      const { s } = session();
      s.accepted(0);
      const actions = script(s);
      assert.equal(s.state, "closed");
      return actions;
    };
    assert.deepEqual(refusedAt((s) => s.frame(hello({ protocol: 2 }), 1)).slice(1), [
      { kind: "refuse", reason: "protocol version 2, this server speaks 1: the worker runs a different fuzzfleet" },
      { kind: "close", how: "end" },
    ]);
    const screened = (s: WorkerSession<FirstFrameT, ProveFrame, WorkerFrameT, Frame>) => {
      s.frame(hello(), 1);
      s.answer({ to: "screen", challenge }, 1);
    };
    assert.deepEqual(
      refusedAt((s) => (s.frame(hello(), 1), s.answer({ to: "screen", closed: "this campaign is ending (idle)" }, 1))),
      [{ kind: "refuse", reason: "this campaign is ending (idle)" }, { kind: "close", how: "end" }],
    );
    assert.deepEqual(
      refusedAt((s) => (screened(s), s.frame(prove(null, "EACCES"), 2))),
      [
        { kind: "refuse", reason: "the worker cannot read the nonce at /shared/out/tmp/nonce-1 (EACCES): every host must mount the shared campaign directory at the same path" },
        { kind: "close", how: "end" },
      ],
    );
    assert.deepEqual(
      refusedAt((s) => (screened(s), s.frame(prove(), 2), s.answer({ to: "proof", problem: "generator identity differs (worker 1a, coordinator 9f)" }, 2))),
      [{ kind: "refuse", reason: "generator identity differs (worker 1a, coordinator 9f)" }, { kind: "close", how: "end" }],
    );
    assert.deepEqual(
      refusedAt((s) => (screened(s), s.frame(prove(), 2), s.answer({ to: "proof", problem: null }, 2), s.answer({ to: "admit", failed: "the store is busy\x1b[2J" }, 3))),
      [{ kind: "refuse", reason: "the store is busy\\x1b[2J" }, { kind: "close", how: "end" }],
    );
    assert.deepEqual(refusedAt((s) => (screened(s), s.timeout(30_001))), [
      { kind: "refuse", reason: `no frame from ${PEER} within 30s` },
      { kind: "close", how: "end" },
    ]);
    assert.deepEqual(refusedAt((s) => (screened(s), s.closed(`${PEER} closed the connection`))), [
      { kind: "refuse", reason: `${PEER} closed the connection` },
      { kind: "close", how: "end" },
    ]);
  });
});

describe("WorkerSession serving", () => {
  test("requests and reports are handed to the campaign one at a time; every reply renews the idle deadline", () => {
    const { s } = admitted();
    assert.deepEqual(s.frame({ type: "want", slots: 2 }, 200), [{ kind: "ask", question: { to: "handle", frame: { type: "want", slots: 2 }, stopping: false } }]);
    assert.equal(s.state, "handling");
    assert.throws(() => s.frame({ type: "heartbeat", ids: [] }, 201), /with no wait/, "nothing is read while the campaign answers");
    assert.deepEqual(s.answer({ to: "handle", reply: ack }, 300), [{ kind: "send", frame: ack }, { kind: "receive", deadline: 60_300 }]);
    assert.deepEqual(s.frame(done, 400), [{ kind: "ask", question: { to: "handle", frame: done, stopping: false } }]);
  });

  test("once its stop is asked, want and heartbeat get the stop; reports are still booked; the exact stop_ack ends it", () => {
    const { s, ledger } = admitted();
    ledger.begin("w1#3", STOP);
    assert.deepEqual(s.frame({ type: "heartbeat", ids: [9] }, 200), [
      { kind: "send", frame: { type: "stop", token: STOP } },
      { kind: "receive", deadline: 60_200 },
    ]);
    assert.deepEqual(s.frame(done, 300), [{ kind: "ask", question: { to: "handle", frame: done, stopping: true } }], "a result that arrives while stopping is consumed");
    s.answer({ to: "handle", reply: ack }, 310);
    assert.deepEqual(s.frame({ type: "want", slots: 1 }, 320), [
      { kind: "send", frame: { type: "stop", token: STOP } },
      { kind: "receive", deadline: 60_320 },
    ]);
    assert.deepEqual(s.frame({ type: "stop_ack", token: STOP }, 400), [
      { kind: "log", line: "worker w1#3 stopped (exact ACK)" },
      { kind: "send", frame: { type: "bye", reason: "stopped" } },
      { kind: "close", how: "end" },
      { kind: "detach", why: "stopped" },
    ]);
    assert.equal(s.state, "closed");
    assert.equal(ledger.state("w1#3"), "acked");
  });

  test("a stop_ack with another token is refused and not counted: the worker counts as gone, not stopped", () => {
    const { s, ledger } = admitted();
    ledger.begin("w1#3", STOP);
    assert.deepEqual(s.frame({ type: "stop_ack", token: "6".repeat(32) }, 200), [
      { kind: "log", line: "worker w1#3 sent a stop_ack that does not match its stop (wrong-token) — not counted" },
      { kind: "refuse", reason: "stop_ack not accepted (wrong-token)" },
      { kind: "close", how: "end" },
      { kind: "detach", why: "sent a wrong stop_ack" },
    ]);
    assert.equal(ledger.state("w1#3"), "gone");
    assert.equal(ledger.wrongAcks("w1#3"), 1);
    const early = admitted();
    assert.deepEqual(early.s.frame({ type: "stop_ack", token: STOP }, 200).slice(0, 2), [
      { kind: "log", line: "worker w1#3 sent a stop_ack that does not match its stop (not-stopping) — not counted" },
      { kind: "refuse", reason: "stop_ack not accepted (not-stopping)" },
    ]);
  });

  test("a worker silent past the idle limit is dropped at the deadline, not before, and leaves the shutdown", () => {
    const { s, ledger } = admitted();
    assert.deepEqual(s.timeout(60_099), [{ kind: "receive", deadline: 60_100 }]);
    assert.deepEqual(s.timeout(60_100), [{ kind: "close", how: "end" }, { kind: "detach", why: "silent for 60s" }]);
    assert.equal(ledger.has("w1#3"), false, "a worker that leaves before any stop is no part of the shutdown");
  });

  test("a worker that leaves after its stop was asked makes the shutdown incomplete, naming why", () => {
    const { s, ledger } = admitted();
    ledger.begin("w1#3", STOP);
    assert.deepEqual(s.closed(`${PEER} closed the connection`), [{ kind: "close", how: "end" }, { kind: "detach", why: "connection closed" }]);
    assert.deepEqual(ledger.outcome(0).gone, [{ name: "w1#3", why: "connection closed" }]);
  });

  test("bye is answered and ends the session; a bad frame is refused and ends it as a protocol error", () => {
    const bye = admitted().s;
    assert.deepEqual(bye.frame({ type: "bye", reason: "interrupted\n" }, 200), [
      { kind: "send", frame: { type: "bye", reason: "goodbye" } },
      { kind: "close", how: "end" },
      { kind: "detach", why: "said goodbye (interrupted\\x0a)" },
    ]);
    const bad = admitted().s;
    assert.deepEqual(bad.frame({ type: "want", slots: 0 }, 200), [
      { kind: "refuse", reason: "frame 'want': slots: Too small: expected number to be >=1" },
      { kind: "close", how: "end" },
      { kind: "detach", why: "protocol error: frame 'want': slots: Too small: expected number to be >=1" },
    ]);
    const broken = admitted().s;
    assert.deepEqual(broken.broken("frame of 9999999 bytes is over the cap").at(-1), { kind: "detach", why: "protocol error: frame of 9999999 bytes is over the cap" });
  });

  test("a campaign that fails to answer a request drops the connection and detaches the worker", () => {
    const { s } = admitted();
    s.frame(done, 200);
    assert.deepEqual(s.answer({ to: "handle", failed: "the session's store is closed" }, 210), [
      { kind: "close", how: "destroy" },
      { kind: "detach", why: "connection closed" },
      { kind: "log", line: `connection from ${PEER} ended: the session's store is closed` },
    ]);
  });

  test("misuse is asserted: an answer nobody asked for, a second accept, a timeout with no wait", () => {
    const { s } = admitted();
    assert.throws(() => s.answer({ to: "proof", problem: null }, 200), /an answer to 'proof' while serving/);
    assert.throws(() => s.accepted(0), /'accepted' while serving/);
    s.frame({ type: "want", slots: 1 }, 200);
    assert.throws(() => s.timeout(1e9), /a timeout while handling, with no wait/);
  });
});

describe("WorkerSession without the shared directory", () => {
  const own = (nonce: string | null, shared: boolean) => ({ ...prove(nonce, nonce === null ? "nonce: ENOENT" : null), shared_dir: shared });
  const put = { type: "put", unit: 9, path: "failures/5/meta.json", size: 2, offset: 0, data: "e30=", sha256: "0".repeat(64) };
  const transferRules = { takesTransfer: true, validate: { first: (raw: unknown) => check(FirstFrame, raw), prove: (raw: unknown) => check(Prove, raw), work: (raw: unknown) => check(WorkerFrameOrPut, raw) as never } };

  function through(p: Record<string, unknown>, over: Partial<SessionRules<FirstFrameT, ProveFrame, WorkerFrameT>> = {}) {
    const { s } = session(over);
    s.accepted(0);
    s.frame(hello(), 1);
    s.answer({ to: "screen", challenge }, 1);
    return { s, actions: s.frame(p, 2) };
  }

  test("a worker that says it does not see the shared directory is asked about as 'transfer' where files travel, and admitted so", () => {
    const { s, actions } = through(own(null, false), transferRules);
    assert.deepEqual(actions, [{ kind: "ask", question: { to: "proof", prove: own(null, false), files: "transfer" } }]);
    assert.deepEqual(s.answer({ to: "proof", problem: null }, 3), [{ kind: "ask", question: { to: "admit", hello: hello(), slots: 8, files: "transfer" } }]);
  });

  test("where files cannot travel (an explore master), a worker without the shared directory is refused, naming the nonce and the fix", () => {
    const { s, actions } = through(own(null, false));
    assert.deepEqual(actions, [
      {
        kind: "refuse",
        reason:
          "the worker does not see the shared directory (no nonce at /shared/out/tmp/nonce-1: nonce: ENOENT) and this server takes no files over the connection: every host must mount the shared campaign directory at the same path",
      },
      { kind: "close", how: "end" },
    ]);
    assert.equal(s.state, "closed");
  });

  test("a worker that claims the shared directory must still read this session's nonce, even where files could travel", () => {
    const { actions } = through(own("stale-nonce", true), transferRules);
    assert.deepEqual(actions, [
      { kind: "refuse", reason: "the worker cannot read the nonce at /shared/out/tmp/nonce-1: every host must mount the shared campaign directory at the same path" },
      { kind: "close", how: "end" },
    ]);
  });

  test("a put is a report from a worker admitted without the shared directory, and a protocol error from one in it", () => {
    const admit = (p: Record<string, unknown>) => {
      const { s } = through(p, transferRules);
      s.answer({ to: "proof", problem: null }, 3);
      s.answer({ to: "admit", label: "w1#3", welcome }, 100);
      return s;
    };
    const sending = admit(own(null, false));
    assert.deepEqual(sending.frame(put, 200), [{ kind: "ask", question: { to: "handle", frame: put, stopping: false } }]);
    const inShared = admit(own("n0nce", true));
    assert.deepEqual(inShared.frame(put, 200), [
      { kind: "refuse", reason: "'put' comes only from a worker without the shared directory" },
      { kind: "close", how: "end" },
      { kind: "detach", why: "protocol error: 'put' comes only from a worker without the shared directory" },
    ]);
  });
});
