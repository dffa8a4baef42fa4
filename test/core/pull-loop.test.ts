// PullLoop, the worker's side of a session, driven by scripted replies, reports and times: each
// test asserts the whole sequence of actions and states. No socket, no clock, no child.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { PullLoop, type PullReply } from "../../src/core/pull-loop.ts";

interface Unit {
  id: number;
}
type Report = { type: "done"; chunk_id: number; outcome: string };
type Reply = PullReply | { type: "assign"; units: Unit[] };

const BEAT = 5_000;
const STOP = "7".repeat(32);
const u = (id: number): Unit => ({ id });
const report = (id: number, outcome = "complete"): Report => ({ type: "done", chunk_id: id, outcome });
const assign = (...ids: number[]): Reply => ({ type: "assign", units: ids.map(u) });
const ack = (note: string | null = null, drain = false): Reply => ({ type: "ack", drain, note });

function loop(slots = 2, peer?: string) {
  const m = new PullLoop<Unit, Report, Reply>({ slots, beatMs: BEAT, unitsOf: (r) => (r.type === "assign" && "units" in r ? r.units : null), idOf: (x) => x.id, peer });
  const states: string[] = [];
  /** Runs `step` and records the state it left the machine in. */
  const at = <T>(actions: T): T => {
    states.push(m.state);
    return actions;
  };
  return { m, states, at };
}

describe("PullLoop working", () => {
  test("asks for as many units as slots are free, heartbeats them once a beat is due, reports each as it finishes", () => {
    const { m, states, at } = loop(2);
    assert.deepEqual(at(m.start(0)), [{ kind: "request", frame: { type: "want", slots: 2 } }]);
    assert.deepEqual(at(m.replied(assign(1, 2), 10)), [
      { kind: "run", unit: u(1) },
      { kind: "run", unit: u(2) },
      { kind: "pause", until: 10 + BEAT },
    ]);
    assert.deepEqual(at(m.woke(BEAT)), [{ kind: "request", frame: { type: "heartbeat", ids: [1, 2] } }]);
    assert.deepEqual(at(m.replied(ack(), BEAT + 1)), [{ kind: "pause", until: 2 * BEAT + 1 }]);
    m.finished(2, report(2));
    assert.deepEqual(at(m.woke(BEAT + 500)), [{ kind: "request", frame: report(2) }], "a woken pause reports at once");
    assert.deepEqual(at(m.replied(ack("recorded"), BEAT + 600)), [
      { kind: "reported", unit: u(2), report: report(2), note: "recorded" },
      { kind: "request", frame: { type: "want", slots: 1 } },
    ]);
    assert.deepEqual(at(m.replied({ type: "wait", seconds: 1 }, BEAT + 700)), [{ kind: "pause", until: BEAT + 1_700 }], "a wait shorter than the beat");
    assert.deepEqual(states, ["working", "working", "working", "working", "working", "working", "working"]);
  });

  test("reports go in the order the units started, whichever finished first", () => {
    const { m } = loop(2);
    m.start(0);
    m.replied(assign(1, 2), 0);
    m.finished(2, report(2));
    m.finished(1, report(1));
    assert.deepEqual(m.woke(1), [{ kind: "request", frame: report(1) }]);
    assert.deepEqual(m.replied(ack("recorded"), 2).at(-1), { kind: "request", frame: report(2) });
  });
});

describe("PullLoop draining", () => {
  test("a drain reply stops the asking; an idle drained worker heartbeats at least every second so a stop reaches it", () => {
    const { m, at } = loop(1);
    m.start(0);
    assert.deepEqual(at(m.replied({ type: "drain", reason: "deadline" }, 10)), [
      { kind: "say", line: "  the coordinator is draining (deadline) — finishing what I hold" },
      { kind: "request", frame: { type: "heartbeat", ids: [] } },
    ]);
    assert.equal(m.state, "draining");
    assert.deepEqual(m.replied(ack(null, true), 20), [{ kind: "pause", until: 1_020 }], "no second line for a drain already known");
    assert.deepEqual(m.woke(1_020), [{ kind: "request", frame: { type: "heartbeat", ids: [] } }]);
  });

  test("an ack saying drain, on a report, drains too; the held unit is still heartbeated and reported", () => {
    const { m } = loop(2);
    m.start(0);
    m.replied(assign(1, 2), 0);
    m.finished(1, report(1));
    m.woke(1);
    assert.deepEqual(m.replied(ack("recorded", true), 2), [
      { kind: "reported", unit: u(1), report: report(1), note: "recorded" },
      { kind: "say", line: "  the coordinator is draining — finishing what I hold" },
      { kind: "pause", until: 2 + BEAT },
    ]);
    assert.deepEqual(m.woke(BEAT), [{ kind: "request", frame: { type: "heartbeat", ids: [2] } }]);
  });
});

describe("PullLoop stop", () => {
  test("stop: the children are aborted, waited for, reported and cleaned, and only then the exact stop_ack goes out", () => {
    const { m, states, at } = loop(2);
    m.start(0);
    m.replied(assign(1, 2), 0);
    m.woke(BEAT);
    assert.deepEqual(at(m.replied({ type: "stop", token: STOP }, BEAT)), [
      { kind: "say", line: "  the coordinator asked me to stop" },
      { kind: "abort", ids: [1, 2] },
      { kind: "pause", until: null },
    ]);
    m.finished(1, report(1, "interrupted"));
    assert.deepEqual(at(m.woke(BEAT + 10)), [{ kind: "request", frame: report(1, "interrupted") }]);
    assert.deepEqual(at(m.replied(ack("aborted"), BEAT + 20)), [
      { kind: "reported", unit: u(1), report: report(1, "interrupted"), note: "aborted" },
      { kind: "pause", until: null },
    ]);
    m.finished(2, report(2, "interrupted"));
    m.woke(BEAT + 30);
    assert.deepEqual(at(m.replied(ack("aborted"), BEAT + 40)), [
      { kind: "reported", unit: u(2), report: report(2, "interrupted"), note: "aborted" },
      { kind: "cleanup", unit: u(1) },
      { kind: "cleanup", unit: u(2) },
      { kind: "request", frame: { type: "stop_ack", token: STOP } },
    ]);
    assert.deepEqual(at(m.replied({ type: "bye" }, BEAT + 50)), [
      { kind: "say", line: "  stop acknowledged" },
      { kind: "end", outcome: "stopped" },
    ]);
    assert.deepEqual(states, ["stopping", "stopping", "stopping", "stopping", "done"]);
  });

  test("a stop that arrives with reports in hand: they are sent first, then the stop; anything but bye to the stop_ack is not a clean stop", () => {
    const { m } = loop(2);
    m.start(0);
    m.replied(assign(1, 2), 0);
    m.finished(1, report(1));
    m.finished(2, report(2));
    m.woke(1);
    assert.deepEqual(m.replied({ type: "stop", token: STOP }, 2), [
      { kind: "reported", unit: u(1), report: report(1), note: "stop" },
      { kind: "request", frame: report(2) },
    ]);
    assert.equal(m.state, "working", "the stop is acted on once the reports in hand are sent");
    assert.deepEqual(m.replied(ack("recorded"), 3), [
      { kind: "reported", unit: u(2), report: report(2), note: "recorded" },
      { kind: "say", line: "  the coordinator asked me to stop" },
      { kind: "request", frame: { type: "stop_ack", token: STOP } },
    ]);
    assert.deepEqual(m.replied({ type: "refuse", reason: "stop_ack not accepted (wrong-token)" }, 4), [
      { kind: "say", line: "  the coordinator answered the stop_ack with 'refuse'" },
      { kind: "end", outcome: "stop-unacknowledged" },
    ]);
  });
});

describe("PullLoop interrupted and lost", () => {
  test("Ctrl-C aborts the children at once, reports them, then says bye; a stop asked meanwhile still wins", () => {
    const { m } = loop(1);
    m.start(0);
    m.replied(assign(1), 0);
    assert.deepEqual(m.interrupt(), [
      { kind: "say", line: "  interrupted: stopping what I hold; the coordinator will hand it out again" },
      { kind: "abort", ids: [1] },
    ]);
    assert.equal(m.state, "interrupted");
    assert.deepEqual(m.interrupt(), [], "a second Ctrl-C changes nothing");
    m.finished(1, report(1, "interrupted"));
    assert.deepEqual(m.woke(10), [{ kind: "request", frame: report(1, "interrupted") }]);
    assert.deepEqual(m.replied(ack("aborted", true), 20), [
      { kind: "reported", unit: u(1), report: report(1, "interrupted"), note: "aborted" },
      { kind: "request", frame: { type: "bye", reason: "interrupted" } },
    ]);
    assert.deepEqual(m.replied({ type: "bye" }, 30), [{ kind: "end", outcome: "interrupted" }]);

    const stopped = loop(1).m;
    stopped.start(0);
    stopped.interrupt();
    assert.deepEqual(stopped.replied({ type: "stop", token: STOP }, 1), [
      { kind: "say", line: "  the coordinator asked me to stop" },
      { kind: "request", frame: { type: "stop_ack", token: STOP } },
    ]);
  });

  test("units that arrive in reply to a want sent before Ctrl-C are aborted as soon as they start", () => {
    const { m } = loop(2);
    m.start(0);
    assert.deepEqual(m.interrupt(), [{ kind: "say", line: "  interrupted: stopping what I hold; the coordinator will hand it out again" }]);
    assert.deepEqual(m.replied(assign(4), 1), [
      { kind: "run", unit: u(4) },
      { kind: "abort", ids: [4] },
      { kind: "pause", until: 1 + BEAT },
    ]);
    m.finished(4, report(4, "interrupted"));
    assert.deepEqual(m.woke(2), [{ kind: "request", frame: report(4, "interrupted") }]);
    assert.deepEqual(m.replied(ack("aborted"), 3).at(-1), { kind: "request", frame: { type: "bye", reason: "interrupted" } });
  });

  test("a failed request or a refusal loses the coordinator: the children are ended and waited for, nothing more is sent", () => {
    const { m } = loop(2);
    m.start(0);
    m.replied(assign(1, 2), 0);
    m.finished(2, report(2));
    m.woke(1);
    assert.deepEqual(m.lost("no frame from 10.0.0.1:7000 within 60s"), [
      { kind: "say", line: "worker: lost the coordinator (no frame from 10.0.0.1:7000 within 60s)" },
      { kind: "abort", ids: [1] },
      { kind: "pause", until: null },
    ]);
    m.finished(1, report(1, "interrupted"));
    assert.deepEqual(m.woke(2), [{ kind: "end", outcome: "lost" }]);

    const refused = loop(1).m;
    refused.start(0);
    assert.deepEqual(refused.replied({ type: "refuse", reason: "frame 'want': slots: too big" }, 1), [
      { kind: "say", line: "worker: lost the coordinator (the coordinator refused a request: frame 'want': slots: too big)" },
      { kind: "end", outcome: "lost" },
    ]);
  });

  test("a worker of an explore master names the master, not a coordinator, in every line", () => {
    const { m } = loop(1, "the master");
    m.start(0);
    assert.deepEqual(m.replied({ type: "drain", reason: "deadline" }, 1).find((a) => a.kind === "say"), {
      kind: "say",
      line: "  the master is draining (deadline) — finishing what I hold",
    });
    assert.deepEqual(m.lost("no frame within 60s")[0], { kind: "say", line: "worker: lost the master (no frame within 60s)" });
  });

  test("misuse is asserted: a reply with no request out, a report for a unit not running, a second start", () => {
    const { m } = loop(1);
    assert.deepEqual(m.start(0), [{ kind: "request", frame: { type: "want", slots: 1 } }]);
    assert.throws(() => m.start(0), /start\(\) twice/);
    m.replied({ type: "wait", seconds: 1 }, 1);
    assert.throws(() => m.replied(ack(), 2), /no request outstanding/);
    assert.throws(() => m.finished(9, report(9)), /unit 9, which is not running/);
  });
});
