// Explore units: one target execution per task, run by the same executeTask as the master's
// local slots. Scratch space is private to this process. Tasks arrive and results leave as
// frames, translated at this edge by the explore codec (explore/fleet/task-frames.ts); a run that
// crashed or hung reports its finding in the result, as the master needs it to record the
// finding. That this worker runs the master's target build was proved at the handshake.
//
// In the shared directory a task's input is read from the corpus and its children are staged in
// the directory the master named in `welcome`. Without it (the welcome's `transfer` terms), the
// worker runs the target from its own working directory, and a task's input comes with the task:
// inline (kept in memory until its run, which writes it straight into the run's input file and
// hashes it there), or fetched piece by piece before the task starts (prepare) into a private inbox
// and then copied and re-hashed like a corpus file. Either way bytes that are not the task's hash
// are not executed. The children are sent in `put` frames before the result (outbox): a small
// result straight from memory (read once from the target's output directory), a larger one from a
// private stage on disk, removed once sent.
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
import { holdOutputs, putFrames, type HeldStage, type Outbox } from "./transfer.ts";
import { stageOutputs } from "../explore/state/staging.ts";

/** How a worker without the shared directory runs: from its own working directory, sending its files under these terms. */
export interface ExploreTransfer {
  workDir: string;
  terms: TransferTermsT;
}

/**
 * Results up to this many bytes are held in memory until sent (each slot holds at most one): a
 * stage on disk costs a small result a directory and a file made, read back and removed.
 */
export const HELD_RESULT_BYTES = 256 * 1024;

export class ExploreRunner implements UnitRunner<Task> {
  private readonly setup: ExecuteSetup;
  private readonly scratchRoot: string;
  /** The stage of each task that reported children (a directory, or held in memory), until the master took them. */
  private readonly staged = new Map<number, string | HeldStage>();
  /** Inline inputs of the tasks received and not yet run (bounded by the task frame's inline cap). */
  private readonly inputs = new Map<number, Buffer>();
  /** Stages held in memory by the runs in progress, by stage id, until their run reports. */
  private readonly held = new Map<string, HeldStage>();

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
      const stage: ExecuteSetup["stage"] = (root, outputs, budgets) => {
        if (outputs.totalBytes > HELD_RESULT_BYTES) return stageOutputs(root, outputs, budgets);
        const held = holdOutputs(outputs, budgets);
        this.held.set(held.stageId, held);
        return held;
      };
      this.setup = { ...s, corpusDir: inbox, stageRoot: stages, targetCwd: transfer.workDir, scratchRoot: join(this.scratchRoot, "run"), stage };
      mkdirSync(this.setup.scratchRoot);
    }
  }

  unitsFrom(reply: CoordinatorReplyT): Task[] | null {
    return reply.type === "task" ? reply.tasks.map(taskOf) : null;
  }

  /**
   * Without the shared directory: keeps each inline input for its run, and writes each input too
   * large to come inline into the private inbox, fetched piece by piece (one piece in memory at a
   * time). An input the master no longer serves is left out: the run then reports that it found none.
   */
  async prepare(reply: CoordinatorReplyT, request: (f: FetchFrame) => Promise<PieceFrame | RefuseFrame>): Promise<void> {
    if (this.transfer === null || reply.type !== "task") return;
    for (const t of reply.tasks) await this.receiveInput(t, request);
  }

  private async receiveInput(t: TaskItemT, request: (f: FetchFrame) => Promise<PieceFrame | RefuseFrame>): Promise<void> {
    if (!t.input) return;
    if (t.input.data !== null) {
      this.inputs.set(t.task_id, Buffer.from(t.input.data, "base64"));
      return;
    }
    const path = join(this.setup.corpusDir, t.hash);
    rmSync(path, { force: true });
    const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    let complete = false;
    try {
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
    const input = this.inputs.get(t.id);
    this.inputs.delete(t.id);
    const r = await executeTask(t, this.setup, signal, input);
    if (this.transfer !== null && input === undefined) rmSync(join(this.setup.corpusDir, t.hash), { force: true });
    const held = this.held.get(r.stagingId);
    this.held.delete(r.stagingId);
    if (r.stagingId) this.staged.set(t.id, held ?? join(this.setup.stageRoot, r.stagingId));
    if (r.finding) this.log(`  task ${t.id}: ${describeFinding(r.finding)}`);
    return resultFrame(r);
  }

  /** Without the shared directory: the `put` frames of task `id`'s staged children, sent before its result. */
  outbox(id: number): AsyncIterable<PutFrame> | null {
    const stage = this.transfer === null ? undefined : this.staged.get(id);
    if (stage === undefined) return null;
    const outbox: Outbox = { files: [], bytes: 0, wrote: "results", skipped: 0 };
    if (typeof stage !== "string") {
      for (const [hash, bytes] of [...stage.files].sort(([a], [b]) => (a < b ? -1 : 1))) {
        outbox.files.push({ rel: `${stage.stageId}/${hash}`, abs: "", size: bytes.length, bytes });
        outbox.bytes += bytes.length;
      }
      return putFrames(id, outbox, this.transfer!.terms.piece_bytes);
    }
    const stageId = stage.slice(stage.lastIndexOf("/") + 1);
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
    if (typeof stage === "string") rmSync(stage, { recursive: true, force: true });
    this.staged.delete(t.id);
    this.inputs.delete(t.id);
  }

  /** The private scratch root; removed when the worker ends. */
  dispose(): void {
    disposeScratch(this.setup.scratchRoot);
    rmSync(this.scratchRoot, { recursive: true, force: true });
  }
}
