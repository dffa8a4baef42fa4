// The checks a result must pass before its stage is opened: each field that disagrees with the
// task or the budgets is named; a result that agrees on everything passes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ResultFrame } from "../../src/net/messages.ts";
import { resultProblem } from "../../src/explore/master/result-checks.ts";

const HASH = "a".repeat(64);
const CHILD = "b".repeat(64);
const TASK = { hash: HASH, fence: "m:0:1:00" };
const BUDGETS = { maxChildren: 2, maxResultBytes: 100, maxInputBytes: 100 };

function result(over: Partial<ResultFrame> = {}): ResultFrame {
  return {
    type: "result",
    task_id: 1,
    fence: TASK.fence,
    input_hash: HASH,
    new_hashes: [CHILD],
    num_generated: 1,
    staged_bytes: 10,
    staging_id: "c".repeat(32),
    retcode: 0,
    elapsed: 0.1,
    protocol_error: "",
    budget: null,
    detail: null,
    ...over,
  };
}

describe("resultProblem", () => {
  it("passes a result that agrees with its task and the budgets, with children or without", () => {
    assert.equal(resultProblem(TASK, result(), BUDGETS), null);
    assert.equal(resultProblem(TASK, result({ new_hashes: [], num_generated: 0, staged_bytes: 0, staging_id: "" }), BUDGETS), null);
    assert.equal(resultProblem(TASK, result({ new_hashes: [CHILD, CHILD], num_generated: 2 }), BUDGETS), null, "duplicates count, and are allowed");
  });

  it("names the first field that disagrees", () => {
    const cases: [Partial<ResultFrame>, string][] = [
      [{ fence: "m:0:1:01" }, "the fence does not match the task's"],
      [{ protocol_error: "execution-error", detail: "no such file\u001b[2J" }, "the worker reported execution-error: no such file\\x1b[2J"],
      [{ protocol_error: "input-copy-error" }, "the worker reported input-copy-error"],
      [{ input_hash: null }, `input hash (none) is not the assigned ${HASH}`],
      [{ input_hash: CHILD }, `input hash ${CHILD} is not the assigned ${HASH}`],
      [{ new_hashes: [CHILD, CHILD, CHILD], num_generated: 3 }, "3 children exceed the budget of 2"],
      [{ num_generated: 2 }, "num_generated 2 differs from the 1 hashes reported"],
      [{ new_hashes: [], num_generated: 0 }, "a stage without children"],
      [{ new_hashes: [], num_generated: 0, staging_id: "", staged_bytes: 5 }, "a stage without children"],
      [{ staging_id: "" }, "children without a stage id"],
      [{ staging_id: "C".repeat(32) }, "children without a stage id"],
      [{ staged_bytes: 101 }, "101 staged bytes exceed the budget of 100"],
      [{ new_hashes: ["B".repeat(64)] }, "a child hash is not 64 lowercase hex"],
    ];
    for (const [over, why] of cases) assert.equal(resultProblem(TASK, result(over), BUDGETS), why, JSON.stringify(over));
  });
});
