import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  chunkKillTime,
  chunkTarget,
  deadlineFloor,
  halveRate,
  hardTimeout,
  pickLane,
  sizeChunk,
  updateRate,
  type LaneWeight,
} from "../../src/core/schedule.ts";

/** Runs `picks` rounds of pickLane, counting each pick as a chunk run, and returns the tallies. */
function simulate(lanes: readonly LaneWeight[], picks: number, excluded: ReadonlySet<string> = new Set()): Map<string, number> {
  const chunksRun = new Map<string, number>();
  for (let i = 0; i < picks; i++) {
    const name = pickLane(lanes, chunksRun, excluded);
    assert.ok(name !== undefined);
    chunksRun.set(name, (chunksRun.get(name) ?? 0) + 1);
  }
  return chunksRun;
}

describe("pickLane", () => {
  it("splits chunks 3:2:1 for weights 3/2/1", () => {
    const lanes = [
      { name: "a", weight: 3 },
      { name: "b", weight: 2 },
      { name: "c", weight: 1 },
    ];
    assert.deepEqual(simulate(lanes, 60), new Map([["a", 30], ["b", 20], ["c", 10]]));
  });

  it("gives a tie to the lane listed first", () => {
    const lanes = [
      { name: "z", weight: 1 },
      { name: "y", weight: 1 },
    ];
    assert.equal(pickLane(lanes, new Map(), new Set()), "z");
    assert.equal(pickLane(lanes, new Map([["z", 2], ["y", 2]]), new Set()), "z");
    assert.equal(pickLane(lanes, new Map([["z", 2], ["y", 1]]), new Set()), "y");
  });

  it("treats scores within 1e-9 as a tie", () => {
    const lanes = [
      { name: "first", weight: 3 },
      { name: "second", weight: 1 },
    ];
    // (0.1 * 3) / 3 is 0.10000000000000002 in floating point: above 0.1, but within the tie tolerance
    assert.equal(pickLane(lanes, new Map([["first", 0.1 * 3], ["second", 0.1]]), new Set()), "first");
    const reversed = [lanes[1], lanes[0]];
    assert.equal(pickLane(reversed, new Map([["first", 0.1 * 3], ["second", 0.1]]), new Set()), "second");
  });

  it("skips excluded lanes", () => {
    const lanes = [
      { name: "a", weight: 1 },
      { name: "b", weight: 1 },
      { name: "c", weight: 1 },
    ];
    assert.deepEqual(simulate(lanes, 10, new Set(["a"])), new Map([["b", 5], ["c", 5]]));
  });

  it("returns undefined when every lane is excluded or there are none", () => {
    assert.equal(pickLane([{ name: "a", weight: 1 }], new Map(), new Set(["a"])), undefined);
    assert.equal(pickLane([], new Map(), new Set()), undefined);
  });

  it("gives a weight-0 lane its first chunk, then starves it", () => {
    const lanes = [
      { name: "busy", weight: 1 },
      { name: "idle", weight: 0 },
    ];
    assert.equal(pickLane(lanes, new Map([["busy", 5]]), new Set()), "idle");
    assert.deepEqual(simulate(lanes, 50), new Map([["busy", 49], ["idle", 1]]));
  });
});

describe("sizeChunk", () => {
  it("uses the bootstrap size, unclamped, without a measured rate", () => {
    assert.equal(sizeChunk(null, null, 600, 500), 500);
    assert.equal(sizeChunk(0, 100, 600, 500), 500);
    assert.equal(sizeChunk(null, null, 600, 4), 4);
  });

  it("fills the target time at the measured rate, rounding down", () => {
    assert.equal(sizeChunk(2.5, null, 601, 1000), 1502);
    assert.equal(sizeChunk(2.5, 1000, 601, 40), 1502);
  });

  it("caps growth at three times the previous chunk", () => {
    assert.equal(sizeChunk(100, 50, 600, 500), 150);
    assert.equal(sizeChunk(100, 50_000, 600, 500), 60_000);
  });

  it("ignores a previous count of 0 as no previous chunk", () => {
    assert.equal(sizeChunk(100, 0, 600, 500), 1500);
  });

  it("caps a chunk sized by a rate but with no previous chunk at three times the bootstrap size", () => {
    // A rate carried over from an earlier session or measured on another worker: 2.5e13 seeds/s
    // would otherwise ask for 1.5e16 seeds in one chunk.
    assert.equal(sizeChunk(2.5e13, null, 600, 40), 120);
    assert.equal(sizeChunk(100, null, 600, 500), 1500);
  });

  it("never asks for more seeds than the largest exact integer", () => {
    assert.equal(sizeChunk(1e300, 1e300, 600, 40), Number.MAX_SAFE_INTEGER);
    assert.ok(Number.isSafeInteger(sizeChunk(Number.MAX_VALUE, Number.MAX_SAFE_INTEGER, 600, 40)));
  });

  it("never sizes a measured chunk below 10", () => {
    assert.equal(sizeChunk(0.001, null, 600, 500), 10);
    assert.equal(sizeChunk(100, 2, 600, 500), 10);
  });
});

describe("updateRate", () => {
  it("takes the first measurement as is", () => {
    assert.equal(updateRate(null, 600, 300), 2);
  });

  it("weights the new measurement 0.6 and the old rate 0.4", () => {
    assert.equal(updateRate(10, 400, 100), 0.6 * 4 + 0.4 * 10);
  });

  it("treats a zero duration as one millisecond", () => {
    assert.equal(updateRate(null, 5, 0), 5000);
  });

  it("grows at most threefold per chunk: a generator that exits at once cannot make one jump to 10^13 seeds/s", () => {
    // 1,000 seeds/s known; a chunk of 3,000 seeds that 'took' 0 s measures 3,000,000 seeds/s.
    assert.equal(updateRate(1000, 3000, 0), 3000);
    assert.equal(updateRate(25, 1e15, 0.001), 75);
  });

  it("falls without a cap, and takes the measurement as is after an estimate of 0", () => {
    assert.equal(updateRate(1000, 10, 1), 0.6 * 10 + 0.4 * 1000);
    assert.equal(updateRate(0, 600, 300), 2);
  });

  it("a run of instant chunks grows chunk and estimate by at most 3x each step, and both stay exact", () => {
    let rate: number | null = null;
    let prev: number | null = null;
    for (let i = 0; i < 60; i++) {
      const n = sizeChunk(rate, prev, 600, 40);
      assert.ok(Number.isSafeInteger(n), `chunk ${i}: ${n} seeds`);
      if (prev !== null) assert.ok(n <= 3 * prev, `chunk ${i}: ${n} seeds after ${prev}`);
      const next = updateRate(rate, n, 0);
      if (rate !== null) assert.ok(next <= 3 * rate, `chunk ${i}: estimate ${next} after ${rate}`);
      rate = next;
      prev = n;
    }
  });
});

describe("halveRate", () => {
  it("halves the current rate", () => {
    assert.equal(halveRate(8, 1000, 10), 4);
  });

  it("falls back to what the timed-out chunk achieved, with at least one second", () => {
    assert.equal(halveRate(null, 600, 300), 1);
    assert.equal(halveRate(null, 10, 0), 5);
  });

  it("treats a rate of 0 as unknown", () => {
    assert.equal(halveRate(0, 600, 300), 1);
  });
});

describe("time limits", () => {
  it("deadlineFloor is the shortest chunk worth starting (5 s), or the chunk length when shorter", () => {
    assert.equal(deadlineFloor(600), 5);
    assert.equal(deadlineFloor(61), 5);
    assert.equal(deadlineFloor(3), 3);
  });

  it("hardTimeout is three targets, at least the floor", () => {
    assert.equal(hardTimeout(600), 1800);
    assert.equal(hardTimeout(30), 180);
    assert.equal(hardTimeout(30, 20), 90);
    assert.equal(hardTimeout(5, 20), 20);
  });

  it("chunkKillTime keeps the chunk's own hard timeout unless it lies past the session's end plus the drain grace", () => {
    assert.deepEqual(chunkKillTime(1800, 3600, 60), { seconds: 1800, cutBySessionEnd: false });
    assert.deepEqual(chunkKillTime(180, 8.7, 3), { seconds: 11, cutBySessionEnd: true });
    assert.deepEqual(chunkKillTime(180, 177, 3), { seconds: 180, cutBySessionEnd: false });
    assert.deepEqual(chunkKillTime(180, 0.2, 0), { seconds: 1, cutBySessionEnd: true });
  });

  it("chunkTarget cuts the chunk to the time left, rounding down, never below a second", () => {
    assert.equal(chunkTarget(600, 5000), 600);
    assert.equal(chunkTarget(600, 250.9), 250);
    assert.equal(chunkTarget(600, 12), 12);
    assert.equal(chunkTarget(600, 0.4), 1);
  });
});

describe("a session's budget: chunks sized to the time left fill it", () => {
  /**
   * A session at a steady `rate` with `overhead` seconds per chunk, scheduled exactly as the
   * engine does (deadline floor, chunk target, sizeChunk with its 3x cap): the seconds spent
   * sweeping and the time left unused.
   */
  function session(budget: number, rate: number, overhead: number, chunkSeconds = 600, bootstrap = 40) {
    let t = 0;
    let prev: number | null = null;
    let known: number | null = null;
    let sweeping = 0;
    let chunks = 0;
    for (;;) {
      const remaining = budget - t;
      if (remaining < deadlineFloor(chunkSeconds)) break;
      const n = sizeChunk(known, prev, chunkTarget(chunkSeconds, remaining), bootstrap);
      const seconds = n / rate + overhead;
      t += seconds;
      sweeping += n / rate;
      known = updateRate(known, n, seconds);
      prev = n;
      chunks++;
    }
    return { sweeping, unused: Math.max(0, budget - t), overran: Math.max(0, t - budget), chunks };
  }

  for (const budget of [10, 30, 60, 120, 600, 7200]) {
    it(`a ${budget} s budget with the default 10-minute chunks does real work and ends close to its deadline`, () => {
      const r = session(budget, 200, 0.2);
      assert.ok(r.chunks >= 1 && r.sweeping > 0, `it swept (${JSON.stringify(r)})`);
      assert.ok(r.unused <= deadlineFloor(600) + 0.001, `at most the deadline floor is left unused (${JSON.stringify(r)})`);
      assert.ok(r.overran <= 0.05 * budget + 1, `the last chunk ends near the deadline (${JSON.stringify(r)})`);
    });
  }

  it("a budget no longer than the deadline floor runs no chunk (run and coordinate refuse it)", () => {
    assert.equal(session(4.9, 200, 0.2).chunks, 0);
    assert.ok(session(6, 200, 0.2).chunks >= 1);
  });
});
