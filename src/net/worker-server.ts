// The server side of the worker wire, shared by sweep coordinators and explore masters: token
// check on the first frame, read-only requests, the identity challenge, admission, the strict
// request -> reply loop, and the tokenised stop of every worker. What a worker is *given* and
// what its reports *mean* is the campaign's business (WorkProtocol); everything else is here.
//
// Connection: accept (over MAX_AWAITING_AUTH unauthenticated: refuse at once, nothing read)
//             -> first frame (at most FIRST_FRAME_BYTES, within FIRST_FRAME_MS) -> token
//             -> status|failures -> reply, close
//             -> hello -> challenge -> prove -> admit -> welcome | refuse -> loop
// Stop:       stopAll() gives every attached worker a fresh random token; it is delivered as the
//             reply to that worker's next want/heartbeat; only an exact stop_ack counts; the wait
//             is bounded by the grace; the outcome names who did not acknowledge.
//
// Memory: until its token is checked a connection holds at most one first frame, and at most
// MAX_AWAITING_AUTH such connections exist; after it, frame bodies are read under the server's
// ReadBudget (a connection waits, it does not fail). Every outside string reaches the log through
// printable(), and refusal lines are throttled (RefusalLog).
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { StopLedger, type StopOutcome } from "../core/lifecycle.ts";
import { LineThrottle, printable } from "../core/log-lines.ts";
import { Connection, FrameTimeout, PeerClosed, ReadBudget } from "./connection.ts";
import { encodeFrame, FIRST_FRAME_BYTES } from "./frame.ts";
import {
  check,
  FirstFrame,
  PROTOCOL_VERSION,
  Prove,
  WorkerFrame,
  type ChallengeFrame,
  type CoordinatorReplyT,
  type ExploreSetupT,
  type Frame,
  type FailuresRequestFrame,
  type HelloFrame,
  type PeerHelloFrame,
  type ProveFrame,
  type WorkerFrameT,
} from "./messages.ts";
import { tokensEqual } from "./token.ts";
import { setTimeout as sleep } from "node:timers/promises";
import { randomHex } from "../util/random-hex.ts";

/** The whole first frame must arrive within this long after the connection is accepted. */
export const FIRST_FRAME_MS = 5_000;
const HANDSHAKE_MS = 30_000;
/** Connections whose token is not checked yet (refused ones until they are closed); more are refused at accept. */
export const MAX_AWAITING_AUTH = 64;
/** What the frame bodies being read by one server's authenticated connections may hold in total. */
export const READ_BUDGET_BYTES = 32 << 20;
/** Refusal lines written one by one per window; the rest are counted in one summary line. */
export const REFUSALS_SHOWN = 20;
export const REFUSAL_WINDOW_MS = 10_000;
/** How long a socket refused at accept is kept for its refusal to be read. */
const ACCEPT_REFUSAL_LINGER_MS = 2_000;
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

/**
 * Refusal lines, throttled: the first `perWindow` of each window are written, the rest are
 * counted and summarised when the window closes, so a flood of refused peers costs one line per
 * window instead of one per peer.
 */
export class RefusalLog {
  private readonly throttle: LineThrottle;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly log: (line: string) => void,
    private readonly now: () => number,
    /** The summary line for `n` suppressed lines of one window. */
    private readonly summary: (n: number, windowSeconds: number) => string,
    perWindow = REFUSALS_SHOWN,
    windowMs = REFUSAL_WINDOW_MS,
  ) {
    this.throttle = new LineThrottle(perWindow, windowMs);
  }

  /** `line` must already be printable. */
  write(line: string): void {
    const v = this.throttle.admit(this.now());
    if (v.suppressed > 0) this.log(this.summary(v.suppressed, this.throttle.windowMs / 1000));
    if (v.show) this.log(line);
    else this.armSummary();
  }

  /** Writes the count of the open window now (the log is ending). */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const n = this.throttle.drain();
    if (n > 0) this.log(this.summary(n, this.throttle.windowMs / 1000));
  }

  private armSummary(): void {
    const end = this.throttle.windowEndsAt();
    if (this.timer || end === null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      const n = this.throttle.settle(this.now());
      if (n > 0) this.log(this.summary(n, this.throttle.windowMs / 1000));
      // A timer may fire a little before the window's end on the caller's clock: try again.
      else if (this.throttle.windowEndsAt() !== null) this.armSummary();
    }, Math.max(1, end - this.now()));
    this.timer.unref();
  }
}

const acceptRefusal: Frame = {
  type: "refuse",
  reason: `${MAX_AWAITING_AUTH} connections are awaiting authentication already (the limit); try again in a few seconds`,
};
const ACCEPT_REFUSAL = encodeFrame(acceptRefusal);

export class WorkerServer<W extends AttachedWorker> {
  readonly ledger = new StopLedger();
  readonly workers = new Map<string, W>();
  /** Every worker that was ever admitted, for the summary. */
  readonly everyone: W[] = [];
  /** Connections refused at accept because MAX_AWAITING_AUTH others were awaiting authentication. */
  refusedAtAccept = 0;
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private stopping = false;
  private awaitingAuth = 0;
  private readonly budget = new ReadBudget(READ_BUDGET_BYTES);
  private readonly refusals: RefusalLog;
  private readonly acceptRefusals: RefusalLog;

  private readonly idleLimitMs: number;

  constructor(private readonly o: WorkerServerOptions<W>) {
    this.idleLimitMs = Math.max(o.leaseSeconds * 2, 60) * 1000;
    this.refusals = new RefusalLog(o.log, o.now, (n, s) => `REFUSED ${n} more connection(s) within ${s}s, not logged one by one (the first ${REFUSALS_SHOWN} of every ${s}s are)`);
    this.acceptRefusals = new RefusalLog(
      o.log,
      o.now,
      (n, s) => `REFUSED ${n} more connection(s) at accept within ${s}s: ${MAX_AWAITING_AUTH} connections were awaiting authentication (the limit)`,
      1,
    );
  }

  listen(bind: string, port: number): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      // Paused: a socket refused at accept is never read from; the others read once served.
      const server = createServer({ pauseOnConnect: true }, (socket) => this.accept(socket));
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
      if (this.ledger.mayAssign(label)) this.ledger.begin(label, randomHex(16));
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
    this.refusals.close();
    this.acceptRefusals.close();
  }

  private accept(socket: Socket): void {
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
    if (this.awaitingAuth >= MAX_AWAITING_AUTH) return this.refuseAtAccept(socket);
    this.awaitingAuth++;
    let awaiting = true;
    const authenticated = () => {
      if (!awaiting) return;
      awaiting = false;
      this.awaitingAuth--;
    };
    socket.once("close", authenticated);
    const conn = new Connection(socket, { firstFrameBytes: FIRST_FRAME_BYTES, budget: this.budget });
    this.serve(conn, authenticated).catch((err) => {
      this.o.log(`connection from ${conn.remote} ended: ${printable((err as Error).message)}`);
      conn.destroy();
    });
  }

  /** Nothing is read from the socket: it gets the refusal and is closed. */
  private refuseAtAccept(socket: Socket): void {
    this.refusedAtAccept++;
    socket.on("error", () => undefined);
    const remote = `${socket.remoteAddress ?? "?"}:${socket.remotePort ?? "?"}`;
    this.acceptRefusals.write(`REFUSED ${remote} at accept — ${MAX_AWAITING_AUTH} connections are awaiting authentication (the limit)`);
    socket.end(ACCEPT_REFUSAL);
    setTimeout(() => socket.destroy(), ACCEPT_REFUSAL_LINGER_MS).unref();
  }

  private refuse(conn: Connection, reason: string): void {
    const shown = printable(reason, { max: 2000 });
    this.refusals.write(`REFUSED ${conn.remote} — ${shown}`);
    try {
      conn.send({ type: "refuse", reason: shown });
    } catch {
      // The peer is gone already.
    }
    conn.close();
  }

  /** `authenticated` is called once the token checked out. */
  private async serve(conn: Connection, authenticated: () => void): Promise<void> {
    let raw: unknown;
    try {
      raw = await conn.receiveRaw(FIRST_FRAME_MS);
    } catch (err) {
      if (err instanceof PeerClosed) return conn.close();
      return this.refuse(conn, (err as Error).message);
    }
    const token = (raw as { token?: unknown }).token;
    // The token is checked before anything else is looked at, whatever the frame claims to be.
    if (typeof token !== "string" || !tokensEqual(token, this.o.token)) return this.refuse(conn, "bad or missing token");
    authenticated();
    conn.authenticated();
    const first = check(FirstFrame, raw);
    if (!first.ok) return this.refuse(conn, first.reason);
    const frame = first.frame;
    if (frame.type === "status" || frame.type === "failures") {
      let reply: ReadReply;
      try {
        reply = frame.type === "status" ? this.o.read.status(frame.json) : this.o.read.failures(frame);
      } catch (err) {
        return this.refuse(conn, `cannot answer '${frame.type}': ${(err as Error).message}`);
      }
      conn.send(reply);
      return conn.close();
    }
    // A host name is the peer's text: made printable once here, every later line is safe.
    const host = printable(frame.host, { max: 255 });
    if (frame.type === "peer_hello") {
      if (!this.o.onPeer) return this.refuse(conn, "this process accepts workers, not masters: join the root master (started with --masters N)");
      // A master's connection outlives the worker service: closing the workers must not cut it.
      this.sockets.delete(conn.socket);
      return this.o.onPeer(conn, { ...frame, host });
    }
    await this.handshake(conn, { ...frame, host });
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
    let w: W;
    try {
      w = await p.admit(conn, hello, Math.min(hello.slots, MAX_SLOTS));
    } catch (err) {
      // The campaign could not take the worker now (its store is busy, say): the worker hears why.
      return this.refuse(conn, (err as Error).message);
    }
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
          why = `said goodbye (${printable(frame.reason, { max: 200 })})`;
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
    this.o.log(`worker ${w.label} left (${printable(why)})`);
    w.conn.close();
  }
}
