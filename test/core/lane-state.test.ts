import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { LaneState, type ChunkRow } from "../../src/core/lane-state.ts";
import { LAST_SEED, mergeRanges, SEED_LIMIT, type Range } from "../../src/core/ranges.ts";

interface Snapshot {
  cursor: number;
  allocNext: number;
  pending: Range[];
  doneAhead: Range[];
}

function snapshot(ls: LaneState): Snapshot {
  return { cursor: ls.cursor, allocNext: ls.allocNext, pending: [...ls.pending], doneAhead: [...ls.doneAhead] };
}

describe("LaneState: parallel completion (fuzzrun range-arithmetic scenario)", () => {
  it("hands out consecutive fresh ranges", () => {
    const ls = new LaneState(100, 100);
    assert.deepEqual(ls.take(100), [100, 199]);
    assert.deepEqual(ls.take(100), [200, 299]);
    assert.deepEqual(snapshot(ls), { cursor: 100, allocNext: 300, pending: [], doneAhead: [] });
  });

  it("holds the cursor when a later range completes first, then absorbs it when the laggard lands", () => {
    const ls = new LaneState(100, 100);
    const a = ls.take(100);
    const b = ls.take(100);
    ls.complete(...b);
    assert.equal(ls.cursor, 100);
    assert.equal(ls.ahead(), 100);
    assert.deepEqual(ls.doneAhead, [[200, 299]]);
    ls.complete(...a);
    assert.equal(ls.cursor, 300);
    assert.equal(ls.ahead(), 0);
    assert.deepEqual(snapshot(ls), { cursor: 300, allocNext: 300, pending: [], doneAhead: [] });
  });

  it("hands a requeued range out again before new ground and counts it once", () => {
    const ls = new LaneState(100, 100);
    const a = ls.take(100);
    const b = ls.take(100);
    ls.complete(...b);
    ls.requeue(...a);
    assert.equal(ls.queued(), 100);
    const again = ls.take(100);
    assert.deepEqual(again, a);
    assert.equal(ls.cursor, 100);
    assert.equal(ls.queued(), 0);
    ls.complete(...again);
    assert.equal(ls.cursor, 300);
    const before = snapshot(ls);
    ls.complete(...again);
    assert.equal(ls.cursor, 300);
    assert.deepEqual(snapshot(ls), before);
  });

  it("counts a late completion of a reissued range once", () => {
    const ls = new LaneState(100, 100);
    const a = ls.take(50);
    ls.requeue(...a);
    const reissued = ls.take(50);
    ls.complete(...a); // the first holder finished after all
    assert.deepEqual(snapshot(ls), { cursor: 150, allocNext: 150, pending: [], doneAhead: [] });
    ls.complete(...reissued);
    assert.deepEqual(snapshot(ls), { cursor: 150, allocNext: 150, pending: [], doneAhead: [] });
  });
});

describe("LaneState.take", () => {
  it("splits a pending gap larger than the request", () => {
    const ls = new LaneState(0, 0);
    ls.take(100);
    ls.requeue(0, 99);
    assert.deepEqual(ls.take(30), [0, 29]);
    assert.deepEqual(ls.pending, [[30, 99]]);
    assert.deepEqual(ls.take(30), [30, 59]);
    assert.equal(ls.allocNext, 100);
  });

  it("returns fewer seeds than asked when the lowest gap is smaller, and leaves the next gap queued", () => {
    const ls = new LaneState(0, 0);
    ls.take(10);
    ls.take(10);
    ls.take(10);
    ls.requeue(0, 9);
    ls.requeue(20, 29);
    assert.deepEqual(ls.take(50), [0, 9]);
    assert.deepEqual(ls.pending, [[20, 29]]);
    assert.deepEqual(ls.take(50), [20, 29]);
    assert.deepEqual(ls.take(50), [30, 79]);
  });

  it("rejects a count that is not a positive integer", () => {
    const ls = new LaneState(0, 0);
    assert.throws(() => ls.take(0), assert.AssertionError);
    assert.throws(() => ls.take(-3), assert.AssertionError);
    assert.throws(() => ls.take(2.5), assert.AssertionError);
    assert.deepEqual(snapshot(ls), { cursor: 0, allocNext: 0, pending: [], doneAhead: [] });
  });
});

describe("LaneState.complete and requeue", () => {
  it("removes a completed range from pending, splitting a gap if needed", () => {
    const ls = new LaneState(0, 0);
    ls.take(30);
    ls.requeue(0, 29);
    ls.complete(10, 19);
    assert.deepEqual(ls.pending, [[0, 9], [20, 29]]);
    assert.deepEqual(ls.doneAhead, [[10, 19]]);
    assert.equal(ls.cursor, 0);
  });

  it("ignores a requeue wholly below the cursor and clips one that straddles it", () => {
    const ls = new LaneState(0, 0);
    ls.take(20);
    ls.complete(0, 9);
    ls.requeue(0, 5);
    assert.deepEqual(ls.pending, []);
    ls.requeue(5, 19);
    assert.deepEqual(ls.pending, [[10, 19]]);
  });

  it("never requeues seeds that are already done ahead of the cursor", () => {
    const ls = new LaneState(0, 0);
    ls.take(30);
    ls.complete(10, 19);
    ls.requeue(0, 29);
    assert.deepEqual(ls.pending, [[0, 9], [20, 29]]);
    assert.equal(ls.queued(), 20);
  });

  it("merges a requeue adjacent to an existing gap", () => {
    const ls = new LaneState(0, 0);
    ls.take(10);
    ls.take(10);
    ls.requeue(10, 19);
    ls.requeue(0, 9);
    assert.deepEqual(ls.pending, [[0, 19]]);
  });

  it("rejects completing or requeueing seeds that were never handed out", () => {
    const ls = new LaneState(100, 100);
    ls.take(10);
    assert.throws(() => ls.complete(105, 110), assert.AssertionError);
    assert.throws(() => ls.requeue(110, 119), assert.AssertionError);
    assert.throws(() => ls.complete(50, 99), assert.AssertionError);
    assert.throws(() => ls.complete(105, 104), assert.AssertionError);
    assert.deepEqual(snapshot(ls), { cursor: 100, allocNext: 110, pending: [], doneAhead: [] });
  });

  it("absorb advances through completed ranges that a direct edit left unmerged", () => {
    const ls = new LaneState(0, 0);
    ls.take(30);
    ls.doneAhead = [[10, 19], [0, 9], [25, 29]];
    ls.absorb();
    assert.equal(ls.cursor, 20);
    assert.deepEqual(ls.doneAhead, [[25, 29]]);
  });
});

describe("LaneState.recover", () => {
  it("with no chunk rows is a fresh lane at the persisted cursor", () => {
    assert.deepEqual(snapshot(LaneState.recover(100, 250, [])), { cursor: 250, allocNext: 250, pending: [], doneAhead: [] });
  });

  it("requeues a chunk that was running at the cursor and keeps the completed one above it ahead", () => {
    const ls = LaneState.recover(100, 100, [
      { seedFrom: 100, seedTo: 199, status: "running" },
      { seedFrom: 200, seedTo: 299, status: "complete" },
    ]);
    assert.deepEqual(snapshot(ls), { cursor: 100, allocNext: 300, pending: [[100, 199]], doneAhead: [[200, 299]] });
    assert.deepEqual(ls.take(100), [100, 199]);
  });

  it("absorbs complete chunks contiguous with the cursor, and requeues every non-complete status", () => {
    const ls = LaneState.recover(100, 100, [
      { seedFrom: 150, seedTo: 199, status: "complete" },
      { seedFrom: 100, seedTo: 149, status: "complete" },
      { seedFrom: 200, seedTo: 219, status: "leased" },
      { seedFrom: 220, seedTo: 239, status: "reissued" },
      { seedFrom: 240, seedTo: 249, status: "aborted:timeout" },
      { seedFrom: 250, seedTo: 299, status: "complete" },
    ]);
    assert.deepEqual(snapshot(ls), { cursor: 200, allocNext: 300, pending: [[200, 249]], doneAhead: [[250, 299]] });
  });

  it("catches up a persisted cursor that lagged behind completed chunks", () => {
    const ls = LaneState.recover(100, 100, [
      { seedFrom: 100, seedTo: 199, status: "complete" },
      { seedFrom: 200, seedTo: 299, status: "complete" },
    ]);
    assert.deepEqual(snapshot(ls), { cursor: 300, allocNext: 300, pending: [], doneAhead: [] });
  });

  it("requeues a hole that no chunk row covers", () => {
    const ls = LaneState.recover(100, 100, [{ seedFrom: 150, seedTo: 199, status: "complete" }]);
    assert.deepEqual(snapshot(ls), { cursor: 100, allocNext: 200, pending: [[100, 149]], doneAhead: [[150, 199]] });
  });

  it("ignores chunks wholly below the cursor and clips one that straddles it", () => {
    const ls = LaneState.recover(100, 500, [
      { seedFrom: 0, seedTo: 99, status: "running" },
      { seedFrom: 100, seedTo: 499, status: "complete" },
      { seedFrom: 300, seedTo: 400, status: "aborted:exit 3" },
      { seedFrom: 450, seedTo: 549, status: "reissued" },
    ]);
    assert.deepEqual(snapshot(ls), { cursor: 500, allocNext: 550, pending: [[500, 549]], doneAhead: [] });
  });
});

// ---------------------------------------------------------------------------------------------
// Model-based property test. A seed-level reference model runs beside LaneState; seeds stay
// small so sets of individual seeds are cheap.

type Command =
  | { kind: "take"; n: number }
  | { kind: "complete"; pick: number }
  | { kind: "requeue"; pick: number }
  | { kind: "recover"; pick: number };

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("take" as const), n: fc.integer({ min: 1, max: 8 }) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("complete" as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("requeue" as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("recover" as const), pick: fc.nat() }) },
);

interface HandOut {
  from: number;
  to: number;
  status: "leased" | "reissued" | "complete";
}

function seedsIn(from: number, to: number): number[] {
  const seeds: number[] = [];
  for (let s = from; s <= to; s++) seeds.push(s);
  return seeds;
}

function rangesOf(seeds: Iterable<number>): Range[] {
  return mergeRanges([...seeds].map((s): Range => [s, s]));
}

class Model {
  readonly handOuts: HandOut[] = [];
  /** Union of completed ranges, including the prefix covered before the test started. */
  readonly completed = new Set<number>();
  /** Given back (requeue or recovery) and neither completed nor handed out again since. */
  readonly released = new Set<number>();
  /** Handed out and neither completed nor given back since. */
  readonly outstanding = new Set<number>();
  /** Every cursor value the lane has had; recovery may start from any of them (a lagging persist). */
  readonly cursorHistory: number[];
  allocNext: number;

  constructor(
    readonly baseSeed: number,
    cursor: number,
  ) {
    for (let s = baseSeed; s < cursor; s++) this.completed.add(s);
    this.cursorHistory = [cursor];
    this.allocNext = cursor;
  }

  cursor(): number {
    let c = this.baseSeed;
    while (this.completed.has(c)) c++;
    return c;
  }

  /** The chunk table a coordinator would hold, with rows that recovery must ignore. */
  chunkRows(): ChunkRow[] {
    const rows: ChunkRow[] = [{ seedFrom: this.baseSeed - 10, seedTo: this.baseSeed - 1, status: "running" }];
    if (this.cursorHistory[0] > this.baseSeed) {
      rows.push({ seedFrom: this.baseSeed, seedTo: this.cursorHistory[0] - 1, status: "complete" });
    }
    for (const h of this.handOuts) rows.push({ seedFrom: h.from, seedTo: h.to, status: h.status });
    return rows;
  }
}

function assertStructure(ls: LaneState): void {
  assert.ok(ls.baseSeed <= ls.cursor && ls.cursor <= ls.allocNext, "baseSeed <= cursor <= allocNext");
  for (const list of [ls.pending, ls.doneAhead]) {
    assert.deepEqual(mergeRanges(list), list, "lists stay merged");
    for (const [from, to] of list) assert.ok(from >= ls.cursor && to < ls.allocNext, "lists lie in [cursor, allocNext)");
  }
  const first = ls.doneAhead[0];
  assert.ok(first === undefined || first[0] > ls.cursor, "a range touching the cursor is absorbed");
}

function assertMatchesModel(ls: LaneState, model: Model): void {
  const cursor = ls.cursor;
  // (1) every seed below the cursor lies in a completed range
  for (let s = ls.baseSeed; s < cursor; s++) assert.ok(model.completed.has(s), `seed ${s} below cursor ${cursor} was never completed`);
  // the cursor is exactly the low-water mark: the first seed not completed
  assert.equal(cursor, model.cursor());
  assert.equal(ls.allocNext, model.allocNext);
  assert.deepEqual(ls.doneAhead, rangesOf([...model.completed].filter((s) => s >= cursor)));
  assert.deepEqual(ls.pending, rangesOf(model.released));
  assert.equal(ls.ahead(), [...model.completed].filter((s) => s >= cursor).length);
  assert.equal(ls.queued(), model.released.size);
  // every seed in [cursor, allocNext) is exactly one of: done ahead, pending, held by someone
  for (let s = cursor; s < ls.allocNext; s++) {
    const states = [model.completed.has(s), model.released.has(s), model.outstanding.has(s)].filter(Boolean).length;
    assert.equal(states, 1, `seed ${s} is in ${states} of done/pending/held`);
  }
  // (3) with every hand-out completed, nothing is in flight, queued or ahead
  if (model.handOuts.every((h) => h.status === "complete")) {
    assert.equal(ls.cursor, ls.allocNext);
    assert.deepEqual(ls.pending, []);
    assert.deepEqual(ls.doneAhead, []);
  }
}

function assertCompletingAgainChangesNothing(ls: LaneState, model: Model): void {
  // (2) idempotence, for every range completed so far
  const before = snapshot(ls);
  for (const h of model.handOuts) {
    if (h.status !== "complete") continue;
    ls.complete(h.from, h.to);
    assert.deepEqual(snapshot(ls), before, `completing [${h.from}, ${h.to}] again changed the state`);
  }
}

function run(baseSeed: number, startCursor: number, commands: readonly Command[]): void {
  let ls = new LaneState(baseSeed, startCursor);
  const model = new Model(baseSeed, startCursor);
  for (const cmd of commands) {
    const cursorBefore = ls.cursor;
    switch (cmd.kind) {
      case "take": {
        const released = [...model.released].sort((a, b) => a - b);
        const [from, to] = ls.take(cmd.n);
        assert.ok(from <= to && to - from + 1 <= cmd.n, `take(${cmd.n}) gave [${from}, ${to}]`);
        if (released.length > 0) {
          // gaps before new ground: the lowest queued seed, as far as its gap and n allow
          assert.equal(from, released[0]);
          let end = from;
          while (end - from + 1 < cmd.n && model.released.has(end + 1)) end++;
          assert.equal(to, end);
        } else {
          assert.deepEqual([from, to], [model.allocNext, model.allocNext + cmd.n - 1]);
        }
        // (4) a hand-out is fresh ground or given-back seeds: never completed, never held by anyone
        for (const s of seedsIn(from, to)) {
          assert.ok(!model.completed.has(s), `take handed out completed seed ${s}`);
          assert.ok(!model.outstanding.has(s), `take handed out seed ${s}, which is still held`);
          assert.ok(s >= model.allocNext || model.released.has(s), `take handed out seed ${s}, which was never given back`);
          model.released.delete(s);
          model.outstanding.add(s);
        }
        model.allocNext = Math.max(model.allocNext, to + 1);
        model.handOuts.push({ from, to, status: "leased" });
        break;
      }
      case "complete": {
        if (model.handOuts.length === 0) continue;
        const h = model.handOuts[cmd.pick % model.handOuts.length];
        const wasComplete = h.status === "complete";
        const before = snapshot(ls);
        ls.complete(h.from, h.to);
        if (wasComplete) assert.deepEqual(snapshot(ls), before, "completing a completed range changed the state");
        h.status = "complete";
        for (const s of seedsIn(h.from, h.to)) {
          model.completed.add(s);
          model.released.delete(s);
          model.outstanding.delete(s);
        }
        break;
      }
      case "requeue": {
        if (model.handOuts.length === 0) continue;
        const h = model.handOuts[cmd.pick % model.handOuts.length];
        ls.requeue(h.from, h.to);
        if (h.status !== "complete") h.status = "reissued";
        for (const s of seedsIn(h.from, h.to)) {
          if (model.completed.has(s)) continue;
          model.outstanding.delete(s);
          model.released.add(s);
        }
        break;
      }
      case "recover": {
        // a restarted coordinator: nothing is in flight, every seed not completed is given back
        const persisted = model.cursorHistory[cmd.pick % model.cursorHistory.length];
        ls = LaneState.recover(baseSeed, persisted, model.chunkRows());
        for (const s of model.outstanding) model.released.add(s);
        model.outstanding.clear();
        break;
      }
    }
    // (5) the cursor never decreases
    assert.ok(ls.cursor >= cursorBefore, `cursor went back from ${cursorBefore} to ${ls.cursor} after ${cmd.kind}`);
    model.cursorHistory.push(ls.cursor);
    assertStructure(ls);
    assertMatchesModel(ls, model);
    assertCompletingAgainChangesNothing(ls, model);
  }
  // drain: completing everything still handed out brings the cursor to allocNext
  for (const h of model.handOuts) {
    ls.complete(h.from, h.to);
    h.status = "complete";
    for (const s of seedsIn(h.from, h.to)) {
      model.completed.add(s);
      model.released.delete(s);
      model.outstanding.delete(s);
    }
  }
  while (ls.queued() > 0) {
    const [from, to] = ls.take(8);
    ls.complete(from, to);
    model.handOuts.push({ from, to, status: "complete" });
    for (const s of seedsIn(from, to)) {
      model.completed.add(s);
      model.released.delete(s);
    }
  }
  assertMatchesModel(ls, model);
  assert.equal(ls.cursor, ls.allocNext);
}

describe("LaneState against a seed-level model", () => {
  it("keeps coverage contiguous, hand-outs disjoint and completion idempotent under any interleaving", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 10, max: 15 }),
        fc.integer({ min: 0, max: 5 }),
        fc.array(commandArb, { maxLength: 60, size: "max" }),
        (baseSeed, prefix, commands) => run(baseSeed, baseSeed + prefix, commands),
      ),
      { numRuns: 300 },
    );
  });

  it("reaches cursor === allocNext when every range is completed in reverse order", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 8 }), { minLength: 1, maxLength: 20, size: "max" }), (sizes) => {
        const ls = new LaneState(0, 0);
        const taken = sizes.map((n) => ls.take(n));
        for (const r of taken.slice(1).reverse()) {
          ls.complete(...r);
          assert.equal(ls.cursor, 0);
        }
        ls.complete(...taken[0]);
        assert.deepEqual(snapshot(ls), { cursor: ls.allocNext, allocNext: ls.allocNext, pending: [], doneAhead: [] });
      }),
      { numRuns: 200 },
    );
  });
});

describe("LaneState: what complete reports, and putting a refused transaction back", () => {
  it("complete returns the seeds not swept before: a late finisher overlapping the re-sweep adds only what is new", () => {
    const ls = new LaneState(0, 0);
    ls.take(10); // [0, 9], reissued (its lease expired) while its holder still runs it
    ls.requeue(0, 9);
    const [a, b] = ls.take(6); // [0, 5] handed out again
    assert.deepEqual([a, b], [0, 5]);
    assert.equal(ls.complete(0, 5), 6);
    assert.equal(ls.complete(0, 9), 4, "the late finisher adds 6..9 only");
    assert.equal(ls.complete(0, 9), 0, "a repeat adds nothing");
    assert.equal(ls.cursor, 10);
  });

  it("restore puts back exactly the state of the snapshot, cursor included", () => {
    const ls = new LaneState(5, 5);
    ls.take(10);
    ls.take(10);
    ls.complete(15, 24);
    const before = ls.snapshot();
    const copy = snapshot(ls);
    ls.complete(5, 14);
    ls.take(3);
    ls.requeue(25, 27);
    assert.equal(ls.cursor, 25);
    ls.restore(before);
    assert.deepEqual(snapshot(ls), copy);
    assert.equal(ls.cursor, 5);
  });

  it("a snapshot is not changed by later transitions (restore twice gives the same state)", () => {
    const ls = new LaneState(0, 0);
    ls.take(4);
    const s = ls.snapshot();
    ls.complete(0, 3);
    ls.restore(s);
    ls.complete(0, 3);
    ls.restore(s);
    assert.deepEqual(snapshot(ls), { cursor: 0, allocNext: 4, pending: [], doneAhead: [] });
  });
});

describe("LaneState: the seed limit (seeds stay exact integers)", () => {
  it("clamps fresh ground to LAST_SEED, then has no work; the cursor lands exactly on SEED_LIMIT", () => {
    const base = 2 ** 53 - 10;
    const ls = new LaneState(base, base);
    assert.deepEqual(ls.take(4), [base, base + 3]);
    const rest = ls.take(1_000_000);
    assert.deepEqual(rest, [base + 4, LAST_SEED], "the chunk's end is clamped to the last exact seed");
    assert.equal(ls.allocNext, SEED_LIMIT);
    assert.equal(ls.hasWork(), false);
    assert.throws(() => ls.take(10), /nothing left below the seed limit/);
    ls.complete(base, base + 3);
    ls.complete(rest[0], rest[1]);
    assert.equal(ls.cursor, SEED_LIMIT);
    assert.ok(Number.isSafeInteger(ls.cursor));
    assert.equal(ls.exhausted(), true);
  });

  it("a requeued range near the limit is work again, and the lane is exhausted only once it is covered", () => {
    const ls = new LaneState(LAST_SEED - 9, LAST_SEED - 9);
    const all = ls.take(Number.MAX_SAFE_INTEGER);
    assert.deepEqual(all, [LAST_SEED - 9, LAST_SEED]);
    ls.requeue(all[0], all[1]);
    assert.equal(ls.hasWork(), true);
    assert.equal(ls.exhausted(), false);
    assert.deepEqual(ls.take(3), [LAST_SEED - 9, LAST_SEED - 7]);
  });

  it("recovers an exhausted lane (cursor at SEED_LIMIT) and refuses a chunk row past the limit", () => {
    const ls = LaneState.recover(LAST_SEED - 9, SEED_LIMIT, [{ seedFrom: LAST_SEED - 9, seedTo: LAST_SEED, status: "complete" }]);
    assert.equal(ls.exhausted(), true);
    assert.equal(ls.hasWork(), false);
    assert.throws(() => LaneState.recover(1, 1, [{ seedFrom: LAST_SEED, seedTo: SEED_LIMIT + 1, status: "aborted:lost" }]), /invalid seed range/);
  });
});
