// The worker port of a sweep coordinator or an explore master: accepts connections, bounds what
// an unauthenticated one may cost, and drives each connection's WorkerSession (core/), the pure
// machine that decides the handshake, the request -> reply loop and the stop. This file is the
// thin driver between the machine and the socket, the clock, the logs and the campaign's
// WorkProtocol (net/work-protocol.ts); it decides nothing about a single connection itself.
//
// Connection: accept (over MAX_AWAITING_AUTH unauthenticated: refuse at once, nothing read)
//             -> the machine's actions until it closes the connection or hands it over
// Stop:       stopAll() gives every attached worker a fresh random token; the machine delivers it
//             as the reply to that worker's next want/heartbeat and counts only an exact
//             stop_ack; the wait ends when the ledger settles (woken by every worker that leaves,
//             an exact ACK included) or at the grace's deadline.
//
// Memory: until its token is checked a connection holds at most one first frame (at most
// FIRST_FRAME_BYTES, whole within FIRST_FRAME_MS), and at most MAX_AWAITING_AUTH such connections
// exist; after it, frame bodies are read under the server's ReadBudget (a connection waits, it
// does not fail). Every outside string reaches the log through printable(), and refusal lines are
// throttled (RefusalLog).
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { StopLedger, type StopOutcome } from "../core/lifecycle.ts";
import { printable } from "../core/log-lines.ts";
import { WorkerSession, type Answer, type Question, type SessionAction, type SessionRules } from "../core/worker-session.ts";
import { Connection, FrameTimeout, PeerClosed, ReadBudget } from "./connection.ts";
import { encodeFrame, FIRST_FRAME_BYTES } from "./frame.ts";
import { check, FirstFrame, PROTOCOL_VERSION, Prove, WorkerFrame, WorkerFrameOrPut, type FirstFrameT, type Frame, type PeerHelloFrame, type ProveFrame, type WorkerFrameOrPutT } from "./messages.ts";
import { RefusalLog, REFUSALS_SHOWN } from "./refusal-log.ts";
import type { AttachedWorker, ReadService, WorkProtocol } from "./work-protocol.ts";
import { randomHex } from "../util/random-hex.ts";

export { RefusalLog, REFUSALS_SHOWN, REFUSAL_WINDOW_MS } from "./refusal-log.ts";
export type { AttachedWorker, ReadReply, ReadService, WorkProtocol, WorkRequest } from "./work-protocol.ts";

/** The whole first frame must arrive within this long after the connection is accepted. */
export const FIRST_FRAME_MS = 5_000;
const HANDSHAKE_MS = 30_000;
/** Connections whose token is not checked yet (refused ones until they are closed); more are refused at accept. */
export const MAX_AWAITING_AUTH = 64;
/** What the frame bodies being read by one server's authenticated connections may hold in total. */
export const READ_BUDGET_BYTES = 32 << 20;
/** How long a socket refused at accept is kept for its refusal to be read. */
const ACCEPT_REFUSAL_LINGER_MS = 2_000;
/** Slots one worker may hold at once (its -j is where parallelism belongs). */
export const MAX_SLOTS = 8;
const ENDING = "this campaign is ending; start the worker for the next one";

export interface WorkerServerOptions<W extends AttachedWorker> {
  token: string;
  protocol: WorkProtocol<W>;
  nonce: { path: string; value: string };
  read: ReadService;
  /** The lease workers renew; one silent for two leases (and at least a minute) is dropped. */
  leaseSeconds: number;
  /** Overrides that idle limit (ms); for tests, which cannot wait a minute. */
  idleMs?: number;
  now: () => number;
  log: (line: string) => void;
  /** Handles a submaster's connection (explore roots only); without it, masters are refused. */
  onPeer?: (conn: Connection, hello: PeerHelloFrame) => Promise<void>;
}

type Session = WorkerSession<FirstFrameT, ProveFrame, WorkerFrameOrPutT, Frame>;
type Action = SessionAction<FirstFrameT, ProveFrame, WorkerFrameOrPutT, Frame>;

/** One connection being driven: its socket side, its machine, and the worker once admitted. */
interface Link<W> {
  conn: Connection;
  session: Session;
  worker: W | null;
  authenticated: () => void;
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
  private readonly rules: SessionRules<FirstFrameT, ProveFrame, WorkerFrameOrPutT>;
  /** Wakes stopAll() to look at the ledger again. */
  private stopWake: (() => void) | null = null;

  constructor(private readonly o: WorkerServerOptions<W>) {
    this.rules = {
      token: o.token,
      speaks: PROTOCOL_VERSION,
      acceptsPeers: o.onPeer !== undefined,
      nonce: o.nonce,
      takesTransfer: o.protocol.takesTransfer === true,
      maxSlots: MAX_SLOTS,
      firstFrameMs: FIRST_FRAME_MS,
      handshakeMs: HANDSHAKE_MS,
      idleMs: o.idleMs ?? Math.max(o.leaseSeconds * 2, 60) * 1000,
      validate: {
        first: (raw) => check(FirstFrame, raw),
        prove: (raw) => check(Prove, raw),
        // A campaign that takes no files does not know `put`: it is an unknown frame type there.
        work: o.protocol.takesTransfer === true ? (raw) => check(WorkerFrameOrPut, raw) : (raw) => check(WorkerFrame, raw),
      },
    };
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
    const deadline = this.o.now() + graceMs;
    this.ledger.setDeadline(deadline);
    for (;;) {
      const outcome = this.ledger.outcome(this.o.now());
      if (outcome.settled) return outcome;
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          clearTimeout(timer);
          this.stopWake = null;
          resolve();
        };
        // The timer may fire a little early on the injected clock: the ledger decides, and the loop waits on.
        const timer = setTimeout(wake, Math.max(1, deadline - this.o.now()));
        this.stopWake = wake;
      });
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
    const link: Link<W> = { conn, session: new WorkerSession(this.rules, conn.remote, this.ledger), worker: null, authenticated };
    this.drive(link).catch((err) => {
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

  /**
   * Performs the machine's actions in order until it has nothing more to do. A wait (receive,
   * ask) is the last action of its batch; what the machine makes of its outcome is the next batch.
   */
  private async drive(link: Link<W>): Promise<void> {
    let actions = link.session.accepted(this.o.now());
    while (actions.length > 0) {
      let next: Action[] = [];
      for (const a of actions) {
        const done = this.perform(link, a);
        // Only the waits are awaited: the hot path of a request costs no extra turn per action.
        const more = done instanceof Promise ? await done : done;
        if (more) next = more;
      }
      actions = next;
    }
  }

  /** Does one action; a wait returns (a promise of) the machine's next actions. */
  private perform(link: Link<W>, a: Action): Action[] | null | Promise<Action[] | null> {
    const { conn, session } = link;
    switch (a.kind) {
      case "receive":
        return this.receive(link, a.deadline);
      case "ask":
        return this.ask(link, a.question).then((answer) => session.answer(answer, this.o.now()));
      case "send":
        send(conn, a.frame);
        return null;
      case "refuse":
        this.refusals.write(`REFUSED ${conn.remote} — ${a.reason}`);
        send(conn, { type: "refuse", reason: a.reason });
        return null;
      case "authenticated":
        link.authenticated();
        conn.authenticated();
        return null;
      case "log":
        this.o.log(a.line);
        return null;
      case "close":
        if (a.how === "end") conn.close();
        else conn.destroy();
        return null;
      case "hand-over":
        // A master's connection outlives the worker service: closing the workers must not cut it.
        this.sockets.delete(conn.socket);
        this.o.onPeer!(conn, a.hello).catch((err) => {
          this.o.log(`connection from ${conn.remote} ended: ${printable((err as Error).message)}`);
          conn.destroy();
        });
        return null;
      case "detach":
        return this.detach(link.worker!, a.why).then(() => null);
    }
  }

  private async receive(link: Link<W>, deadline: number): Promise<Action[]> {
    let raw: unknown;
    try {
      raw = await link.conn.receiveRaw(Math.max(0, deadline - this.o.now()));
    } catch (err) {
      if (err instanceof FrameTimeout) return link.session.timeout(this.o.now());
      if (err instanceof PeerClosed) return link.session.closed(err.message);
      return link.session.broken((err as Error).message);
    }
    return link.session.frame(raw, this.o.now());
  }

  /** The campaign's answer to the machine's question; a failure is an answer too. */
  private async ask(link: Link<W>, q: Question<FirstFrameT, ProveFrame, WorkerFrameOrPutT>): Promise<Answer<Frame>> {
    const p = this.o.protocol;
    try {
      switch (q.to) {
        case "read": {
          const r = q.request;
          return { to: "read", reply: r.type === "status" ? this.o.read.status(r.json) : this.o.read.failures(r) };
        }
        case "screen": {
          const closed = this.stopping ? ENDING : p.closedToNewWorkers();
          if (closed !== null) return { to: "screen", closed };
          return { to: "screen", challenge: { type: "challenge", nonce_path: this.o.nonce.path, ...p.challenge() } };
        }
        case "proof":
          return { to: "proof", problem: p.checkProof(q.prove, q.files) };
        case "admit": {
          const w = await p.admit(link.conn, q.hello, q.slots, q.files);
          const welcome: Frame = { type: "welcome", worker_id: w.workerId, mode: p.campaign, ...p.welcome(w) };
          link.worker = w;
          this.workers.set(w.label, w);
          this.everyone.push(w);
          return { to: "admit", label: w.label, welcome };
        }
        case "handle": {
          const f = q.frame;
          // The machine passes a put only from a worker admitted without the shared directory, which only a campaign that receives files admits.
          if (f.type === "put") return { to: "handle", reply: await p.receive!(link.worker!, f, q.stopping) };
          if (f.type === "fetch") return { to: "handle", reply: p.fetch ? await p.fetch(link.worker!, f) : { type: "refuse", reason: "this campaign serves no inputs; 'fetch' belongs to explore workers" } };
          return { to: "handle", reply: await p.handle(link.worker!, f, q.stopping) };
        }
      }
    } catch (err) {
      return { to: q.to, failed: (err as Error).message };
    }
  }

  private async detach(w: W, why: string): Promise<void> {
    w.gone = why;
    this.workers.delete(w.label);
    try {
      await this.o.protocol.detach(w, why);
      this.o.log(`worker ${w.label} left (${printable(why)})`);
    } finally {
      // The ledger changed (the worker acknowledged, or left): a stop in progress looks again.
      this.stopWake?.();
    }
  }
}

/** A peer that is gone learns nothing more; the machine's next wait reports it gone. */
function send(conn: Connection, frame: Frame): void {
  try {
    conn.send(frame);
  } catch {
    // Every send is followed by a receive (which fails with PeerClosed) or by the close.
  }
}
