// The explore codec at the wire's edge: a task, a result and a worker's setup become frames that
// the wire's own schemas accept, and come back unchanged; and no room of explore/ but the fleet
// edge sees a frame at all.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { resultFrame, resultOf, setupFrame, setupOf, taskFrame, taskOf, type WorkerSetup } from "../../src/explore/fleet/task-frames.ts";
import type { Task, TaskResult } from "../../src/explore/task.ts";
import { check, CoordinatorReply, ExploreSetup, WorkerFrame, type ResultFrame } from "../../src/net/messages.ts";

const HASH = "a".repeat(64);
const CHILD = "b".repeat(64);
const TASK: Task = { id: 7, hash: HASH, fence: "0123456789abcdef:0:7:00", timeoutSeconds: 2.5 };

const ran = (over: Partial<TaskResult> = {}): TaskResult => ({
  taskId: 7,
  fence: TASK.fence,
  inputHash: HASH,
  children: [CHILD, CHILD],
  generated: 2,
  stagedBytes: 20,
  stagingId: "c".repeat(32),
  retcode: 0,
  seconds: 0.25,
  failure: null,
  budget: null,
  detail: null,
  finding: null,
  ...over,
});

describe("task-frames", () => {
  it("a task goes out as a task item the wire accepts, and comes back the same task", () => {
    const item = taskFrame(TASK);
    assert.deepEqual(item, { task_id: 7, hash: HASH, fence: TASK.fence, timeout: 2.5 });
    const checked = check(CoordinatorReply, { type: "task", tasks: [item] });
    assert.ok(checked.ok, checked.ok ? "" : checked.reason);
    assert.equal(checked.frame.type, "task");
    assert.deepEqual(taskOf(checked.frame.type === "task" ? checked.frame.tasks[0]! : item), TASK);
  });

  it("a result goes out as a result frame the wire accepts, and comes back the same result", () => {
    const results = [
      ran(),
      ran({ children: [], generated: 0, stagedBytes: 0, stagingId: "", retcode: -1, finding: { kind: "hang", signal: null, exit_code: null, stderr_tail: "spinning\n" } }),
      ran({ children: [], generated: 0, stagedBytes: 0, stagingId: "", retcode: -1, finding: { kind: "crash", signal: 11, exit_code: null, stderr_tail: "" } }),
      ran({ children: [], generated: 0, stagedBytes: 0, stagingId: "", retcode: null, failure: "result-budget-exceeded", budget: { resource: "children", observed: 9, limit: 4 }, detail: "9 children" }),
      ran({ inputHash: null, children: [], generated: 0, stagedBytes: 0, stagingId: "", retcode: null, failure: "input-copy-error", detail: "gone" }),
    ];
    for (const r of results) {
      const frame = resultFrame(r);
      const checked = check(WorkerFrame, JSON.parse(JSON.stringify(frame)));
      assert.ok(checked.ok, checked.ok ? "" : checked.reason);
      assert.deepEqual(resultOf(checked.frame as ResultFrame), r);
    }
  });

  it("a run without a failure is the wire's empty protocol_error, and the wire's fields are named as the protocol names them", () => {
    assert.deepEqual(resultFrame(ran({ finding: { kind: "crash", signal: null, exit_code: 1, stderr_tail: "SUMMARY: AddressSanitizer: x\n" } })), {
      type: "result",
      task_id: 7,
      fence: TASK.fence,
      input_hash: HASH,
      new_hashes: [CHILD, CHILD],
      num_generated: 2,
      staged_bytes: 20,
      staging_id: "c".repeat(32),
      retcode: 0,
      elapsed: 0.25,
      protocol_error: "",
      budget: null,
      detail: null,
      finding: { kind: "crash", signal: null, exit_code: 1, stderr_tail: "SUMMARY: AddressSanitizer: x\n" },
    });
  });

  it("a result frame without a finding field reports no finding", () => {
    const { finding: _, ...older } = resultFrame(ran());
    const checked = check(WorkerFrame, older);
    assert.ok(checked.ok, checked.ok ? "" : checked.reason);
    assert.equal(resultOf(checked.frame as ResultFrame).finding, null);
  });

  it("a worker's setup goes out as welcome's explore setup the wire accepts, and comes back the same setup", () => {
    const setup: WorkerSetup = {
      corpusDir: "/campaign/corpus",
      stageRoot: "/campaign/.work/staging/w3",
      target: ["./target", "@@"],
      targetCwd: "/campaign",
      targetBuild: "0123456789ab",
      targetFiles: ["runtime.so"],
      simulate: true,
      budgets: { maxChildren: 16, maxResultBytes: 1 << 20, maxInputBytes: 1 << 16 },
    };
    const frame = setupFrame(setup);
    assert.deepEqual(frame, {
      corpus_dir: "/campaign/corpus",
      stage_root: "/campaign/.work/staging/w3",
      target: ["./target", "@@"],
      target_cwd: "/campaign",
      target_build: "0123456789ab",
      target_files: ["runtime.so"],
      simulate: true,
      max_children: 16,
      max_result_bytes: 1 << 20,
      max_input_bytes: 1 << 16,
    });
    const checked = check(ExploreSetup, frame);
    assert.ok(checked.ok, checked.ok ? "" : checked.reason);
    assert.deepEqual(setupOf(checked.frame), setup);
  });

  it("inside explore/, only the fleet edge imports the wire's frames (net/messages.ts)", () => {
    const explore = fileURLToPath(new URL("../../src/explore/", import.meta.url));
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((d) => (d.isDirectory() ? files(join(dir, d.name)) : d.name.endsWith(".ts") ? [join(dir, d.name)] : []));
    const seeing = files(explore)
      .filter((f) => /from\s+"[./]*\/net\/messages\.ts"/.test(readFileSync(f, "utf8")))
      .map((f) => relative(explore, f))
      .filter((f) => !f.startsWith("fleet/"));
    assert.deepEqual(seeing, []);
  });
});
