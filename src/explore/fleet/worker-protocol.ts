// The explore side of the worker wire: remote workers pull tasks from the master's frontier and
// report results, which the master consumes exactly like its local slots' results (translated
// from and to frames by task-frames.ts). Connections, the handshake and the tokenised stop are
// the shared WorkerServer's.
//
// A worker without the shared directory (files "transfer") is admitted once it proved, like any
// worker, that it runs the master's target build (checked here at the handshake). Its tasks carry
// their inputs (inline when small, else it fetches them piece by piece: `fetch` -> `piece`), and
// it sends each staged child in `put` frames before the task's `result`; they land in the stage a
// shared worker would have written (child-landing.ts), so the result is consumed by the same
// consumeResult. A refused put ends the connection: what landed of its task is removed, and every
// task the worker held goes back to the queue (detach), as for a connection lost mid-transfer.
import { closeSync, constants, fstatSync, mkdirSync, openSync, readSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { printable } from "../../core/log-lines.ts";
import { filesWords, type WorkerFiles } from "../../core/worker-session.ts";
import type { Connection } from "../../net/connection.ts";
import {
  INLINE_FRAME_MAX,
  INLINE_INPUT_MAX,
  PIECE_MAX,
  type CoordinatorReplyT,
  type FetchFrame,
  type Frame,
  type HelloFrame,
  type PeerHelloFrame,
  type ProveFrame,
  type PutFrame,
  type TaskItemT,
  type TransferTermsT,
  type WorkerFrameT,
} from "../../net/messages.ts";
import { WorkerServer, type AttachedWorker, type ReadService, type WorkProtocol } from "../../net/worker-server.ts";
import type { ExploreMaster } from "../master/master.ts";
import { targetProofProblem } from "../state/target-identity.ts";
import { ChildLanding } from "./child-landing.ts";
import { resultOf, setupFrame, taskFrame, type WorkerSetup } from "./task-frames.ts";

/** How often an idle remote worker asks again (seconds). */
const POLL_SECONDS = 0.1;

export interface ExploreWorker extends AttachedWorker {
  /** The master's executor key for this worker: its stages live under <staging>/<key>. */
  readonly key: string;
  tasks: number;
  /** Where its tasks' files are: the shared directory, or its own (inputs and children sent over the connection). */
  readonly files: WorkerFiles;
  /** Its children landing here (files "transfer" only). */
  readonly landing: ChildLanding | null;
  /** The inputs of the tasks it holds, by task id (files "transfer" only: what a fetch may read). */
  readonly inputs: Map<number, string>;
  /** Why its files were refused: it is being disconnected, nothing more of it is taken. */
  refused: string | null;
}

/** The children bytes a worker without the shared directory puts in one frame. */
const PUT_PIECE_BYTES = 1 << 20;

export interface ExploreWorkerProtocolOptions {
  master: ExploreMaster;
  token: string;
  nonce: { path: string; value: string };
  /** What every worker runs its tasks with, except its own stage root. */
  setup: Omit<WorkerSetup, "stageRoot">;
  leaseSeconds: number;
  heartbeatSeconds: number;
  read: ReadService;
  now: () => number;
  log: (line: string) => void;
  /** Called when a result was consumed (the master loop re-evaluates at once). */
  onProgress: () => void;
  /** The root of several masters also accepts submasters on its port. */
  onPeer: ((conn: Connection, hello: PeerHelloFrame) => Promise<void>) | null;
}

export class ExploreWorkerProtocol implements WorkProtocol<ExploreWorker> {
  readonly campaign = "explore" as const;
  readonly takesTransfer = true;
  readonly server: WorkerServer<ExploreWorker>;
  /** Set when the campaign stops handing out work. */
  closing: string | null = null;
  private nextId = 1;

  constructor(private readonly o: ExploreWorkerProtocolOptions) {
    this.server = new WorkerServer<ExploreWorker>({
      token: o.token,
      protocol: this,
      nonce: o.nonce,
      read: o.read,
      leaseSeconds: o.leaseSeconds,
      now: o.now,
      log: o.log,
      onPeer: o.onPeer ?? undefined,
    });
  }

  listen(bind: string, port: number): Promise<AddressInfo> {
    return this.server.listen(bind, port);
  }

  /** Remote workers that are attached and not quarantined. */
  usableWorkers(): number {
    let n = 0;
    for (const w of this.server.workers.values()) if (!this.o.master.quarantined.has(w.key)) n++;
    return n;
  }

  closedToNewWorkers(): string | null {
    return this.closing ? `this campaign is ending (${this.closing})` : null;
  }

  challenge() {
    const s = this.o.setup;
    return { identity: null, app_path: null, target: { argv: [...s.target], cwd: s.targetCwd, files: [...s.targetFiles], simulate: s.simulate } };
  }

  /** The worker must run the master's target build, wherever it finds it (the shared directory or its own). */
  checkProof(prove: ProveFrame, files: WorkerFiles): string | null {
    return targetProofProblem(this.o.setup.targetBuild, { build: prove.target_build, problem: prove.problem }, files === "shared");
  }

  async admit(conn: Connection, hello: HelloFrame, slots: number, files: WorkerFiles = "shared"): Promise<ExploreWorker> {
    const id = this.nextId++;
    const key = `w${id}`;
    const root = this.o.master.stageRoot(key);
    mkdirSync(root, { recursive: true });
    this.o.log(`worker ${hello.host}#${id} joined (-j ${hello.jobs}, ${slots} slot(s), from ${conn.remote})  files: ${filesWords(files)}`);
    return {
      label: `${hello.host}#${id}`,
      workerId: id,
      host: hello.host,
      addr: conn.remote,
      jobs: hello.jobs,
      slots,
      conn,
      gone: null,
      key,
      tasks: 0,
      files,
      landing: files === "transfer" ? new ChildLanding(root, this.o.setup.budgets) : null,
      inputs: new Map(),
      refused: null,
    };
  }

  welcome(w: ExploreWorker) {
    return {
      session: 1,
      generation: 0,
      lease_seconds: this.o.leaseSeconds,
      heartbeat_seconds: this.o.heartbeatSeconds,
      explore: setupFrame({ ...this.o.setup, stageRoot: this.o.master.stageRoot(w.key) }),
      transfer: w.files === "transfer" ? this.transferTerms() : null,
    };
  }

  /** A worker without the shared directory sends at most a run's budgets of children. */
  private transferTerms(): TransferTermsT {
    const b = this.o.setup.budgets;
    return { results: "", max_files: b.maxChildren, max_bytes: b.maxResultBytes, max_file_bytes: b.maxResultBytes, piece_bytes: PUT_PIECE_BYTES };
  }

  async handle(w: ExploreWorker, f: Exclude<WorkerFrameT, { type: "stop_ack" } | { type: "bye" }>): Promise<CoordinatorReplyT> {
    const master = this.o.master;
    switch (f.type) {
      case "want": {
        if (this.closing) return { type: "drain", reason: this.closing };
        const held = master.activeOn(w.key).length;
        const free = Math.min(f.slots, w.slots - held);
        const tasks: TaskItemT[] = [];
        let inline = 0;
        for (let i = 0; i < free; i++) {
          const t = master.nextTask(w.key);
          if (!t) break;
          const item = taskFrame(t);
          if (w.files === "transfer") {
            const input = this.inputOf(t.hash, INLINE_FRAME_MAX - inline);
            inline += input.data === null ? 0 : input.size;
            item.input = input;
            w.inputs.set(t.id, t.hash);
          }
          tasks.push(item);
        }
        if (tasks.length === 0) return { type: "wait", seconds: POLL_SECONDS };
        w.tasks += tasks.length;
        return { type: "task", tasks };
      }
      case "heartbeat": {
        const mine = new Set(master.activeOn(w.key));
        return { type: "ack", drain: this.closing !== null, known: f.ids.filter((id) => mine.has(id)), note: null };
      }
      case "result": {
        if (w.refused !== null) return { type: "refuse", reason: w.refused };
        w.inputs.delete(f.task_id);
        if (w.landing && !master.activeOn(w.key).includes(f.task_id)) {
          // Taken back meanwhile (its puts were answered "not held"): the result is stale, nothing of it lands.
          w.landing.drop(f.task_id);
        } else if (w.landing) {
          // Only a result whose children all landed, and nothing else, reaches the stage check.
          const problem = w.landing.settle(f.task_id, f.staging_id, f.new_hashes);
          if (problem !== null) return this.refuseFiles(w, `the children of task ${f.task_id} are not taken: ${problem}`);
        }
        const note = master.consumeResult(w.key, resultOf(f));
        this.o.onProgress();
        return { type: "ack", drain: this.closing !== null, known: null, note };
      }
      case "done":
        return { type: "refuse", reason: "this master runs an explore campaign; 'done' frames belong to sweeps" };
    }
  }

  /** One piece of a child of a task `w` holds: landed, or the worker refused and disconnected. */
  async receive(w: ExploreWorker, put: PutFrame): Promise<CoordinatorReplyT> {
    if (w.refused !== null) return { type: "refuse", reason: w.refused };
    const drain = this.closing !== null;
    if (!this.o.master.activeOn(w.key).includes(put.unit)) {
      // Taken back meanwhile: nothing of it lands; its result is then stale.
      w.landing!.drop(put.unit);
      return { type: "ack", drain, known: null, note: "not held" };
    }
    const problem = await w.landing!.put(put);
    if (problem !== null) return this.refuseFiles(w, `files of task ${put.unit} refused: ${problem}`);
    return { type: "ack", drain, known: null, note: null };
  }

  /** A piece of the input of a task `w` holds, read from the corpus (the worker checks its hash). */
  async fetch(w: ExploreWorker, f: FetchFrame): Promise<Frame> {
    if (w.refused !== null) return { type: "refuse", reason: w.refused };
    const hash = w.inputs.get(f.task_id);
    if (hash === undefined || !this.o.master.activeOn(w.key).includes(f.task_id)) return { type: "piece", task_id: f.task_id, offset: f.offset, size: 0, data: "" };
    const fd = openInput(this.o.setup.corpusDir, hash);
    // Unreadable here: the worker's run finds no input and says so, as a shared worker's would.
    if (fd === null) return { type: "piece", task_id: f.task_id, offset: f.offset, size: 0, data: "" };
    try {
      const size = fstatSync(fd).size;
      const buf = Buffer.alloc(Math.max(0, Math.min(PIECE_MAX, size - f.offset)));
      const got = buf.length > 0 ? readSync(fd, buf, 0, buf.length, f.offset) : 0;
      return { type: "piece", task_id: f.task_id, offset: f.offset, size, data: buf.subarray(0, got).toString("base64") };
    } finally {
      closeSync(fd);
    }
  }

  /** A task's input for a worker without the shared directory: inline when it fits `room`, else its size only (fetched). */
  private inputOf(hash: string, room: number): { size: number; data: string | null } {
    const fd = openInput(this.o.setup.corpusDir, hash);
    if (fd === null) return { size: 0, data: null };
    try {
      const size = fstatSync(fd).size;
      if (size > INLINE_INPUT_MAX || size > room) return { size, data: null };
      const buf = Buffer.alloc(size);
      const got = size > 0 ? readSync(fd, buf, 0, size, 0) : 0;
      return { size, data: buf.subarray(0, got).toString("base64") };
    } finally {
      closeSync(fd);
    }
  }

  /**
   * Refuses what a worker sent and disconnects it once the refusal is on its way: what landed of
   * its tasks is removed and the tasks run again (detach).
   */
  private refuseFiles(w: ExploreWorker, reason: string): CoordinatorReplyT {
    w.refused = reason;
    w.landing?.dropAll();
    this.o.log(`worker ${w.label}: ${printable(reason)}`);
    setImmediate(() => w.conn.close());
    return { type: "refuse", reason };
  }

  async detach(w: ExploreWorker): Promise<void> {
    // A connection lost mid-transfer: nothing of what it was sending is kept.
    w.landing?.dropAll();
    w.inputs.clear();
    const n = this.o.master.release(w.key);
    if (n > 0) this.o.log(`${n} task(s) of ${w.label} went back to the front of the queue`);
    this.o.onProgress();
  }
}

/** A corpus object opened for reading (never through a symlink, never blocking on a FIFO), or null when it is no regular file. */
function openInput(corpusDir: string, hash: string): number | null {
  let fd: number;
  try {
    fd = openSync(join(corpusDir, hash), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return null;
  }
  if (fstatSync(fd).isFile()) return fd;
  closeSync(fd);
  return null;
}
