import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { mergeRanges, rangeSize, subtractRanges, totalSize, type Range } from "../../src/core/ranges.ts";

function seedsOf(ranges: readonly Range[]): number[] {
  const seeds: number[] = [];
  for (const [from, to] of ranges) for (let s = from; s <= to; s++) seeds.push(s);
  return seeds;
}

const smallRange = fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: -2, max: 40 })) as fc.Arbitrary<Range>;

describe("rangeSize and totalSize", () => {
  it("counts both ends of an inclusive range", () => {
    assert.equal(rangeSize([5, 5]), 1);
    assert.equal(rangeSize([100, 199]), 100);
  });

  it("gives 0 for an empty range", () => {
    assert.equal(rangeSize([6, 5]), 0);
    assert.equal(rangeSize([10, -3]), 0);
  });

  it("sums sizes and ignores empties", () => {
    assert.equal(totalSize([]), 0);
    assert.equal(totalSize([[1, 5], [9, 8], [20, 22]]), 8);
  });
});

describe("mergeRanges", () => {
  it("merges adjacent ranges and keeps separate ones apart", () => {
    assert.deepEqual(mergeRanges([[1, 5], [6, 9], [20, 22]]), [[1, 9], [20, 22]]);
  });

  it("does not merge ranges separated by one missing seed", () => {
    assert.deepEqual(mergeRanges([[1, 5], [7, 9]]), [[1, 5], [7, 9]]);
  });

  it("merges overlapping and contained ranges", () => {
    assert.deepEqual(mergeRanges([[1, 10], [3, 4], [8, 12]]), [[1, 12]]);
  });

  it("sorts unsorted input", () => {
    assert.deepEqual(mergeRanges([[20, 22], [6, 9], [1, 5], [30, 30]]), [[1, 9], [20, 22], [30, 30]]);
  });

  it("drops empty ranges", () => {
    assert.deepEqual(mergeRanges([[1, 3], [9, 4], [5, 6]]), [[1, 3], [5, 6]]);
    assert.deepEqual(mergeRanges([[4, 3]]), []);
    assert.deepEqual(mergeRanges([]), []);
  });

  it("does not mutate its input", () => {
    const input: Range[] = [[6, 9], [1, 5]];
    mergeRanges(input);
    assert.deepEqual(input, [[6, 9], [1, 5]]);
  });

  it("covers exactly the seeds of its input with sorted, non-touching ranges", () => {
    fc.assert(
      fc.property(fc.array(smallRange, { maxLength: 8 }), (ranges) => {
        const merged = mergeRanges(ranges);
        assert.deepEqual(seedsOf(merged), [...new Set(seedsOf(ranges))].sort((a, b) => a - b));
        for (let i = 0; i < merged.length; i++) {
          assert.ok(merged[i][0] <= merged[i][1]);
          if (i > 0) assert.ok(merged[i][0] > merged[i - 1][1] + 1, "merged ranges must not touch");
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe("subtractRanges", () => {
  it("leaves the gaps between covered ranges", () => {
    assert.deepEqual(subtractRanges([1, 10], [[3, 4], [8, 20]]), [[1, 2], [5, 7]]);
  });

  it("returns the whole span when nothing is covered", () => {
    assert.deepEqual(subtractRanges([1, 10], []), [[1, 10]]);
  });

  it("returns nothing for an empty span", () => {
    assert.deepEqual(subtractRanges([10, 9], []), []);
    assert.deepEqual(subtractRanges([10, 1], [[3, 4]]), []);
  });

  it("returns nothing when the span is fully covered, including by adjacent pieces", () => {
    assert.deepEqual(subtractRanges([1, 10], [[0, 4], [5, 11]]), []);
  });

  it("accepts unsorted, overlapping covered ranges and ignores those outside the span", () => {
    assert.deepEqual(subtractRanges([10, 30], [[25, 26], [0, 5], [12, 14], [13, 15], [40, 50]]), [
      [10, 11],
      [16, 24],
      [27, 30],
    ]);
  });

  it("keeps single-seed gaps at both ends", () => {
    assert.deepEqual(subtractRanges([1, 10], [[2, 9]]), [[1, 1], [10, 10]]);
  });

  it("splits the span into the uncovered part and the covered part with no overlap", () => {
    fc.assert(
      fc.property(smallRange, fc.array(smallRange, { maxLength: 6 }), (span, covered) => {
        const gaps = subtractRanges(span, covered);
        const coveredSeeds = new Set(seedsOf(covered));
        const spanSeeds = seedsOf([span]);
        const gapSeeds = seedsOf(gaps);
        const coveredInSpan = spanSeeds.filter((s) => coveredSeeds.has(s));
        // no overlap: a gap seed is never covered, and no gap seed repeats
        assert.ok(gapSeeds.every((s) => !coveredSeeds.has(s)));
        assert.equal(new Set(gapSeeds).size, gapSeeds.length);
        // union is the span
        assert.deepEqual([...gapSeeds, ...coveredInSpan].sort((a, b) => a - b), spanSeeds);
        // the result is itself merged
        assert.deepEqual(mergeRanges(gaps), gaps);
      }),
      { numRuns: 300 },
    );
  });
});
