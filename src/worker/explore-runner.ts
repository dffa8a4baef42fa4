// Explore units: one target execution per task, run by the same executeTask as the master's
// local slots. Scratch space is private to this process. Tasks arrive and results leave as
// frames, translated at this edge by the explore codec (explore/fleet/task-frames.ts); a run that
// crashed or hung reports its finding in the result, as the master needs it to record the
// finding. That this worker runs the master's target build was proved at the handshake.
//
// In the shared directory a task's input is read from the corpus and its children are staged in
// the directory the master named in `welcome`. Without it (the welcome's `transfer` terms), the
// worker runs the target from its own working directory, a task's input comes with the task
// (inline, or fetched piece by piece before the task starts: prepare), is written to a private
// inbox and then copied and re-hashed by executeTask like a corpus file (bytes that are not the
// task's hash are not executed); the children are staged privately and sent in `put` frames
// before the result (outbox), then removed.
import { closeSync, constants, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatDuration } from "../config/duration.ts";
import { disposeScratch, executeTask, type ExecuteSetup } from "../explore/executor/execute.ts";
import { resultFrame, resultOf, setupOf, taskOf } from "../explore/fleet/task-frames.ts";
import { describeFinding } from "../explore/state/findings.ts";
import type { Task } from "../explore/task.ts";
import type { CoordinatorReplyT, ExploreSetupT, FetchFrame, Frame, PieceFrame, PutFrame, RefuseFrame, ResultFrame, TaskItemT, TransferTermsT } from "../net/messages.ts";
import type { UnitRunner } from "./loop.ts";
import { putFrames, type Outbox } from "./transfer.ts";

/** How a worker without the shared directory runs: from its own working directory, sending its files under these terms. */
export interface ExploreTransfer {
  workDir: string;
  terms: TransferTermsT;
}

export class ExploreRunner implements UnitRunner<Task> {
  private readonly setup: ExecuteSetup;
  private readonly scratchRoot: string;
  /** The stage of each task that reported children, until the master took them. */
  private readonly staged = new Map<number, string>();

  constructor(
    x: ExploreSetupT,
    private readonly log: (line: string) => void,
    private readonly transfer: ExploreTransfer | null = null,
  ) {
    const s = setupOf(x);
    this.scratchRoot = mkdtempSync(join(tmpdir(), "fuzzfleet-worker-"));
    if (transfer === null) {
      this.setup = { ...s, scratchRoot: this.scratchRoot };
    } else {
      const inbox = join(this.scratchRoot, "inbox");
      const stages = join(this.scratchRoot, "stages");
      mkdirSync(inbox);
      mkdirSync(stages);
      this.setup = { ...s, corpusDir: inbox, stageRoot: stages, targetCwd: transfer.workDir, scratchRoot: join(this.scratchRoot, "run") };
      mkdirSync(this.setup.scratchRoot);
    }
  }

  unitsFrom(reply: CoordinatorReplyT): Task[] | null {
    return reply.type === "task" ? reply.tasks.map(taskOf) : null;
  }

  /**
   * Without the shared directory: writes each task's input into the private inbox, from the task
   * itself or fetched piece by piece (one piece in memory at a time). An input the master no
   * longer serves is left out: the run then reports that it found none.
   */
  async prepare(reply: CoordinatorReplyT, request: (f: FetchFrame) => Promise<PieceFrame | RefuseFrame>): Promise<void> {
    if (this.transfer === null || reply.type !== "task") return;
    for (const t of reply.tasks) await this.receiveInput(t, request);
  }

  private async receiveInput(t: TaskItemT, request: (f: FetchFrame) => Promise<PieceFrame | RefuseFrame>): Promise<void> {
    if (!t.input) return;
    const path = join(this.setup.corpusDir, t.hash);
    rmSync(path, { force: true });
    const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    let complete = false;
    try {
      if (t.input.data !== null) {
        const bytes = Buffer.from(t.input.data, "base64");
        writeSync(fd, bytes, 0, bytes.length, 0);
        complete = true;
        return;
      }
      // Never more than a run may read: a larger input fails its run as over the input budget would.
      const size = Math.min(t.input.size, this.setup.budgets.maxInputBytes + 1);
      let offset = 0;
      while (offset < size) {
        const piece = await request({ type: "fetch", task_id: t.task_id, offset });
        if (piece.type === "refuse") throw new Error(`the master refused to send the input of task ${t.task_id}: ${piece.reason}`);
        const bytes = Buffer.from(piece.data, "base64");
        if (piece.offset !== offset || bytes.length === 0) return;
        const take = Math.min(bytes.length, size - offset);
        writeSync(fd, bytes, 0, take, offset);
        offset += take;
      }
      complete = true;
    } finally {
      closeSync(fd);
      if (!complete) rmSync(path, { force: true });
    }
  }

  id(t: Task): number {
    return t.id;
  }

  started(t: Task): string {
    return `  task ${t.id}: ${t.hash.slice(0, 12)}`;
  }

  async run(t: Task, signal: AbortSignal): Promise<Frame> {
    const r = await executeTask(t, this.setup, signal);
    if (this.transfer !== null) rmSync(join(this.setup.corpusDir, t.hash), { force: true });
    if (r.stagingId) this.staged.set(t.id, join(this.setup.stageRoot, r.stagingId));
    if (r.finding) this.log(`  task ${t.id}: ${describeFinding(r.finding)}`);
    return resultFrame(r);
  }

  /** Without the shared directory: the `put` frames of task `id`'s staged children, sent before its result. */
  outbox(id: number): AsyncIterable<PutFrame> | null {
    const stage = this.transfer === null ? undefined : this.staged.get(id);
    if (stage === undefined) return null;
    const stageId = stage.slice(stage.lastIndexOf("/") + 1);
    const outbox: Outbox = { files: [], bytes: 0, wrote: "results", skipped: 0 };
    for (const name of readdirSync(stage).sort()) {
      const size = lstatSync(join(stage, name)).size;
      outbox.files.push({ rel: `${stageId}/${name}`, abs: join(stage, name), size });
      outbox.bytes += size;
    }
    return putFrames(id, outbox, this.transfer!.terms.piece_bytes);
  }

  finished(t: Task, report: Frame, note: string): string {
    const r = resultOf(report as ResultFrame);
    // A shared stage is the master's now; a private one was sent.
    if (this.transfer !== null) this.cleanup(t);
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
    rmSync(this.scratchRoot, { recursive: true, force: true });
  }
}
