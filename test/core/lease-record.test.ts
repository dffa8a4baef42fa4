// The lease record's transitions with plain values: leased -> committing -> done under fences,
// expiry and takeover, stale fences that change nothing, `committing` never stolen, and what a
// valid record is. No files and no clock: the record read, the time and the fence are passed in.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  abandonable,
  beginCommit,
  canonicalManifest,
  claim,
  commitEmpty,
  complete,
  completeCommitted,
  isExpired,
  manifestProblem,
  recordProblem,
  recordText,
  renew,
  type ClaimRequest,
  type CommitManifest,
  type LeaseRecord,
  type Transition,
} from "../../src/core/lease-record.ts";

const ID = "a".repeat(64);
const C1 = "c".repeat(64);
const C2 = "b".repeat(64);
const TTL = 1000;

function request(over: Partial<ClaimRequest> = {}): ClaimRequest {
  return { id: ID, payload: { hash: ID, origin: "initial" }, owner: "m0", worker: 0, fence: "f1", now: 100, ttlMs: TTL, ...over };
}

function manifest(over: Partial<CommitManifest> = {}): CommitManifest {
  return { worker: "w1", staging_id: "d".repeat(32), hashes: [C1, C2, C1], num_generated: 3, ...over };
}

const EMPTY: CommitManifest = { worker: "w1", staging_id: "", hashes: [], num_generated: 0 };

/** The record a transition produced; fails the test on a refusal. */
function next(t: Transition): LeaseRecord {
  assert.ok("next" in t, `refused: ${JSON.stringify(t)}`);
  return deepFreeze(t.next);
}

/** Frozen, so a transition that wrote into the record it was given would throw. */
function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null) {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

const leased = () => next(claim(null, request()));
const committing = () => next(beginCommit(leased(), "f1", manifest(), 200));

describe("lease record: claim and expiry", () => {
  it("a first claim makes a leased record under the fresh fence", () => {
    assert.deepEqual(claim(null, request()), {
      next: {
        schema: 1,
        id: ID,
        status: "leased",
        payload: { hash: ID, origin: "initial" },
        owner: "m0",
        previous_owner: "",
        worker: 0,
        token: "f1",
        updated: 100,
        attempts: 1,
        steals: 0,
      },
    });
  });

  it("an unexpired lease is held; at exactly its TTL it is taken over under a new fence, counted as a steal", () => {
    const rec = leased();
    assert.deepEqual(claim(rec, request({ owner: "m1", fence: "f2", now: 100 + TTL - 1 })), { refused: "held" });
    const taken = next(claim(rec, request({ owner: "m1", worker: 1, fence: "f2", now: 100 + TTL })));
    assert.deepEqual(
      [taken.status, taken.token, taken.owner, taken.previous_owner, taken.worker, taken.updated, taken.attempts, taken.steals],
      ["leased", "f2", "m1", "m0", 1, 100 + TTL, 2, 1],
    );
    const again = next(claim(taken, request({ owner: "m1", worker: 1, fence: "f3", now: 100 + 2 * TTL })));
    assert.deepEqual([again.token, again.previous_owner, again.attempts, again.steals], ["f3", "m1", 3, 1], "the same owner reclaiming is no steal");
  });

  it("ttl 0 takes over any leased record, even one dated in the future", () => {
    const future = next(claim(null, request({ now: 1_000_000 })));
    assert.deepEqual(claim(future, request({ fence: "f2", now: 500 })), { refused: "held" });
    assert.equal(next(claim(future, request({ fence: "f2", now: 500, ttlMs: 0 }))).token, "f2");
    assert.equal(isExpired(future, 500, 0), true);
    assert.equal(isExpired(future, 500, TTL), false);
  });

  it("committing is never stolen and done is never claimed again, however old, even with ttl 0", () => {
    for (const ttlMs of [TTL, 0]) {
      assert.deepEqual(claim(committing(), request({ fence: "f2", now: 1e12, ttlMs })), { refused: "committing" });
      assert.deepEqual(claim(next(complete(leased(), "f1", 300)), request({ fence: "f2", now: 1e12, ttlMs })), { refused: "done" });
    }
  });

  it("a heartbeat renews leased and committing records under their fence, nothing else", () => {
    assert.equal(next(renew(leased(), "f1", 700)).updated, 700);
    const c = next(renew(committing(), "f1", 700));
    assert.deepEqual([c.status, c.updated, c.commit], ["committing", 700, canonicalManifest(manifest())]);
    assert.deepEqual(renew(leased(), "f0", 700), { refused: "stale" });
    assert.deepEqual(renew(null, "f1", 700), { refused: "stale" });
    assert.deepEqual(renew(next(complete(leased(), "f1", 300)), "f1", 700), { refused: "done" });
  });

  it("only the holder of a leased record may abandon it, never once committing", () => {
    assert.equal(abandonable(leased(), "f1"), null);
    assert.equal(abandonable(leased(), "f0"), "stale");
    assert.equal(abandonable(null, "f1"), "stale");
    assert.equal(abandonable(committing(), "f1"), "not-leased");
  });
});

describe("lease record: commit fence and completion", () => {
  it("beginCommit stores the canonical manifest; the same manifest again passes, another is refused", () => {
    const c = committing();
    assert.deepEqual(
      [c.status, c.token, c.updated, c.commit],
      ["committing", "f1", 200, { hashes: [C2, C1], num_generated: 3, staging_id: "d".repeat(32), worker: "w1" }],
    );
    assert.equal(next(beginCommit(c, "f1", manifest({ hashes: [C2, C1] }), 250)).updated, 250, "same set of hashes in another order");
    assert.deepEqual(beginCommit(c, "f1", manifest({ worker: "w2" }), 250), { refused: "other-manifest" });
  });

  it("a stale fence can neither begin a commit nor complete, before or after a takeover", () => {
    const rec = leased();
    const taken = next(claim(rec, request({ owner: "m1", fence: "f2", now: 100 + TTL })));
    for (const r of [rec, taken]) {
      const stale = r === rec ? "f0" : "f1";
      assert.deepEqual(beginCommit(r, stale, manifest(), 5000), { refused: "stale" });
      assert.deepEqual(complete(r, stale, 5000), { refused: "stale" });
      assert.deepEqual(completeCommitted(r, stale, 5000), { refused: "stale" });
      assert.deepEqual(commitEmpty(r, stale, EMPTY, 5000), { refused: "stale" });
    }
    const passed = next(beginCommit(taken, "f2", manifest(), 5000));
    assert.deepEqual(complete(passed, "f1", 5001), { refused: "stale" }, "the old fence stays stale past the new one's commit fence");
    assert.equal(next(complete(passed, "f2", 5001)).status, "done");
  });

  it("complete makes a leased or committing record done, once; the manifest stays", () => {
    const d = next(complete(leased(), "f1", 300));
    assert.deepEqual([d.status, d.updated, d.completed, d.commit], ["done", 300, 300, undefined]);
    const dc = next(complete(committing(), "f1", 300));
    assert.deepEqual([dc.status, dc.completed, dc.commit], ["done", 300, canonicalManifest(manifest())]);
    assert.deepEqual(complete(d, "f1", 400), { refused: "done" }, "done under the same fence: already");
    assert.deepEqual(beginCommit(d, "f1", manifest(), 400), { refused: "done" });
  });

  it("completeCommitted completes only what passed its commit fence", () => {
    assert.deepEqual(completeCommitted(leased(), "f1", 300), { refused: "not-committing" });
    const d = next(completeCommitted(committing(), "f1", 300));
    assert.deepEqual([d.status, d.completed, d.commit], ["done", 300, canonicalManifest(manifest())]);
    assert.deepEqual(completeCommitted(d, "f1", 400), { refused: "done" });
  });

  it("commitEmpty is fence and completion in one step, for a result without children only", () => {
    const d = next(commitEmpty(leased(), "f1", EMPTY, 300));
    assert.deepEqual([d.status, d.updated, d.completed, d.commit], ["done", 300, 300, EMPTY]);
    assert.deepEqual(commitEmpty(leased(), "f1", manifest(), 300), { refused: "has-children" });
    assert.deepEqual(commitEmpty(committing(), "f1", EMPTY, 300), { refused: "other-manifest" });
    assert.deepEqual(commitEmpty(d, "f1", EMPTY, 400), { refused: "done" });
  });

  it("over any sequence of claims, heartbeats and commits by two masters, only the current fence moves the record, and committing keeps its holder", () => {
    type Op = { kind: "claim" | "renew" | "begin" | "complete" | "empty"; who: 0 | 1; dt: number; ttl0: boolean };
    const op = fc.record({
      kind: fc.constantFrom("claim", "renew", "begin", "complete", "empty") as fc.Arbitrary<Op["kind"]>,
      who: fc.constantFrom(0, 1) as fc.Arbitrary<0 | 1>,
      dt: fc.integer({ min: 0, max: 2 * TTL }),
      ttl0: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        let rec = null as LeaseRecord | null;
        const fences: [string | null, string | null] = [null, null];
        let now = 0;
        let issued = 0;
        for (const o of ops) {
          now += o.dt;
          const before: LeaseRecord | null = rec;
          const mine = fences[o.who] ?? "never-issued";
          let t: Transition;
          if (o.kind === "claim") {
            const fence = `f${++issued}`;
            t = claim(before, request({ owner: `m${o.who}`, worker: o.who, fence, now, ttlMs: o.ttl0 ? 0 : TTL }));
            if ("next" in t) fences[o.who] = fence;
          } else if (o.kind === "renew") t = renew(before, mine, now);
          else if (o.kind === "begin") t = beginCommit(before, mine, manifest(), now);
          else if (o.kind === "complete") t = complete(before, mine, now);
          else t = commitEmpty(before, mine, EMPTY, now);
          if (!("next" in t)) continue;
          const after = t.next;
          if (before !== null && o.kind !== "claim") assert.equal(before.token, mine, "only the current fence changes a record");
          if (before !== null && before.status !== "leased") {
            assert.notEqual(o.kind, "claim", "a committing or done record is never claimed");
            assert.equal(after.token, before.token);
            assert.notEqual(before.status, "done", "done is terminal");
          }
          if (before?.status === "committing") assert.deepEqual(after.commit, before.commit, "the manifest of a passed fence never changes");
          rec = deepFreeze(after);
        }
      }),
    );
  });
});

describe("lease record: misuse and validity", () => {
  it("misuse is asserted: times that are not finite or negative, an empty owner or fence, a payload that is not the id's, an invalid manifest", () => {
    const rec = leased();
    for (const bad of [
      () => claim(null, request({ now: Number.NaN })),
      () => claim(null, request({ ttlMs: Number.POSITIVE_INFINITY })),
      () => claim(null, request({ now: -1 })),
      () => claim(null, request({ owner: "" })),
      () => claim(null, request({ worker: -1 })),
      () => claim(null, request({ fence: "" })),
      () => claim(null, request({ payload: { hash: C1, origin: "initial" } })),
      () => renew(rec, "f1", Number.NaN),
      () => complete(rec, "f1", -5),
      () => beginCommit(rec, "f1", manifest({ staging_id: "" }), 200),
      () => commitEmpty(rec, "f1", { ...EMPTY, worker: "" }, 200),
    ]) {
      assert.throws(bad, assert.AssertionError);
    }
  });

  it("canonicalManifest deduplicates and sorts; manifestProblem names what is wrong", () => {
    assert.deepEqual(canonicalManifest(manifest()), { hashes: [C2, C1], num_generated: 3, staging_id: "d".repeat(32), worker: "w1" });
    assert.equal(manifestProblem(manifest()), null);
    assert.equal(manifestProblem(EMPTY), null);
    assert.match(manifestProblem(manifest({ num_generated: 1 }))!, /num_generated 1 must be an integer >= 2/);
    assert.match(manifestProblem({ ...manifest(), extra: 1 })!, /keys must be exactly/);
    assert.match(manifestProblem(manifest({ hashes: ["C".repeat(64)] }))!, /is not 64 lowercase hex/);
  });

  it("a record is valid exactly as a transition wrote it; a changed field or an unknown key is named", () => {
    const c = committing();
    assert.equal(recordProblem(JSON.parse(recordText(c)), ID), null);
    assert.match(recordProblem(JSON.parse(recordText(c)), C1)!, /does not match the file name/);
    assert.match(recordProblem({ ...c, status: "stolen" }, ID)!, /status "stolen"/);
    assert.match(recordProblem({ ...c, token: "" }, ID)!, /token must be a non-empty string/);
    assert.match(recordProblem({ ...c, fence: "f1" }, ID)!, /unknown keys fence/);
    assert.match(recordProblem({ ...c, commit: manifest() }, ID)!, /commit manifest is not canonical/);
  });

  it("recordText gives the same bytes for the same record, whatever the key order", () => {
    const rec = leased();
    const reordered = Object.fromEntries(Object.entries(rec).reverse());
    assert.equal(recordText(reordered), recordText(rec));
    assert.ok(recordText(rec).endsWith("}\n"));
  });
});
