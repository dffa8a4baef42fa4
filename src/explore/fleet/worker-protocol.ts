// The explore side of the worker wire: remote workers pull tasks from the master's frontier and
// report results, which the master consumes exactly like its local slots' results (translated
// from and to frames by task-frames.ts). Connections, the handshake and the tokenised stop are
// the shared WorkerServer's.
import { mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import type { Connection } from "../../net/connection.ts";
import type { CoordinatorReplyT, HelloFrame, PeerHelloFrame, TaskItemT, WorkerFrameT } from "../../net/messages.ts";
import { WorkerServer, type AttachedWorker, type ReadService, type WorkProtocol } from "../../net/worker-server.ts";
import type { ExploreMaster } from "../master/master.ts";
import { resultOf, setupFrame, taskFrame, type WorkerSetup } from "./task-frames.ts";

/** How often an idle remote worker asks again (seconds). */
const POLL_SECONDS = 0.1;

export interface ExploreWorker extends AttachedWorker {
  /** The master's executor key for this worker: its stages live under <staging>/<key>. */
  readonly key: string;
  tasks: number;
}

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
    return { identity: null, app_path: null };
  }

  checkProof(): string | null {
    return null;
  }

  async admit(conn: Connection, hello: HelloFrame, slots: number): Promise<ExploreWorker> {
    const id = this.nextId++;
    const key = `w${id}`;
    mkdirSync(this.o.master.stageRoot(key), { recursive: true });
    this.o.log(`worker ${hello.host}#${id} joined (-j ${hello.jobs}, ${slots} slot(s), from ${conn.remote})`);
    return { label: `${hello.host}#${id}`, workerId: id, host: hello.host, addr: conn.remote, jobs: hello.jobs, slots, conn, gone: null, key, tasks: 0 };
  }

  welcome(w: ExploreWorker) {
    return {
      session: 1,
      generation: 0,
      lease_seconds: this.o.leaseSeconds,
      heartbeat_seconds: this.o.heartbeatSeconds,
      explore: setupFrame({ ...this.o.setup, stageRoot: this.o.master.stageRoot(w.key) }),
    };
  }

  async handle(w: ExploreWorker, f: Exclude<WorkerFrameT, { type: "stop_ack" } | { type: "bye" }>): Promise<CoordinatorReplyT> {
    const master = this.o.master;
    switch (f.type) {
      case "want": {
        if (this.closing) return { type: "drain", reason: this.closing };
        const held = master.activeOn(w.key).length;
        const free = Math.min(f.slots, w.slots - held);
        const tasks: TaskItemT[] = [];
        for (let i = 0; i < free; i++) {
          const t = master.nextTask(w.key);
          if (!t) break;
          tasks.push(taskFrame(t));
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
        const note = master.consumeResult(w.key, resultOf(f));
        this.o.onProgress();
        return { type: "ack", drain: this.closing !== null, known: null, note };
      }
      case "done":
        return { type: "refuse", reason: "this master runs an explore campaign; 'done' frames belong to sweeps" };
    }
  }

  async detach(w: ExploreWorker): Promise<void> {
    const n = this.o.master.release(w.key);
    if (n > 0) this.o.log(`${n} task(s) of ${w.label} went back to the front of the queue`);
    this.o.onProgress();
  }
}
