// The master join of an explore campaign with several masters, as pure state machines (h11's
// standard, like core/worker-session.ts). Events in: a frame arrived, a wait ran out, the peer
// went away or broke the framing. Actions out: frames to send, the next wait with its deadline,
// a refusal, a seat taken, a roster, a frame to deliver, a failure or a loss with its reason.
// The sockets, the clock, the nonce file and the logs stay with the caller
// (explore/fleet/peers.ts); so do the wire schemas, passed in as pure checks. The token, version
// and nonce checks are the worker session's (core/handshake-checks.ts). The root's seats and roster
// are join-roster.ts; the link both sides keep after the roster is master-link.ts.
//
// Root, one RootAdmission per submaster connection (the worker session checked its token and
// handed it over):
//   new --peer_hello: other protocol | other setup | no seat left--> closed (refused)
//   new --peer_hello--> proving [challenge]
//   proving --prove: the nonce read back, a seat left--> seated [rank]
//   proving --wrong nonce | bad frame | no seat left | deadline | peer gone--> closed (refused)
//
// Submaster (SubmasterJoin):
//   new --start--> greeting [peer_hello]
//   greeting --challenge--> awaiting-roster [prove]
//   awaiting-roster --roster--> joined
//   greeting | awaiting-roster --refuse | unexpected frame | deadline | peer gone--> failed
import assert from "node:assert/strict";
import { MASTER_JOINS, nonceMismatch, noFrameWithin, protocolMismatch, refusalReason } from "./handshake-checks.ts";
import type { RosterFrame, Seats } from "./join-roster.ts";
import type { Checked, ProveView } from "./worker-session.ts";

/** What the root reads of a submaster's first frame (its token was checked before). */
export type PeerHelloView = {
  type: "peer_hello";
  protocol: number;
  host: string;
  setup: string;
  setup_text: string;
  /** The rank this submaster asks for (its launcher rank); absent or null: the lowest free one. */
  rank?: number | null;
};
/** The root asks a submaster only for the nonce: masters need no generator or app. */
export type JoinChallenge = { type: "challenge"; nonce_path: string; identity: null; app_path: null };
type Receive = { kind: "receive"; deadline: number };

// ---- root: one submaster's connection ------------------------------------------------------------

export interface AdmissionRules<Prove> {
  /** The protocol version this root speaks. */
  speaks: number;
  /** The nonce a submaster must read back from the shared corpus directory. */
  nonce: { path: string; value: string };
  /** This root's campaign setup: its hash, and what differs in a submaster's (from its setup_text). */
  setup: { hash: string; differences(theirs: string): string };
  handshakeMs: number;
  validate: { prove(raw: unknown): Checked<Prove> };
}

export type AdmissionAction =
  | { kind: "send"; frame: JoinChallenge }
  | Receive
  /** Send `refuse {reason}` (already printable) and log it (throttled). A close follows. */
  | { kind: "refuse"; reason: string }
  | { kind: "close" }
  /** The submaster holds `rank` now; `line` (printable) says so. It waits for the roster. */
  | { kind: "seated"; rank: number; host: string; line: string };

export type AdmissionState = "new" | "proving" | "seated" | "closed";

export class RootAdmission<Prove extends ProveView> {
  private current: AdmissionState = "new";
  private deadline: number | null = null;
  private host = "";
  private requested: number | null = null;

  constructor(
    private readonly rules: AdmissionRules<Prove>,
    /** The peer's address, for the messages that name it. */
    private readonly peer: string,
    private readonly seats: Seats,
  ) {}

  get state(): AdmissionState {
    return this.current;
  }

  /** The submaster's first frame, validated (its host already printable). */
  hello(h: PeerHelloView, now: number): AdmissionAction[] {
    assert.equal(this.current, "new", `peer_hello while ${this.current}`);
    const otherVersion = protocolMismatch(h.protocol, this.rules.speaks, MASTER_JOINS);
    if (otherVersion !== null) return this.refuse(otherVersion);
    if (h.setup !== this.rules.setup.hash) return this.refuse(`the campaign setup differs — ${this.rules.setup.differences(h.setup_text)}`);
    const requested = h.rank ?? null;
    const noSeat = this.seats.noSeat(requested);
    if (noSeat !== null) return this.refuse(noSeat);
    this.host = h.host;
    this.requested = requested;
    this.current = "proving";
    this.deadline = now + this.rules.handshakeMs;
    return [{ kind: "send", frame: { type: "challenge", nonce_path: this.rules.nonce.path, identity: null, app_path: null } }, { kind: "receive", deadline: this.deadline }];
  }

  frame(raw: unknown, _now: number): AdmissionAction[] {
    this.waited("a frame");
    const checked = this.rules.validate.prove(raw);
    if (!checked.ok) return this.refuse(checked.reason);
    const unread = nonceMismatch(checked.frame, this.rules.nonce, MASTER_JOINS);
    if (unread !== null) return this.refuse(unread);
    const seat = this.seats.take(this.host, this.requested);
    if ("refused" in seat) return this.refuse(seat.refused);
    this.current = "seated";
    return [{ kind: "seated", rank: seat.rank, host: this.host, line: seat.line }];
  }

  /** The wait's timer fired; `now` decides whether its deadline really passed. */
  timeout(now: number): AdmissionAction[] {
    assert.ok(this.deadline !== null, `a timeout while ${this.current}, with no wait`);
    if (now < this.deadline) return [{ kind: "receive", deadline: this.deadline }];
    this.waited("a timeout");
    return this.refuse(noFrameWithin(this.peer, this.rules.handshakeMs));
  }

  closed(message: string): AdmissionAction[] {
    this.waited("a close");
    return this.refuse(message);
  }

  broken(message: string): AdmissionAction[] {
    this.waited("a broken frame");
    return this.refuse(message);
  }

  private refuse(reason: string): AdmissionAction[] {
    this.current = "closed";
    this.deadline = null;
    return [{ kind: "refuse", reason: refusalReason(reason) }, { kind: "close" }];
  }

  private waited(what: string): void {
    assert.ok(this.current === "proving" && this.deadline !== null, `${what} while ${this.current}, with no wait`);
    this.deadline = null;
  }
}

// ---- submaster ---------------------------------------------------------------------------------

/** What the submaster reads of the root's replies; the caller's frames carry more. */
export type JoinReplyView = { type: "challenge" } | { type: "welcome" } | { type: "refuse"; reason: string };
export type RosterView = RosterFrame | { type: "refuse"; reason: string };

export interface SubmasterRules<Reply, Roster> {
  /** How long the root has to answer peer_hello. */
  handshakeMs: number;
  /** How long the roster may take (every master must join first). */
  joinTimeoutMs: number;
  validate: { reply(raw: unknown): Checked<Reply>; roster(raw: unknown): Checked<Roster> };
}

export type JoinAction<Hello, Reply, Roster> =
  | { kind: "send"; frame: Hello }
  /** Read the nonce the challenge names and send the prove (the file system is the caller's). */
  | { kind: "prove"; challenge: Reply & { type: "challenge" } }
  | Receive
  | { kind: "joined"; roster: Roster & { type: "roster" } }
  /** The join failed: drop the connection. `refused`: the root said no (a refusal, not a fault). */
  | { kind: "failed"; refused: boolean; message: string };

export type JoinState = "new" | "greeting" | "awaiting-roster" | "joined" | "failed";

const ROOT = "the root master";

export class SubmasterJoin<Hello, Reply extends JoinReplyView, Roster extends RosterView> {
  private current: JoinState = "new";
  private deadline: number | null = null;

  constructor(private readonly rules: SubmasterRules<Reply, Roster>) {}

  get state(): JoinState {
    return this.current;
  }

  start(hello: Hello, now: number): JoinAction<Hello, Reply, Roster>[] {
    assert.equal(this.current, "new", `start while ${this.current}`);
    this.current = "greeting";
    return [{ kind: "send", frame: hello }, this.wait(now, this.rules.handshakeMs)];
  }

  frame(raw: unknown, now: number): JoinAction<Hello, Reply, Roster>[] {
    this.waited("a frame");
    if (this.current === "greeting") {
      const checked = this.rules.validate.reply(raw);
      if (!checked.ok) return this.fail(`protocol error from ${ROOT}: ${checked.reason}`);
      const reply = checked.frame;
      if (reply.type === "refuse") return this.refused(reply.reason);
      if (reply.type !== "challenge") return this.fail(`unexpected reply '${reply.type}' from ${ROOT}`);
      this.current = "awaiting-roster";
      return [{ kind: "prove", challenge: reply as Reply & { type: "challenge" } }, this.wait(now, this.rules.joinTimeoutMs)];
    }
    const checked = this.rules.validate.roster(raw);
    if (!checked.ok) return this.fail(`protocol error from ${ROOT}: ${checked.reason}`);
    const roster = checked.frame;
    if (roster.type === "refuse") return this.refused(roster.reason);
    this.current = "joined";
    return [{ kind: "joined", roster: roster as Roster & { type: "roster" } }];
  }

  timeout(now: number): JoinAction<Hello, Reply, Roster>[] {
    assert.ok(this.deadline !== null, `a timeout while ${this.current}, with no wait`);
    if (now < this.deadline) return [{ kind: "receive", deadline: this.deadline }];
    this.waited("a timeout");
    if (this.current === "greeting") return this.fail(noFrameWithin(ROOT, this.rules.handshakeMs));
    return this.fail(`${ROOT} sent no roster within ${Math.round(this.rules.joinTimeoutMs / 1000)}s (are all --masters started?)`);
  }

  closed(message: string): JoinAction<Hello, Reply, Roster>[] {
    this.waited("a close");
    return this.fail(`${ROOT} closed the connection during the join (${message})`);
  }

  broken(message: string): JoinAction<Hello, Reply, Roster>[] {
    this.waited("a broken frame");
    return this.fail(`protocol error from ${ROOT}: ${message}`);
  }

  private refused(reason: string): JoinAction<Hello, Reply, Roster>[] {
    this.end();
    return [{ kind: "failed", refused: true, message: `${ROOT} refused this master:\n  ${refusalReason(reason)}` }];
  }

  private fail(message: string): JoinAction<Hello, Reply, Roster>[] {
    this.end();
    return [{ kind: "failed", refused: false, message }];
  }

  private end(): void {
    this.current = "failed";
    this.deadline = null;
  }

  private wait(now: number, ms: number): Receive {
    this.deadline = now + ms;
    return { kind: "receive", deadline: this.deadline };
  }

  private waited(what: string): void {
    assert.ok((this.current === "greeting" || this.current === "awaiting-roster") && this.deadline !== null, `${what} while ${this.current}, with no wait`);
    this.deadline = null;
  }
}
