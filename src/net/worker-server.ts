// The server side of the worker wire, shared by sweep coordinators and explore masters: token
// check on the first frame, read-only requests, the identity challenge, admission, the strict
// request -> reply loop, and the tokenised stop of every worker. What a worker is *given* and
// what its reports *mean* is the campaign's business (WorkProtocol); everything else is here.
//
// Connection: first frame (token) -> status|failures -> reply, close
//                                  -> hello -> challenge -> prove -> welcome | refuse -> loop
// Stop:       stopAll() gives every attached worker a fresh random token; it is delivered as the
//             reply to that worker's next want/heartbeat; only an exact stop_ack counts; the wait
//             is bounded by the grace; the outcome names who did not acknowledge.
import { randomBytes } from "node:crypto";
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { StopLedger, type StopOutcome } from "../core/lifecycle.ts";
import { Connection, FrameTimeout, PeerClosed } from "./connection.ts";
import {
  check,
  FirstFrame,
  PROTOCOL_VERSION,
  Prove,
  WorkerFrame,
  type ChallengeFrame,
  type CoordinatorReplyT,
  type ExploreSetupT,
  type FailuresRequestFrame,
  type HelloFrame,
  type PeerHelloFrame,
  type ProveFrame,
  type WorkerFrameT,
} from "./messages.ts";
import { tokensEqual } from "./token.ts";
import { setTimeout as sleep } from "node:timers/promises";

const FIRST_FRAME_MS = 10_000;
const HANDSHAKE_MS = 30_000;
/** Slots one worker may hold at once (its -j is where parallelism belongs). */
export const MAX_SLOTS = 8;

export type ReadReply = { type: "text"; text: string } | { type: "json"; data: unknown };

export interface ReadService {
  status(json: boolean): ReadReply;
  failures(req: FailuresRequestFrame): ReadReply;
}

/** A worker admitted by the server. Campaign protocols extend it with their own bookkeeping. */
export interface AttachedWorker {
  readonly label: string;
  readonly workerId: number;
  readonly host: string;
  readonly addr: string;
  readonly jobs: number;
  readonly slots: number;
  readonly conn: Connection;
  gone: string | null;
}

/** The campaign-specific half of the worker wire. */
export interface WorkProtocol<W extends AttachedWorker> {
  readonly mode: "sweep" | "explore";
  /** Refuse new workers (the campaign is ending). */
  closedToNewWorkers(): string | null;
  /** What the worker must prove it sees. */
  challenge(): Omit<ChallengeFrame, "type" | "nonce_path">;
  /** Why the proof is not good enough (both values named), or null to admit. */
  checkProof(prove: ProveFrame): string | null;
  admit(conn: Connection, hello: HelloFrame, slots: number): Promise<W>;
  welcome(w: W): { session: number; generation: number; lease_seconds: number; heartbeat_seconds: number; explore: ExploreSetupT | null };
  /** want / heartbeat / done / result, while the worker is not being stopped (a `done`/`result` also while stopping). */
  handle(w: W, frame: Exclude<WorkerFrameT, { type: "stop_ack" } | { type: "bye" }>, stopping: boolean): Promise<CoordinatorReplyT>;
  /** The worker is gone: take its work back. */
  detach(w: W, why: string): Promise<void>;
}

export interface WorkerServerOptions<W extends AttachedWorker> {
  token: string;
  protocol: WorkProtocol<W>;
  nonce: { path: string; value: string };
  read: ReadService;
  /** The lease workers renew; one silent for two leases (and at least a minute) is dropped. */
  leaseSeconds: number;
  now: () => number;
  log: (line: string) => void;
  /** Handles a submaster's connection (explore roots only); without it, masters are refused. */
  onPeer?: (conn: Connection, hello: PeerHelloFrame) => Promise<void>;
}

export class WorkerServer<W extends AttachedWorker> {
  readonly ledger = new StopLedger();
  readonly workers = new Map<string, W>();
  /** Every worker that was ever admitted, for the summary. */
  readonly everyone: W[] = [];
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private stopping = false;

  private readonly idleLimitMs: number;

  constructor(private readonly o: WorkerServerOptions<W>) {
    this.idleLimitMs = Math.max(o.leaseSeconds * 2, 60) * 1000;
  }

  listen(bind: string, port: number): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      const server = createServer((socket) => this.accept(socket));
      server.once("error", reject);
      server.listen({ host: bind, port, exclusive: true }, () => {
        server.off("error", reject);
        server.on("error", (err) => this.o.log(`listener error: ${err.message}`));
        this.server = server;
        resolve(server.address() as AddressInfo);
      });
    });
  }

  /** Asks every attached worker to stop, each with a fresh token, and waits (bounded) for exact ACKs. */
  async stopAll(graceMs: number): Promise<StopOutcome> {
    this.stopping = true;
    for (const [label] of this.workers) {
      if (this.ledger.mayAssign(label)) this.ledger.begin(label, randomBytes(16).toString("hex"));
    }
    this.ledger.setDeadline(this.o.now() + graceMs);
    for (;;) {
      const outcome = this.ledger.outcome(this.o.now());
      if (outcome.settled) return outcome;
      await sleep(50);
    }
  }

  close(): void {
    this.server?.close();
    for (const s of this.sockets) s.destroy();
  }

  private accept(socket: Socket): void {
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
    const conn = new Connection(socket);
    this.serve(conn).catch((err) => {
      this.o.log(`connection from ${conn.remote} ended: ${(err as Error).message}`);
      conn.destroy();
    });
  }

  private refuse(conn: Connection, reason: string): void {
    this.o.log(`REFUSED ${conn.remote} — ${reason}`);
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
    if (frame.type === "peer_hello") {
      if (!this.o.onPeer) return this.refuse(conn, "this process accepts workers, not masters: join the root master (started with --masters N)");
      // A master's connection outlives the worker service: closing the workers must not cut it.
      this.sockets.delete(conn.socket);
      return this.o.onPeer(conn, frame);
    }
    await this.handshake(conn, frame);
  }

  private async handshake(conn: Connection, hello: HelloFrame): Promise<void> {
    const p = this.o.protocol;
    if (hello.protocol !== PROTOCOL_VERSION) {
      return this.refuse(conn, `protocol version ${hello.protocol}, this server speaks ${PROTOCOL_VERSION}: the worker runs a different fuzzfleet`);
    }
    const closed = this.stopping ? "this campaign is ending; start the worker for the next one" : p.closedToNewWorkers();
    if (closed) return this.refuse(conn, closed);
    conn.send({ type: "challenge", nonce_path: this.o.nonce.path, ...p.challenge() });
    let prove: ProveFrame;
    try {
      prove = await conn.receive(Prove, HANDSHAKE_MS);
    } catch (err) {
      return this.refuse(conn, (err as Error).message);
    }
    if (prove.nonce !== this.o.nonce.value) {
      return this.refuse(
        conn,
        `the worker cannot read the nonce at ${this.o.nonce.path}${prove.problem ? ` (${prove.problem})` : ""}: ` +
          "every host must mount the shared campaign directory at the same path",
      );
    }
    const why = p.checkProof(prove);
    if (why) return this.refuse(conn, why);
    const w = await p.admit(conn, hello, Math.min(hello.slots, MAX_SLOTS));
    this.workers.set(w.label, w);
    this.everyone.push(w);
    this.ledger.add(w.label);
    conn.send({ type: "welcome", worker_id: w.workerId, mode: p.mode, ...p.welcome(w) });
    await this.loop(w);
  }

  private async loop(w: W): Promise<void> {
    let why = "connection closed";
    try {
      for (;;) {
        let frame: WorkerFrameT;
        try {
          frame = await w.conn.receive(WorkerFrame, this.idleLimitMs);
        } catch (err) {
          if (err instanceof PeerClosed) {
            why = "connection closed";
          } else if (err instanceof FrameTimeout) {
            why = `silent for ${Math.round(this.idleLimitMs / 1000)}s`;
          } else {
            why = `protocol error: ${(err as Error).message}`;
            this.refuse(w.conn, (err as Error).message);
          }
          return;
        }
        if (frame.type === "stop_ack") {
          const r = this.ledger.ack(w.label, frame.token);
          if (r === "exact") {
            this.o.log(`worker ${w.label} stopped (exact ACK)`);
            w.conn.send({ type: "bye", reason: "stopped" });
            w.conn.close();
            why = "stopped";
          } else {
            this.o.log(`worker ${w.label} sent a stop_ack that does not match its stop (${r}) — not counted`);
            this.refuse(w.conn, `stop_ack not accepted (${r})`);
            why = "sent a wrong stop_ack";
          }
          return;
        }
        if (frame.type === "bye") {
          w.conn.send({ type: "bye", reason: "goodbye" });
          w.conn.close();
          why = `said goodbye (${frame.reason})`;
          return;
        }
        const stopping = this.ledger.state(w.label) === "stopping";
        // Reports are consumed even while stopping; requests for more get the stop instead.
        if (stopping && (frame.type === "want" || frame.type === "heartbeat")) {
          w.conn.send({ type: "stop", token: this.ledger.token(w.label)! });
          continue;
        }
        w.conn.send(await this.o.protocol.handle(w, frame, stopping));
      }
    } finally {
      await this.detach(w, why);
    }
  }

  private async detach(w: W, why: string): Promise<void> {
    if (w.gone !== null) return;
    w.gone = why;
    this.workers.delete(w.label);
    if (!this.ledger.leaveBeforeStop(w.label)) this.ledger.gone(w.label, why);
    await this.o.protocol.detach(w, why);
    this.o.log(`worker ${w.label} left (${why})`);
    w.conn.close();
  }
}
