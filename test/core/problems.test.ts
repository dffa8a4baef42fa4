// Problems: one typed value, rendered once — a count, at most twenty, then how many more.
import assert from "node:assert/strict";
import { test } from "node:test";
import { problem, renderProblems } from "../../src/core/problems.ts";

test("a campaign's problems render as a count and one indented line each", () => {
  const lines = renderProblems([problem("masters", "master rank 1 was lost: connection closed"), problem("shutdown", "worker w1 did not acknowledge the stop within 2s")]);
  assert.deepEqual(lines, [
    "campaign incomplete (2 problem(s)):",
    "  master rank 1 was lost: connection closed",
    "  worker w1 did not acknowledge the stop within 2s",
  ]);
});

test("past twenty problems the rest are counted, not printed", () => {
  const many = Array.from({ length: 23 }, (_, i) => problem("invalid-result", `invalid result ${i}`));
  const lines = renderProblems(many);
  assert.equal(lines.length, 1 + 20 + 1);
  assert.equal(lines[0], "campaign incomplete (23 problem(s)):");
  assert.equal(lines[20], "  invalid result 19");
  assert.equal(lines[21], "  … 3 more");
});
