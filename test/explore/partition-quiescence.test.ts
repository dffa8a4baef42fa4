// Quiescence over partitioned shares (core/quiescence.ts): a share in takeover is busy, and a
// master that was lost (its share taken over) is dropped from the vote without blocking it.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RootQuiescence, sharesIdle } from "../../src/core/quiescence.ts";

const T1 = "1".repeat(64);
const T2 = "2".repeat(64);

describe("sharesIdle", () => {
  const served = [
    { rank: 0, holder: "e:0:10", live: true },
    { rank: 1, holder: "e:1:11", live: true },
  ];
  it("is idle only when every share has a live holder that is idle", () => {
    assert.equal(sharesIdle(served, new Set(["e:0:10", "e:1:11"])), true);
    assert.equal(sharesIdle(served, new Set(["e:0:10"])), false, "a busy holder");
  });
  it("a share whose lease expired (waiting for or in takeover) or that nobody holds is busy", () => {
    const idle = new Set(["e:0:10", "e:1:11"]);
    assert.equal(sharesIdle([served[0]!, { ...served[1]!, live: false }], idle), false);
    assert.equal(sharesIdle([served[0]!, { rank: 1, holder: "", live: false }], idle), false);
  });
});

describe("RootQuiescence.dropPeer", () => {
  const q = () => new RootQuiescence({ peers: [1, 2], maxIdleMs: 100, freshMs: 1000 });

  it("a lost peer no longer holds the fleet busy: the others' idleness is enough", () => {
    const r = q();
    r.onStatus(1, { rank: 1, sequence: 1, idle: true }, 0);
    r.onStatus(2, { rank: 2, sequence: 1, idle: false }, 0);
    r.localIdle(true, 0);
    assert.deepEqual(r.tick(200), [], "rank 2 busy: nothing proposed");
    assert.deepEqual(r.dropPeer(2, 200), []);
    assert.deepEqual(r.tick(300), [{ kind: "refresh" }], "the window ran from the drop");
    assert.deepEqual(r.afterRefresh(true, 300, T1), [{ kind: "prepare", token: T1, to: [1] }]);
    assert.deepEqual(r.onVote(2, { rank: 2, token: T1, idle: true }, 300).class, "unowned", "a dropped peer's vote counts for nothing");
  });

  it("dropping a peer aborts an open proposal that went to it", () => {
    const r = q();
    r.onStatus(1, { rank: 1, sequence: 1, idle: true }, 0);
    r.onStatus(2, { rank: 2, sequence: 1, idle: true }, 0);
    r.localIdle(true, 0);
    assert.deepEqual(r.tick(100), [{ kind: "refresh" }]);
    r.afterRefresh(true, 100, T1);
    assert.deepEqual(r.dropPeer(2, 110), [{ kind: "abort", token: T1, to: [1, 2] }]);
    assert.equal(r.phase, "watching");
  });

  it("once every peer was dropped the root alone commits at once", () => {
    const r = q();
    r.dropPeer(1, 0);
    r.dropPeer(2, 0);
    r.localIdle(true, 0);
    assert.deepEqual(r.tick(100), [{ kind: "refresh" }]);
    assert.deepEqual(r.afterRefresh(true, 100, T2), [{ kind: "commit", token: T2, to: [] }, { kind: "committed" }]);
    assert.equal(r.phase, "committed");
  });

  it("after COMMIT the decision no longer waits for a dropped peer's ACK", () => {
    const r = q();
    r.onStatus(1, { rank: 1, sequence: 1, idle: true }, 0);
    r.onStatus(2, { rank: 2, sequence: 1, idle: true }, 0);
    r.localIdle(true, 0);
    r.tick(100);
    r.afterRefresh(true, 100, T1);
    r.onVote(1, { rank: 1, token: T1, idle: true }, 100);
    assert.deepEqual(r.onVote(2, { rank: 2, token: T1, idle: true }, 100).actions, [{ kind: "commit", token: T1, to: [1, 2] }]);
    assert.deepEqual(r.onAck(1, { rank: 1, token: T1, committed: true }).actions, []);
    assert.deepEqual(r.dropPeer(2, 120), [{ kind: "committed" }]);
  });
});
