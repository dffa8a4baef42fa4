// Explore units: one target execution per task, run by the same executeTask as the master's
// local slots. Scratch space is private to this process; stages go to the directory the master
// named in `welcome`. A run that crashed or hung reports its finding in the result frame, as the
// master needs it to record the finding; a wire that has no `finding` field yet gets the frame
// without it (the master then records nothing for that run).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatDuration } from "../config/duration.ts";
import { disposeScratch, executeTask, type ExecuteSetup } from "../explore/executor/execute.ts";
import { describeFinding } from "../explore/state/findings.ts";
import { Result, type CoordinatorReplyT, type ExploreSetupT, type Frame, type TaskItemT } from "../net/messages.ts";

/** Whether result frames carry a finding on this version of the wire. */
const WIRE_CARRIES_FINDINGS = "finding" in Result.shape;
import type { UnitRunner } from "./loop.ts";

export class ExploreRunner implements UnitRunner<TaskItemT> {
  private readonly setup: ExecuteSetup;
  private readonly staged = new Map<number, string>();

  constructor(x: ExploreSetupT, private readonly log: (line: string) => void) {
    this.setup = {
      corpusDir: x.corpus_dir,
      stageRoot: x.stage_root,
      target: x.target,
      targetCwd: x.target_cwd,
      simulate: x.simulate,
      budgets: { maxChildren: x.max_children, maxResultBytes: x.max_result_bytes, maxInputBytes: x.max_input_bytes },
      scratchRoot: mkdtempSync(join(tmpdir(), "fuzzfleet-worker-")),
    };
  }

  unitsFrom(reply: CoordinatorReplyT): TaskItemT[] | null {
    return reply.type === "task" ? reply.tasks : null;
  }

  id(t: TaskItemT): number {
    return t.task_id;
  }

  started(t: TaskItemT): string {
    return `  task ${t.task_id}: ${t.hash.slice(0, 12)}`;
  }

  async run(t: TaskItemT, signal: AbortSignal): Promise<Frame> {
    const { finding, ...r } = await executeTask(t, this.setup, signal);
    if (r.staging_id) this.staged.set(t.task_id, join(this.setup.stageRoot, r.staging_id));
    if (finding) this.log(`  task ${t.task_id}: ${describeFinding(finding)}`);
    return (WIRE_CARRIES_FINDINGS ? { ...r, finding: finding ?? null } : r) as Frame;
  }

  finished(t: TaskItemT, report: Frame, note: string): string {
    const r = report as Extract<Frame, { type: "result" }>;
    this.staged.delete(t.task_id);
    const what = r.protocol_error ? r.protocol_error : `${r.num_generated} child(ren), rc ${r.retcode}`;
    return `  task ${t.task_id} ${what} in ${formatDuration(r.elapsed)} (${note})`;
  }

  cleanup(t: TaskItemT): void {
    const stage = this.staged.get(t.task_id);
    if (stage) rmSync(stage, { recursive: true, force: true });
  }

  /** The private scratch root; removed when the worker ends. */
  dispose(): void {
    disposeScratch(this.setup.scratchRoot);
    rmSync(this.setup.scratchRoot, { recursive: true, force: true });
  }
}
