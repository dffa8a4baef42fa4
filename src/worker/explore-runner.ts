// Explore units: one target execution per task, run by the same executeTask as the master's
// local slots. Scratch space is private to this process; stages go to the directory the master
// named in `welcome`. Tasks arrive and results leave as frames, translated at this edge by the
// explore codec (explore/fleet/task-frames.ts); a run that crashed or hung reports its finding in
// the result, as the master needs it to record the finding. Before anything runs, the worker
// checks that it sees the target build the master runs (its executable as this host finds it,
// the same --target-file files, the same argv): one that would run another build refuses to
// serve (exit 3), naming both builds, since its results would be recorded under the master's.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatDuration } from "../config/duration.ts";
import { disposeScratch, executeTask, type ExecuteSetup } from "../explore/executor/execute.ts";
import { resultFrame, resultOf, setupOf, taskOf } from "../explore/fleet/task-frames.ts";
import { describeFinding } from "../explore/state/findings.ts";
import type { Task } from "../explore/task.ts";
import type { CoordinatorReplyT, ExploreSetupT, Frame, ResultFrame } from "../net/messages.ts";
import type { UnitRunner } from "./loop.ts";
import { checkWorkerTarget, targetIdentity, type TargetIdentity } from "../explore/state/target-identity.ts";
import type { WorkerSetup } from "../explore/fleet/task-frames.ts";
import { UsageError } from "../errors.ts";

/** The target as this host would run it, or why it cannot be read here. */
function seenTarget(s: WorkerSetup): TargetIdentity | { problem: string } {
  try {
    return targetIdentity({ argv: s.target, cwd: s.targetCwd, files: s.targetFiles, path: process.env.PATH, simulate: s.simulate });
  } catch (err) {
    if (err instanceof UsageError) return { problem: err.message };
    throw err;
  }
}

export class ExploreRunner implements UnitRunner<Task> {
  private readonly setup: ExecuteSetup;
  private readonly staged = new Map<number, string>();

  constructor(x: ExploreSetupT, private readonly log: (line: string) => void) {
    const s = setupOf(x);
    checkWorkerTarget(s.targetBuild, seenTarget(s));
    this.setup = { ...s, scratchRoot: mkdtempSync(join(tmpdir(), "fuzzfleet-worker-")) };
  }

  unitsFrom(reply: CoordinatorReplyT): Task[] | null {
    return reply.type === "task" ? reply.tasks.map(taskOf) : null;
  }

  id(t: Task): number {
    return t.id;
  }

  started(t: Task): string {
    return `  task ${t.id}: ${t.hash.slice(0, 12)}`;
  }

  async run(t: Task, signal: AbortSignal): Promise<Frame> {
    const r = await executeTask(t, this.setup, signal);
    if (r.stagingId) this.staged.set(t.id, join(this.setup.stageRoot, r.stagingId));
    if (r.finding) this.log(`  task ${t.id}: ${describeFinding(r.finding)}`);
    return resultFrame(r);
  }

  finished(t: Task, report: Frame, note: string): string {
    const r = resultOf(report as ResultFrame);
    this.staged.delete(t.id);
    const what = r.failure ?? `${r.generated} child(ren), rc ${r.retcode}`;
    return `  task ${t.id} ${what} in ${formatDuration(r.seconds)} (${note})`;
  }

  cleanup(t: Task): void {
    const stage = this.staged.get(t.id);
    if (stage) rmSync(stage, { recursive: true, force: true });
  }

  /** The private scratch root; removed when the worker ends. */
  dispose(): void {
    disposeScratch(this.setup.scratchRoot);
    rmSync(this.setup.scratchRoot, { recursive: true, force: true });
  }
}
