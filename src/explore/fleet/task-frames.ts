// The explore codec at the wire's edge: a task, its result and a worker's setup, to and from the
// frames that carry them (net/messages.ts: `task`, `result`, welcome's `explore`). The master
// hands tasks out and consumes results in its own words (task.ts); the master's worker protocol
// (worker-protocol.ts) and a remote worker's runner (worker/explore-runner.ts) translate here, so
// a change of the wire is a change of this file and of net/messages.ts alone. A frame that
// arrives has been checked against its schema already; what its values mean is the master's to
// check (master/result-checks.ts), as for a local slot's result.
import type { ExploreSetupT, ResultFrame, TaskItemT } from "../../net/messages.ts";
import type { ExecuteSetup } from "../executor/execute.ts";
import type { RunFinding, Task, TaskResult } from "../task.ts";

/**
 * What a remote worker is told to run its tasks with (its scratch space is its own), and the
 * target build it must see (its --target-file paths included) to be allowed to run them.
 */
export type WorkerSetup = Omit<ExecuteSetup, "scratchRoot" | "killGraceMs"> & { targetBuild: string; targetFiles: readonly string[] };

export function taskFrame(t: Task): TaskItemT {
  return { task_id: t.id, hash: t.hash, fence: t.fence, timeout: t.timeoutSeconds };
}

export function taskOf(f: TaskItemT): Task {
  return { id: f.task_id, hash: f.hash, fence: f.fence, timeoutSeconds: f.timeout };
}

export function resultFrame(r: TaskResult): ResultFrame {
  return {
    type: "result",
    task_id: r.taskId,
    fence: r.fence,
    input_hash: r.inputHash,
    new_hashes: r.children,
    num_generated: r.generated,
    staged_bytes: r.stagedBytes,
    staging_id: r.stagingId,
    retcode: r.retcode,
    elapsed: r.seconds,
    protocol_error: r.failure ?? "",
    budget: r.budget && { resource: r.budget.resource, observed: r.budget.observed, limit: r.budget.limit },
    detail: r.detail,
    finding: r.finding && findingOf(r.finding),
  };
}

/** A result frame as the master consumes it; a frame without `finding` reports none. */
export function resultOf(f: ResultFrame): TaskResult {
  return {
    taskId: f.task_id,
    fence: f.fence,
    inputHash: f.input_hash,
    children: f.new_hashes,
    generated: f.num_generated,
    stagedBytes: f.staged_bytes,
    stagingId: f.staging_id,
    retcode: f.retcode,
    seconds: f.elapsed,
    failure: f.protocol_error === "" ? null : f.protocol_error,
    budget: f.budget && { resource: f.budget.resource, observed: f.budget.observed, limit: f.budget.limit },
    detail: f.detail,
    finding: f.finding ? findingOf(f.finding) : null,
  };
}

/** The worker's setup as welcome's `explore` carries it; `stageRoot` is this worker's own. */
export function setupFrame(s: WorkerSetup): ExploreSetupT {
  return {
    corpus_dir: s.corpusDir,
    stage_root: s.stageRoot,
    target: [...s.target],
    target_cwd: s.targetCwd,
    target_build: s.targetBuild,
    target_files: [...s.targetFiles],
    simulate: s.simulate,
    max_children: s.budgets.maxChildren,
    max_result_bytes: s.budgets.maxResultBytes,
    max_input_bytes: s.budgets.maxInputBytes,
  };
}

export function setupOf(x: ExploreSetupT): WorkerSetup {
  return {
    corpusDir: x.corpus_dir,
    stageRoot: x.stage_root,
    target: x.target,
    targetCwd: x.target_cwd,
    targetBuild: x.target_build,
    targetFiles: x.target_files,
    simulate: x.simulate,
    budgets: { maxChildren: x.max_children, maxResultBytes: x.max_result_bytes, maxInputBytes: x.max_input_bytes },
  };
}

/** The same fields on both sides (a finding record keeps them on disk too), copied so that neither side shares the other's object. */
function findingOf(f: RunFinding): RunFinding {
  return { kind: f.kind, signal: f.signal, exit_code: f.exit_code, stderr_tail: f.stderr_tail };
}
