// The checks a result must pass before its stage is opened: each field that disagrees with the
// task or the budgets is named; a result that agrees on everything passes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { TaskResult } from "../../src/explore/task.ts";
import { resultProblem } from "../../src/explore/master/result-checks.ts";

const HASH = "a".repeat(64);
const CHILD = "b".repeat(64);
const TASK = { hash: HASH, fence: "m:0:1:00" };
const BUDGETS = { maxChildren: 2, maxResultBytes: 100, maxInputBytes: 100 };

function result(over: Partial<TaskResult> = {}): TaskResult {
  return {
    taskId: 1,
    fence: TASK.fence,
    inputHash: HASH,
    children: [CHILD],
    generated: 1,
    stagedBytes: 10,
    stagingId: "c".repeat(32),
    retcode: 0,
    seconds: 0.1,
    failure: null,
    budget: null,
    detail: null,
    finding: null,
    ...over,
  };
}

describe("resultProblem", () => {
  it("passes a result that agrees with its task and the budgets, with children or without", () => {
    assert.equal(resultProblem(TASK, result(), BUDGETS), null);
    assert.equal(resultProblem(TASK, result({ children: [], generated: 0, stagedBytes: 0, stagingId: "" }), BUDGETS), null);
    assert.equal(resultProblem(TASK, result({ children: [CHILD, CHILD], generated: 2 }), BUDGETS), null, "duplicates count, and are allowed");
  });

  it("names the first field that disagrees", () => {
    const cases: [Partial<TaskResult>, string][] = [
      [{ fence: "m:0:1:01" }, "the fence does not match the task's"],
      [{ failure: "execution-error", detail: "no such file\u001b[2J" }, "the worker reported execution-error: no such file\\x1b[2J"],
      [{ failure: "input-copy-error" }, "the worker reported input-copy-error"],
      [{ inputHash: null }, `input hash (none) is not the assigned ${HASH}`],
      [{ inputHash: CHILD }, `input hash ${CHILD} is not the assigned ${HASH}`],
      [{ children: [CHILD, CHILD, CHILD], generated: 3 }, "3 children exceed the budget of 2"],
      [{ generated: 2 }, "num_generated 2 differs from the 1 hashes reported"],
      [{ children: [], generated: 0 }, "a stage without children"],
      [{ children: [], generated: 0, stagingId: "", stagedBytes: 5 }, "a stage without children"],
      [{ stagingId: "" }, "children without a stage id"],
      [{ stagingId: "C".repeat(32) }, "children without a stage id"],
      [{ stagedBytes: 101 }, "101 staged bytes exceed the budget of 100"],
      [{ children: ["B".repeat(64)] }, "a child hash is not 64 lowercase hex"],
    ];
    for (const [over, why] of cases) assert.equal(resultProblem(TASK, result(over), BUDGETS), why, JSON.stringify(over));
  });
});
