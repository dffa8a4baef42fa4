// The when-to-stop estimate (Good-Turing and Chao2 over incidences), checked by hand on small
// counts and against a simulated generator whose population of failures is known: 50 planted
// failures with Zipf-distributed chances per seed, 100 seeded campaigns.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { estimateDiscovery, estimateFromCounts } from "../../src/core/discovery-estimate.ts";

/** A small seeded generator (mulberry32), so every run of the test sees the same campaigns. */
function seeded(seed: number): () => number {
  let a = seed | 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FAILURES = 50;
/** Failure i is found by a seed with chance 0.01 / i: the commonest once in 100 seeds, the rarest once in 5,000. */
const CHANCE = Array.from({ length: FAILURES }, (_, i) => 0.01 / (i + 1));
const CHECKPOINTS = [1_000, 2_000, 5_000, 10_000, 20_000];

/** The seeds (1-based) at which each failure is found, up to `seeds`, skipping geometrically between finds. */
function campaign(rand: () => number, seeds: number): number[][] {
  return CHANCE.map((p) => {
    const at: number[] = [];
    for (let seed = 0; ; ) {
      seed += Math.floor(Math.log(1 - rand()) / Math.log(1 - p)) + 1;
      if (seed > seeds) return at;
      at.push(seed);
    }
  });
}

function incidencesAt(finds: number[][], seeds: number): number[] {
  return finds.map((at) => at.filter((s) => s <= seeds).length).filter((n) => n > 0);
}

describe("estimateDiscovery", () => {
  it("computes Good-Turing and Chao2 from singletons and doubletons", () => {
    const e = estimateDiscovery(10, [1, 1, 2, 5]);
    assert.equal(e.observed, 4);
    assert.equal(e.singletons, 2);
    assert.equal(e.doubletons, 1);
    assert.equal(e.nextNewProbability, 0.2);
    assert.equal(e.unitsToNextNew, 5);
    assert.ok(Math.abs(e.estimatedTotal - (4 + (0.9 * 4) / 2)) < 1e-12, String(e.estimatedTotal));
    assert.ok(e.interval[0] >= 4 && e.interval[0] <= e.estimatedTotal && e.interval[1] >= e.estimatedTotal, JSON.stringify(e.interval));
  });

  it("uses the bias-corrected form without doubletons, and says nothing is expected without singletons", () => {
    const noDoubles = estimateDiscovery(100, [1, 1, 1, 7]);
    assert.ok(Math.abs(noDoubles.estimatedTotal - (4 + (0.99 * 3 * 2) / 2)) < 1e-12);
    const saturated = estimateDiscovery(1_000, [40, 12, 3]);
    assert.equal(saturated.nextNewProbability, 0);
    assert.equal(saturated.unitsToNextNew, null);
    assert.equal(saturated.estimatedTotal, 3);
    assert.deepEqual(saturated.interval, [3, 3]);
  });

  it("before any unit there is no probability to give; counts that cannot be are refused", () => {
    const none = estimateDiscovery(0, []);
    assert.equal(none.nextNewProbability, null);
    assert.equal(none.estimatedTotal, 0);
    assert.throws(() => estimateDiscovery(5, [6]), /an incidence lies in 1\.\.units/);
    assert.throws(() => estimateFromCounts(5, 1, 1, 1), /singletons and doubletons are among the observed/);
  });

  it("the interval holds the true number of failures in at least 90 of 100 simulated campaigns, from the point where more than half were seen", () => {
    const held = new Map(CHECKPOINTS.map((t) => [t, 0]));
    const seen = new Map(CHECKPOINTS.map((t) => [t, 0]));
    for (let run = 0; run < 100; run++) {
      const finds = campaign(seeded(1_000 + run), CHECKPOINTS.at(-1)!);
      for (const t of CHECKPOINTS) {
        const e = estimateDiscovery(t, incidencesAt(finds, t));
        seen.set(t, seen.get(t)! + e.observed / 100);
        if (e.interval[0] <= FAILURES && FAILURES <= e.interval[1]) held.set(t, held.get(t)! + 1);
      }
    }
    for (const t of CHECKPOINTS.filter((t) => seen.get(t)! > FAILURES / 2)) {
      assert.ok(held.get(t)! >= 90, `after ${t} seeds (${seen.get(t)!.toFixed(1)} of ${FAILURES} seen on average) the interval held the truth in ${held.get(t)} of 100 campaigns`);
    }
    assert.ok(seen.get(2_000)! > FAILURES / 2 && seen.get(1_000)! < FAILURES / 2, "the checkpoints span the half-seen point");
  });

  it("the chance of a new failure falls as a campaign saturates", () => {
    for (let run = 0; run < 20; run++) {
      const finds = campaign(seeded(5_000 + run), CHECKPOINTS.at(-1)!);
      const chances = CHECKPOINTS.map((t) => estimateDiscovery(t, incidencesAt(finds, t)).nextNewProbability!);
      assert.ok(chances[0]! > chances.at(-1)!, `campaign ${run}: ${chances.join(" > ")}`);
      assert.ok(chances[0]! > 0.005, `early on a new failure is likely (${chances[0]})`);
      assert.ok(chances.at(-1)! < 0.0005, `late it is rare (${chances.at(-1)})`);
    }
  });
});
