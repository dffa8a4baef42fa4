// The exit code of an explore campaign's end, by the documented precedence (docs/exit-codes.md):
// 71 rendezvous timeout, 70 problems, 1 new findings with --fail-on-findings, 5 wall budget,
// 6 interrupted, 0 frontier exhausted.
import assert from "node:assert/strict";
import { test } from "node:test";
import { exitCodeOf, type Outcome } from "../../src/explore/command/outcome.ts";
import { EXIT } from "../../src/exit-codes.ts";

const base: Outcome = { end: "idle", problems: 0, newFindings: 0, failOnFindings: false };

test("each end has its own code, and the codes are distinct", () => {
  const codes = {
    exhausted: exitCodeOf(base),
    agreed: exitCodeOf({ ...base, end: "quiescence" }),
    budget: exitCodeOf({ ...base, end: "wall budget" }),
    interrupted: exitCodeOf({ ...base, end: "interrupted" }),
    findings: exitCodeOf({ ...base, newFindings: 2, failOnFindings: true }),
  };
  assert.deepEqual(codes, { exhausted: 0, agreed: 0, budget: 5, interrupted: 6, findings: 1 });
  assert.deepEqual([EXIT.budgetReached, EXIT.interrupted], [5, 6]);
  assert.equal(new Set(Object.values(EXIT)).size, Object.keys(EXIT).length, "no two names share a code");
});

test("precedence: rendezvous timeout, then problems, then new findings, then how the campaign ended", () => {
  assert.equal(exitCodeOf({ ...base, end: "wall budget", problems: 1, newFindings: 1, failOnFindings: true, rendezvousTimedOut: true }), 71);
  assert.equal(exitCodeOf({ ...base, end: "wall budget", problems: 1, newFindings: 1, failOnFindings: true }), 70);
  assert.equal(exitCodeOf({ ...base, end: "wall budget", newFindings: 1, failOnFindings: true }), 1, "new findings even when the budget ran out");
  assert.equal(exitCodeOf({ ...base, end: "interrupted", newFindings: 1, failOnFindings: true }), 1, "new findings even when interrupted");
  assert.equal(exitCodeOf({ ...base, end: "wall budget", newFindings: 1 }), 5, "without --fail-on-findings findings do not change the code");
  assert.equal(exitCodeOf({ ...base, newFindings: 3 }), 0);
  // Ends that always come with a problem are never 0, even if the problem list were lost.
  for (const end of ["no usable executor", "conflict", "master lost"] as const) assert.equal(exitCodeOf({ ...base, end }), 70, end);
});
