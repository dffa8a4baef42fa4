// The server side of one connection to a coordinator's or explore master's port, as a pure state
// machine (h11's standard). Events in: the connection was accepted, a frame arrived, a wait ran
// out, the peer went away or broke the framing, the campaign answered a question. Actions out:
// frames to send, the next wait with its deadline, a refusal, a close with its reason, a question
// for the campaign, a worker to detach. The socket, the clock, the campaign's booking
// (WorkProtocol) and the logs stay with the caller (net/worker-server.ts); so does validation
// against the wire schemas, passed in as pure functions so that the order of the checks (the
// token before anything else) is decided here.
//
//   awaiting-first --no token | wrong token | invalid frame | deadline--> closed (refused)
//   awaiting-first --peer gone--> closed
//   awaiting-first --status | failures--> answering --reply--> closed
//   awaiting-first --peer_hello--> handed-over (the connection belongs to the peer service now)
//   awaiting-first --hello--> screening --taking workers--> proving --prove, the nonce read back, or
//       no shared directory where the campaign takes files over the connection--> checking-proof
//       --good--> admitting --admitted--> serving
//   screening | proving | checking-proof | admitting --no, or a bad frame, deadline, peer gone-->
//       closed (refused)
//   serving --want | heartbeat while its stop is asked--> serving [stop {token}]
//   serving --want | heartbeat | done | result | put | fetch--> handling --reply--> serving
//   serving --exact stop_ack | bye | wrong stop_ack | bad frame | silence | peer gone--> closed [detach]
//   handling --the campaign failed--> closed [detach]
//
// The worker's place in the tokenised stop is the shared StopLedger's: admission adds it, a
// stop_ack is checked against it, leaving removes it (before its stop) or marks it gone (after).
import assert from "node:assert/strict";
import { nonceMismatch, noFrameWithin, noSharedDirectory, protocolMismatch, refusalReason, tokensEqual, WORKER_JOINS, withPrintableHost } from "./handshake-checks.ts";
import type { StopLedger } from "./lifecycle.ts";
import { printable } from "./log-lines.ts";
import { asObject } from "./message-checks.ts";

/** What the machine reads of a validated first frame; the caller's frames carry more. */
export type FirstFrameView =
  | { type: "hello"; protocol: number; host: string; slots: number }
  | { type: "status" | "failures" }
  | { type: "peer_hello"; host: string };
export type ProveView = { type: "prove"; nonce: string | null; problem: string | null; shared_dir?: boolean };
/** What the machine reads of a validated frame from an admitted worker. */
export type WorkFrameView = { type: "want" | "heartbeat" | "done" | "result" | "put" | "fetch" } | { type: "stop_ack"; token: string } | { type: "bye"; reason: string };
/**
 * Where a worker's units keep their files: in the shared campaign directory, or in a scratch
 * directory of its own, the files then travelling over the connection (docs/distributed.md).
 */
export type WorkerFiles = "shared" | "transfer";

/** How a worker's files reach the campaign, in the words of its coordinator's or master's lines. */
export function filesWords(files: WorkerFiles): string {
  return files === "shared" ? "shared directory" : "over the connection (no shared directory)";
}

export type Checked<F> = { ok: true; frame: F } | { ok: false; reason: string };

export interface SessionRules<First, Prove, Work> {
  /** The campaign token; compared in constant time. */
  token: string;
  /** The protocol version this server speaks. */
  speaks: number;
  /** Whether submasters may join here (an explore root); otherwise peer_hello is refused. */
  acceptsPeers: boolean;
  /** The nonce the worker must read back from the shared directory. */
  nonce: { path: string; value: string };
  /** Whether a worker that does not see the shared directory is taken (its files then travel over the connection). */
  takesTransfer?: boolean;
  /** Slots one worker may hold at once, whatever it asks for. */
  maxSlots: number;
  firstFrameMs: number;
  handshakeMs: number;
  /** An admitted worker silent for this long is dropped. */
  idleMs: number;
  /** The wire schemas, as pure checks. */
  validate: {
    first(raw: unknown): Checked<First>;
    prove(raw: unknown): Checked<Prove>;
    work(raw: unknown): Checked<Work>;
  };
}

/** What the campaign is asked; each is answered with answer(). */
export type Question<First, Prove, Work> =
  | { to: "read"; request: First & { type: "status" | "failures" } }
  /** Whether workers are taken now, and the challenge to send if so. */
  | { to: "screen"; hello: First & { type: "hello" } }
  /** Whether the proof is good enough (the nonce, or its absence, was checked here). */
  | { to: "proof"; prove: Prove; files: WorkerFiles }
  | { to: "admit"; hello: First & { type: "hello" }; slots: number; files: WorkerFiles }
  /** A request or a report; `stopping`: the worker's stop was asked (a report is still booked). */
  | { to: "handle"; frame: Work & { type: "want" | "heartbeat" | "done" | "result" | "put" | "fetch" }; stopping: boolean };

export type Answer<Reply> =
  | { to: "read"; reply: Reply }
  /** `closed`: why no worker is taken now; else the challenge to send. */
  | { to: "screen"; closed: string }
  | { to: "screen"; challenge: Reply }
  | { to: "proof"; problem: string | null }
  /** The worker is admitted under `label` (unique in the campaign); `welcome` is sent. */
  | { to: "admit"; label: string; welcome: Reply }
  | { to: "handle"; reply: Reply }
  /** The campaign could not answer (its store is busy, a bug): the message says why. */
  | { to: "read" | "screen" | "proof" | "admit" | "handle"; failed: string };

export type Outgoing<Reply> = Reply | { type: "bye"; reason: string } | { type: "stop"; token: string };

export type SessionAction<First, Prove, Work, Reply> =
  | { kind: "send"; frame: Outgoing<Reply> }
  /** Wait for the next frame until `deadline` (the caller's clock); then frame() or timeout(). */
  | { kind: "receive"; deadline: number }
  /** The token checked out: lift the first-frame cap; the connection no longer awaits authentication. */
  | { kind: "authenticated" }
  /** Send `refuse {reason}` (already printable) and log it (throttled). A close follows. */
  | { kind: "refuse"; reason: string }
  | { kind: "ask"; question: Question<First, Prove, Work> }
  /** A submaster's connection: the peer service takes it over; this machine is done. */
  | { kind: "hand-over"; hello: First & { type: "peer_hello" } }
  | { kind: "log"; line: string }
  /** `end`: flush and half-close; `destroy`: drop at once. */
  | { kind: "close"; how: "end" | "destroy" }
  /** The admitted worker is gone: the campaign takes its work back (why is the peer's text, unescaped). */
  | { kind: "detach"; why: string };

export type SessionState =
  | "new"
  | "awaiting-first"
  | "answering"
  | "handed-over"
  | "screening"
  | "proving"
  | "checking-proof"
  | "admitting"
  | "serving"
  | "handling"
  | "closed";

// Narrow a validated frame by its type: TypeScript does not narrow a type parameter by a field.
function isFirst<F extends FirstFrameView, T extends FirstFrameView["type"]>(frame: F, ...types: T[]): frame is F & Extract<FirstFrameView, { type: T }> {
  return (types as string[]).includes(frame.type);
}
function isWork<F extends WorkFrameView, T extends WorkFrameView["type"]>(frame: F, ...types: T[]): frame is F & Extract<WorkFrameView, { type: T }> {
  return (types as string[]).includes(frame.type);
}

export class WorkerSession<First extends FirstFrameView, Prove extends ProveView, Work extends WorkFrameView, Reply> {
  private current: SessionState = "new";
  private deadline: number | null = null;
  /** The length of the wait that `deadline` ends, for the refusal that names it. */
  private waitMs = 0;
  private hello: (First & { type: "hello" }) | null = null;
  /** The type of the read request being answered. */
  private reading: string | null = null;
  private label: string | null = null;
  private files: WorkerFiles = "shared";

  constructor(
    private readonly rules: SessionRules<First, Prove, Work>,
    /** The peer's address, for the messages that name it. */
    private readonly peer: string,
    private readonly ledger: StopLedger,
  ) {}

  get state(): SessionState {
    return this.current;
  }

  /** The admitted worker's label, once there is one. */
  get worker(): string | null {
    return this.label;
  }

  accepted(now: number): SessionAction<First, Prove, Work, Reply>[] {
    this.expect("new", "accepted");
    this.current = "awaiting-first";
    return [this.wait(now, this.rules.firstFrameMs)];
  }

  frame(raw: unknown, now: number): SessionAction<First, Prove, Work, Reply>[] {
    this.receivedOne("a frame");
    switch (this.current) {
      case "awaiting-first":
        return this.firstFrame(raw);
      case "proving":
        return this.proof(raw);
      default:
        return this.workFrame(raw, now);
    }
  }

  /** The wait's timer fired; `now` decides whether its deadline really passed. */
  timeout(now: number): SessionAction<First, Prove, Work, Reply>[] {
    assert.ok(this.deadline !== null, `a timeout while ${this.current}, with no wait`);
    if (now < this.deadline) return [{ kind: "receive", deadline: this.deadline }];
    this.receivedOne("a timeout");
    if (this.current === "serving") return this.leave(`silent for ${Math.round(this.rules.idleMs / 1000)}s`);
    return this.refuse(noFrameWithin(this.peer, this.waitMs));
  }

  /** The peer closed the connection (or it failed): `message` says how. */
  closed(message: string): SessionAction<First, Prove, Work, Reply>[] {
    this.receivedOne("a close");
    if (this.current === "awaiting-first") return this.end([{ kind: "close", how: "end" }]);
    if (this.current === "proving") return this.refuse(message);
    return this.leave("connection closed");
  }

  /** The byte stream broke the framing (or the peer's bytes could not be read as a frame). */
  broken(message: string): SessionAction<First, Prove, Work, Reply>[] {
    this.receivedOne("a broken frame");
    if (this.current === "serving") return this.protocolError(message);
    return this.refuse(message);
  }

  answer(a: Answer<Reply>, now: number): SessionAction<First, Prove, Work, Reply>[] {
    const asked: Partial<Record<SessionState, Answer<Reply>["to"]>> = { answering: "read", screening: "screen", "checking-proof": "proof", admitting: "admit", handling: "handle" };
    assert.equal(a.to, asked[this.current], `an answer to '${a.to}' while ${this.current}`);
    if ("failed" in a) return this.campaignFailed(a.to, a.failed);
    switch (a.to) {
      case "read":
        return this.end([{ kind: "send", frame: a.reply }, { kind: "close", how: "end" }]);
      case "screen":
        if ("closed" in a) return this.refuse(a.closed);
        this.current = "proving";
        return [{ kind: "send", frame: a.challenge }, this.wait(now, this.rules.handshakeMs)];
      case "proof":
        if (a.problem !== null) return this.refuse(a.problem);
        this.current = "admitting";
        return [{ kind: "ask", question: { to: "admit", hello: this.hello!, slots: Math.min(this.hello!.slots, this.rules.maxSlots), files: this.files } }];
      case "admit":
        this.label = a.label;
        this.ledger.add(a.label);
        this.current = "serving";
        return [{ kind: "send", frame: a.welcome }, this.wait(now, this.rules.idleMs)];
      case "handle":
        this.current = "serving";
        return [{ kind: "send", frame: a.reply }, this.wait(now, this.rules.idleMs)];
    }
  }

  // ---- the frames of each state --------------------------------------------------------------

  private firstFrame(raw: unknown): SessionAction<First, Prove, Work, Reply>[] {
    const token = asObject(raw)?.token;
    // The token is checked before anything else is looked at, whatever the frame claims to be.
    if (typeof token !== "string" || !tokensEqual(token, this.rules.token)) return this.refuse("bad or missing token");
    const authenticated: SessionAction<First, Prove, Work, Reply> = { kind: "authenticated" };
    const checked = this.rules.validate.first(raw);
    if (!checked.ok) return [authenticated, ...this.refuse(checked.reason)];
    const frame = checked.frame;
    if (isFirst(frame, "status", "failures")) {
      this.current = "answering";
      this.reading = frame.type;
      return [authenticated, { kind: "ask", question: { to: "read", request: frame } }];
    }
    if (isFirst(frame, "peer_hello")) {
      if (!this.rules.acceptsPeers) return [authenticated, ...this.refuse("this process accepts workers, not masters: join the root master (started with --masters N)")];
      this.current = "handed-over";
      return [authenticated, { kind: "hand-over", hello: withPrintableHost(frame) }];
    }
    assert.ok(isFirst(frame, "hello"), `validate.first passed a '${frame.type}' frame`);
    const otherVersion = protocolMismatch(frame.protocol, this.rules.speaks, WORKER_JOINS);
    if (otherVersion !== null) return [authenticated, ...this.refuse(otherVersion)];
    const hello = withPrintableHost(frame);
    this.hello = hello;
    this.current = "screening";
    return [authenticated, { kind: "ask", question: { to: "screen", hello } }];
  }

  private proof(raw: unknown): SessionAction<First, Prove, Work, Reply>[] {
    const checked = this.rules.validate.prove(raw);
    if (!checked.ok) return this.refuse(checked.reason);
    const prove = checked.frame;
    // A worker that says it does not see the shared directory is taken only where its files can
    // travel; one that says it does must have read the very nonce written for this session.
    const shared = prove.shared_dir !== false;
    const unread = shared ? nonceMismatch(prove, this.rules.nonce, WORKER_JOINS) : this.rules.takesTransfer === true ? null : noSharedDirectory(prove, this.rules.nonce, WORKER_JOINS);
    if (unread !== null) return this.refuse(unread);
    this.files = shared ? "shared" : "transfer";
    this.current = "checking-proof";
    return [{ kind: "ask", question: { to: "proof", prove, files: this.files } }];
  }

  private workFrame(raw: unknown, now: number): SessionAction<First, Prove, Work, Reply>[] {
    assert.equal(this.current, "serving", `a frame while ${this.current}`);
    const label = this.label!;
    const checked = this.rules.validate.work(raw);
    if (!checked.ok) return this.protocolError(checked.reason);
    const frame = checked.frame;
    if (isWork(frame, "stop_ack")) {
      const r = this.ledger.ack(label, frame.token);
      if (r === "exact") {
        return this.leave("stopped", [
          { kind: "log", line: `worker ${label} stopped (exact ACK)` },
          { kind: "send", frame: { type: "bye", reason: "stopped" } },
        ]);
      }
      return this.leave("sent a wrong stop_ack", [
        { kind: "log", line: `worker ${label} sent a stop_ack that does not match its stop (${r}) — not counted` },
        this.refusal(`stop_ack not accepted (${r})`),
      ]);
    }
    if (isWork(frame, "bye")) {
      return this.leave(`said goodbye (${printable(frame.reason, { max: 200 })})`, [{ kind: "send", frame: { type: "bye", reason: "goodbye" } }]);
    }
    assert.ok(isWork(frame, "want", "heartbeat", "done", "result", "put", "fetch"), `validate.work passed a '${frame.type}' frame`);
    if ((frame.type === "put" || frame.type === "fetch") && this.files !== "transfer") return this.protocolError(`'${frame.type}' comes only from a worker without the shared directory`);
    const stopping = this.ledger.state(label) === "stopping";
    // Reports are consumed even while stopping; requests for more get the stop instead.
    if (stopping && (frame.type === "want" || frame.type === "heartbeat")) {
      return [{ kind: "send", frame: { type: "stop", token: this.ledger.token(label)! } }, this.wait(now, this.rules.idleMs)];
    }
    this.current = "handling";
    return [{ kind: "ask", question: { to: "handle", frame, stopping } }];
  }

  // ---- endings -------------------------------------------------------------------------------

  private campaignFailed(to: Answer<Reply>["to"], message: string): SessionAction<First, Prove, Work, Reply>[] {
    if (to === "read") return this.refuse(`cannot answer '${this.reading}': ${message}`);
    // The campaign could not take the worker now (its store is busy, say): the worker hears why.
    if (to === "admit") return this.refuse(message);
    const ended: SessionAction<First, Prove, Work, Reply> = { kind: "log", line: `connection from ${this.peer} ended: ${printable(message)}` };
    if (to === "handle") return this.leave("connection closed", [], "destroy", [ended]);
    return this.end([ended, { kind: "close", how: "destroy" }]);
  }

  private protocolError(reason: string): SessionAction<First, Prove, Work, Reply>[] {
    return this.leave(`protocol error: ${reason}`, [this.refusal(reason)]);
  }

  /** Closes an admitted worker's connection after `before`, and detaches it. */
  private leave(
    why: string,
    before: SessionAction<First, Prove, Work, Reply>[] = [],
    how: "end" | "destroy" = "end",
    after: SessionAction<First, Prove, Work, Reply>[] = [],
  ): SessionAction<First, Prove, Work, Reply>[] {
    const label = this.label;
    assert.ok(label !== null, `a worker leaves while ${this.current}, before it was admitted`);
    // Leaving before any stop was asked of it takes a worker out of the shutdown altogether.
    if (!this.ledger.leaveBeforeStop(label)) this.ledger.gone(label, why);
    return this.end([...before, { kind: "close", how }, { kind: "detach", why }, ...after]);
  }

  private refuse(reason: string): SessionAction<First, Prove, Work, Reply>[] {
    assert.equal(this.label, null, "an admitted worker is not refused: it leaves");
    return this.end([this.refusal(reason), { kind: "close", how: "end" }]);
  }

  private refusal(reason: string): SessionAction<First, Prove, Work, Reply> {
    return { kind: "refuse", reason: refusalReason(reason) };
  }

  private end(actions: SessionAction<First, Prove, Work, Reply>[]): SessionAction<First, Prove, Work, Reply>[] {
    this.current = "closed";
    this.deadline = null;
    return actions;
  }

  private wait(now: number, ms: number): SessionAction<First, Prove, Work, Reply> {
    this.deadline = now + ms;
    this.waitMs = ms;
    return { kind: "receive", deadline: this.deadline };
  }

  /** A wait ended (a frame, a timeout, a close): the next one is set by what follows. */
  private receivedOne(what: string): void {
    assert.ok(this.deadline !== null, `${what} while ${this.current}, with no wait`);
    this.deadline = null;
  }

  private expect(state: SessionState, event: string): void {
    assert.equal(this.current, state, `'${event}' while ${this.current}`);
  }
}
