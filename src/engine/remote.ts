// RemoteWorkers: the TCP server side of the sweep worker protocol. It admits workers after a
// token check and an identity challenge, hands them the SweepEngine's chunks, books what they
// report, reissues what they drop, and ends the session with the tokenised stop of every worker.
// It runs no generator itself. Every store write goes through one WriteBatch (group commit).
//
// Connection: first frame (token) -> status|failures -> reply, close
//                                  -> hello -> challenge -> prove -> welcome | refuse
//             then strict request/reply: want|heartbeat|done|stop_ack|bye
// Session:    serving -> draining (deadline floor or Ctrl-C) -> drained (nothing in flight, or
//             drain grace over: the rest is reissued) -> stopping (stop{token} as the reply to
//             each worker's next request; only an exact stop_ack counts) -> closed
import { randomBytes } from "node:crypto";
import { readdirSync, rmSync } from "node:fs";
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { StopLedger, type StopOutcome } from "../core/lifecycle.ts";
import { ProtocolError } from "../errors.ts";
import { Connection, FrameTimeout, PeerClosed } from "../net/connection.ts";
import {
  check,
  FirstFrame,
  PROTOCOL_VERSION,
  Prove,
  WorkerFrame,
  type FailuresRequestFrame,
  type HelloFrame,
  type CoordinatorReplyT,
  type WorkerFrameT,
} from "../net/messages.ts";
import { tokensEqual } from "../net/token.ts";
import { markWorkerGone, insertWorker, earlierRates, touchWorker } from "../store/workers.ts";
import { touchChunkHeartbeat, sessionChunkIds } from "../store/chunks.ts";
import { generatorIdentity } from "../sweep/identity.ts";
import type { SweepSession } from "../sweep/session.ts";
import { clock } from "../report/sweep-console.ts";
import type { Assignment, SweepEngine, WorkerView } from "./sweep-engine.ts";
import { WriteBatch } from "./write-batch.ts";

const FIRST_FRAME_MS = 10_000;
const HANDSHAKE_MS = 30_000;
/** Slots one worker may hold at once (its -j is where parallelism belongs). */
export const MAX_SLOTS = 8;
const IDLE_POLL_SECONDS = 1;

export interface RemoteWorker extends WorkerView {
  readonly host: string;
  readonly addr: string;
  readonly slots: number;
  readonly conn: Connection;
  readonly joinedMs: number;
  chunks: number;
  seeds: number;
  gone: string | null;
}

export type ReadReply = { type: "text"; text: string } | { type: "json"; data: unknown };

export interface ReadService {
  status(json: boolean): ReadReply;
  failures(req: FailuresRequestFrame): ReadReply;
}

export interface RemoteOptions {
  session: SweepSession;
  engine: SweepEngine;
  token: string;
  leaseSeconds: number;
  heartbeatSeconds: number;
  drainGraceSeconds: number;
  stopGraceSeconds: number;
  nonce: { path: string; value: string };
  now: () => number;
  read: ReadService;
  /** Console line (timestamped by the caller where it wants). */
  log: (line: string) => void;
}

export interface ShutdownReport {
  outcome: StopOutcome;
  /** Chunks reissued because the drain grace ran out. */
  abandoned: number;
  scratchRemoved: number;
}

export class RemoteWorkers {
  readonly batch: WriteBatch;
  readonly ledger = new StopLedger();
  readonly workers = new Map<string, RemoteWorker>();
  /** Every worker that was ever admitted this session, for the summary. */
  readonly everyone: RemoteWorker[] = [];
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private stopping = false;

  constructor(private readonly o: RemoteOptions) {
    this.batch = new WriteBatch(o.session.db);
  }

  listen(bind: string, port: number): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      const server = createServer((socket) => this.accept(socket));
      server.once("error", reject);
      server.listen({ host: bind, port, exclusive: true }, () => {
        server.off("error", reject);
        server.on("error", (err) => this.o.log(`[${clock()}] listener error: ${err.message}`));
        this.server = server;
        resolve(server.address() as AddressInfo);
      });
    });
  }

  /** Serves until the session drains, then stops every worker. */
  async run(signal: AbortSignal): Promise<ShutdownReport> {
    const engine = this.o.engine;
    let drainDeadline: number | null = null;
    let abandoned = 0;
    for (;;) {
      if (signal.aborted && !engine.draining) {
        engine.drain("interrupted");
        this.o.log(`[${clock()}] interrupted: draining — no new chunks; chunks in flight that do not land will be re-swept`);
      }
      if (!engine.draining && engine.remainingSeconds() < engine.floorSeconds) {
        engine.drain("deadline");
        this.o.log(`[${clock()}] deadline: draining — waiting for the chunks in flight`);
      }
      for (const f of engine.expiredLeases(this.o.leaseSeconds)) {
        await this.batch.run(() => engine.reissue(f.chunkId, `no heartbeat for ${this.o.leaseSeconds}s`));
      }
      if (engine.draining) {
        drainDeadline ??= this.o.now() + this.o.drainGraceSeconds * 1000;
        const left = engine.inFlightChunks();
        if (left.length === 0) break;
        if (this.o.now() >= drainDeadline) {
          abandoned = left.length;
          await this.batch.run(() => {
            for (const f of left) engine.reissue(f.chunkId, "drain grace expired");
          });
          this.o.log(`${abandoned} chunk(s) were still running when the drain grace expired — not counted; the next session re-sweeps them`);
          break;
        }
      }
      await sleep(200);
    }
    const outcome = await this.stopAll();
    this.closeServer();
    return { outcome, abandoned, scratchRemoved: this.removeScratch() };
  }

  /** Asks every attached worker to stop, with a fresh token each, and waits (bounded) for exact ACKs. */
  private async stopAll(): Promise<StopOutcome> {
    this.stopping = true;
    for (const [label] of this.workers) {
      if (this.ledger.mayAssign(label)) this.ledger.begin(label, randomBytes(16).toString("hex"));
    }
    this.ledger.setDeadline(this.o.now() + this.o.stopGraceSeconds * 1000);
    for (;;) {
      const outcome = this.ledger.outcome(this.o.now());
      if (outcome.settled) return outcome;
      await sleep(50);
    }
  }

  private closeServer(): void {
    this.server?.close();
    for (const s of this.sockets) s.destroy();
  }

  /** Removes this session's leftover chunk scratch directories (a crashed or killed worker's). */
  private removeScratch(): number {
    const tmp = join(this.o.session.outDir, "tmp");
    const ids = new Set(sessionChunkIds(this.o.session.db, this.o.session.sessionId));
    let removed = 0;
    let names: string[] = [];
    try {
      names = readdirSync(tmp);
    } catch {
      return 0;
    }
    for (const name of names) {
      const m = /^chunk-(\d+)$/.exec(name);
      if (m && ids.has(Number(m[1]))) {
        rmSync(join(tmp, name), { recursive: true, force: true });
        removed++;
      }
    }
    return removed;
  }

  private accept(socket: Socket): void {
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
    const conn = new Connection(socket);
    this.serve(conn).catch((err) => {
      this.o.log(`[${clock()}] connection from ${conn.remote} ended: ${(err as Error).message}`);
      conn.destroy();
    });
  }

  private refuse(conn: Connection, reason: string): void {
    this.o.log(`[${clock()}] REFUSED ${conn.remote} — ${reason}`);
    try {
      conn.send({ type: "refuse", reason });
    } catch {
      // The peer is gone already.
    }
    conn.close();
  }

  private async serve(conn: Connection): Promise<void> {
    let raw: unknown;
    try {
      raw = await conn.receiveRaw(FIRST_FRAME_MS);
    } catch (err) {
      if (err instanceof PeerClosed) return conn.close();
      return this.refuse(conn, (err as Error).message);
    }
    const first = check(FirstFrame, raw);
    const token = (raw as { token?: unknown }).token;
    // The token is checked before anything else is looked at, whatever the frame claims to be.
    if (typeof token !== "string" || !tokensEqual(token, this.o.token)) return this.refuse(conn, "bad or missing token");
    if (!first.ok) return this.refuse(conn, first.reason);
    const frame = first.frame;
    if (frame.type === "status") {
      conn.send(this.o.read.status(frame.json));
      return conn.close();
    }
    if (frame.type === "failures") {
      conn.send(this.o.read.failures(frame));
      return conn.close();
    }
    await this.handshake(conn, frame);
  }

  private async handshake(conn: Connection, hello: HelloFrame): Promise<void> {
    const s = this.o.session;
    if (hello.protocol !== PROTOCOL_VERSION) {
      return this.refuse(conn, `protocol version ${hello.protocol}, this coordinator speaks ${PROTOCOL_VERSION}: the worker runs a different fuzzfleet`);
    }
    if (this.stopping || this.o.engine.draining) return this.refuse(conn, "this campaign is ending; start the worker for the next one");
    conn.send({
      type: "challenge",
      nonce_path: this.o.nonce.path,
      identity: (({ command, files, baseDir }) => ({ command, files, base_dir: baseDir }))(generatorIdentity(s.config)),
      app_path: s.config.app?.path ?? null,
    });
    let prove;
    try {
      prove = await conn.receive(Prove, HANDSHAKE_MS);
    } catch (err) {
      return this.refuse(conn, (err as Error).message);
    }
    if (prove.nonce !== this.o.nonce.value) {
      return this.refuse(
        conn,
        `the worker cannot read the coordinator's nonce at ${this.o.nonce.path}${prove.problem ? ` (${prove.problem})` : ""}: ` +
          `every host must mount the shared campaign directory at the same path as the coordinator (${s.outDir})`,
      );
    }
    if (prove.gen_hash !== s.genHash) {
      return this.refuse(
        conn,
        `generator identity differs (worker ${prove.gen_hash?.slice(0, 12) ?? "unreadable"}, coordinator ${s.genHash.slice(0, 12)}): ` +
          `the worker sees other bytes in ${s.config.generator.identity.join(", ")}${prove.problem ? ` (${prove.problem})` : ""}, ` +
          "so its seeds would mean different tests. Run it from the shared directory; right after a change, " +
          "wait out the network filesystem's attribute cache (about a minute) and retry.",
      );
    }
    if (prove.app_build !== s.appBuild) {
      return this.refuse(
        conn,
        `app build differs (worker ${prove.app_build ?? "unreadable"}, coordinator ${s.appBuild ?? "none"}): ` +
          `the worker sees another ${s.config.app?.path ?? "app"}, so it would test different code. ` +
          "Run it from the shared directory; right after a rebuild, wait a minute and retry.",
      );
    }
    const worker = await this.batch.run(() => this.admit(conn, hello));
    conn.send({
      type: "welcome",
      worker_id: worker.workerId!,
      session: s.sessionId,
      mode: "sweep",
      lease_seconds: this.o.leaseSeconds,
      heartbeat_seconds: this.o.heartbeatSeconds,
      generation: s.generationId,
    });
    await this.workerLoop(worker);
  }

  private admit(conn: Connection, hello: HelloFrame): RemoteWorker {
    const s = this.o.session;
    const workerId = insertWorker(s.db, { sessionId: s.sessionId, host: hello.host, addr: conn.remote, jobs: hello.jobs, genHash: s.genHash, appBuild: s.appBuild });
    const seeded = earlierRates(s.db, hello.host, hello.jobs, workerId);
    const worker: RemoteWorker = {
      label: `${hello.host}#${workerId}`,
      jobs: hello.jobs,
      workerId,
      rates: new Map(seeded),
      lastCount: new Map(),
      strikes: new Map(),
      disabled: new Set(),
      host: hello.host,
      addr: conn.remote,
      slots: Math.min(hello.slots, MAX_SLOTS),
      conn,
      joinedMs: this.o.now(),
      chunks: 0,
      seeds: 0,
      gone: null,
    };
    this.workers.set(worker.label, worker);
    this.everyone.push(worker);
    this.ledger.add(worker.label);
    const known = [...seeded].map(([lane, r]) => `${lane} ${r.toFixed(1)}/s`).join(", ");
    this.o.log(`[${clock()}] worker ${worker.label} joined (-j ${hello.jobs}, from ${conn.remote})${known ? `  known rates: ${known}` : ""}`);
    return worker;
  }

  private async workerLoop(w: RemoteWorker): Promise<void> {
    const idleLimitMs = Math.max(this.o.leaseSeconds * 2, 60) * 1000;
    let why = "connection closed";
    try {
      for (;;) {
        let frame: WorkerFrameT;
        try {
          frame = await w.conn.receive(WorkerFrame, idleLimitMs);
        } catch (err) {
          if (err instanceof PeerClosed) {
            why = "connection closed";
          } else if (err instanceof FrameTimeout) {
            why = `silent for ${idleLimitMs / 1000}s`;
            this.o.log(`[${clock()}] worker ${w.label}: ${why}; dropping it`);
          } else {
            why = `protocol error: ${(err as Error).message}`;
            this.refuse(w.conn, (err as Error).message);
          }
          return;
        }
        const reply = await this.handle(w, frame);
        if (reply === "close") {
          why = frame.type === "bye" ? `said goodbye (${(frame as { reason: string }).reason})` : "stopped";
          return;
        }
        w.conn.send(reply);
      }
    } finally {
      await this.detach(w, why);
    }
  }

  private async handle(w: RemoteWorker, f: WorkerFrameT): Promise<CoordinatorReplyT | "close"> {
    const engine = this.o.engine;
    const state = this.ledger.state(w.label);
    switch (f.type) {
      case "want": {
        if (state === "stopping") return this.stopFrame(w);
        if (engine.draining) return { type: "drain", reason: engine.draining };
        const free = Math.min(f.slots, w.slots - engine.heldBy(w).length);
        if (free <= 0) return { type: "wait", seconds: IDLE_POLL_SECONDS };
        const result = await this.batch.run(() => {
          const chunks: Assignment[] = [];
          let last: ReturnType<SweepEngine["assign"]> | null = null;
          while (chunks.length < free) {
            last = engine.assign(w);
            if (last.kind !== "chunk") break;
            chunks.push(last.assignment);
          }
          return { chunks, last };
        });
        if (result.chunks.length > 0) {
          return {
            type: "assign",
            chunks: result.chunks.map((a) => ({
              chunk_id: a.chunkId,
              lane: a.lane,
              seed_from: a.seedFrom,
              seed_to: a.seedTo,
              argv: a.argv,
              cwd: a.cwd,
              log_path: a.logPath,
              scratch_dir: a.scratchDir,
              hard_timeout: a.hardTimeoutSeconds,
              nice: a.nice,
              idle_io: a.idleIo,
            })),
          };
        }
        if (result.last?.kind === "drain") return { type: "drain", reason: result.last.reason };
        return { type: "wait", seconds: IDLE_POLL_SECONDS };
      }
      case "heartbeat": {
        if (state === "stopping") return this.stopFrame(w);
        const known = await this.batch.run(() => {
          touchWorker(this.o.session.db, w.workerId!);
          const held: number[] = [];
          for (const id of f.ids) {
            if (engine.heartbeat(w, id)) {
              touchChunkHeartbeat(this.o.session.db, id);
              held.push(id);
            }
          }
          return held;
        });
        return { type: "ack", drain: engine.draining !== null, known, note: null };
      }
      case "done": {
        // Results that arrive while stopping are still booked: late work is consumed, not dropped.
        const report = { outcome: f.outcome, exitCode: f.rc, seconds: f.elapsed, error: f.error ?? undefined };
        const before = engine.counts.seedsSwept;
        const note = await this.batch.run(() => engine.finish(w, f.chunk_id, report));
        if (note === "recorded") {
          w.chunks++;
          w.seeds += engine.counts.seedsSwept - before;
        } else if (note === "unknown chunk") {
          this.o.log(`[${clock()}] worker ${w.label} reported chunk ${f.chunk_id}, which it does not hold — ignored`);
        }
        return { type: "ack", drain: engine.draining !== null || state === "stopping", known: null, note };
      }
      case "stop_ack": {
        const r = this.ledger.ack(w.label, f.token);
        if (r === "exact") {
          this.o.log(`[${clock()}] worker ${w.label} stopped (exact ACK)`);
          w.conn.send({ type: "bye", reason: "stopped" });
          w.conn.close();
          return "close";
        }
        this.o.log(`[${clock()}] worker ${w.label} sent a stop_ack that does not match its stop (${r}) — not counted`);
        this.refuse(w.conn, `stop_ack not accepted (${r})`);
        return "close";
      }
      case "bye": {
        w.conn.send({ type: "bye", reason: "goodbye" });
        w.conn.close();
        return "close";
      }
    }
  }

  private stopFrame(w: RemoteWorker): { type: "stop"; token: string } {
    return { type: "stop", token: this.ledger.token(w.label)! };
  }

  private async detach(w: RemoteWorker, why: string): Promise<void> {
    if (w.gone !== null) return;
    w.gone = why;
    this.workers.delete(w.label);
    if (!this.ledger.leaveBeforeStop(w.label)) this.ledger.gone(w.label, why);
    const held = this.o.engine.heldBy(w);
    await this.batch.run(() => {
      markWorkerGone(this.o.session.db, w.workerId!);
      for (const f of held) this.o.engine.reissue(f.chunkId, `worker ${w.label} left (${why})`);
    });
    this.o.log(`[${clock()}] worker ${w.label} left (${why})`);
    w.conn.close();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
