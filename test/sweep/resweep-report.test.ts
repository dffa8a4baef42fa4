// What resweep prints: the summary first (overall, then per bucket), the detail only with -v, in
// bucket then id order — a failure that now fails differently stays under its own bucket.
import assert from "node:assert/strict";
import { test } from "node:test";
import { resweepReport } from "../../src/sweep/session/resweep.ts";
import type { FailureListRow } from "../../src/store/failures.ts";

const failure = (id: number, bucket: string) => ({ id, bucket }) as FailureListRow;

const outcomes = [
  { failure: failure(7, "wrong-result"), fixed: true, seeds: [70, 71], now: null },
  { failure: failure(2, "crash"), fixed: false, seeds: [20, 21, 22, 23, 24, 25, 26], now: ["hang-detected"] },
  { failure: failure(1, "crash"), fixed: true, seeds: [10], now: null },
  { failure: failure(3, "crash"), fixed: false, seeds: [30], now: null },
];

test("the summary comes first, with one line per bucket, and says where the detail is", () => {
  assert.deepEqual(resweepReport(outcomes, 5, false), [
    "2 fixed, 2 still open, 1 not checked",
    "  crash              1 fixed, 2 still open (1 now failing differently)",
    "  wrong-result       1 fixed, 0 still open",
    "  (one line per failure: resweep -v)",
  ]);
});

test("with -v one line per failure follows, ordered by bucket then id; a changed failure keeps its bucket and names the new one", () => {
  assert.deepEqual(resweepReport(outcomes, 4, true).slice(3), [
    "  FIXED          #1 crash (1 seed now clean)",
    "  still failing  #2 crash seeds 20, 21, 22, 23, 24, 25 …  (now: hang-detected)",
    "  still failing  #3 crash seeds 30",
    "  FIXED          #7 wrong-result (2 seeds now clean)",
  ]);
});
