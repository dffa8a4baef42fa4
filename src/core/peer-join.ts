// The master join of an explore campaign with several masters, as pure state machines (h11's
// standard, like core/worker-session.ts). Events in: a frame arrived, a wait ran out, the peer
// went away or broke the framing. Actions out: frames to send, the next wait with its deadline,
// a refusal, a seat taken, a roster, a frame to deliver, a failure or a loss with its reason.
// The sockets, the clock, the nonce file and the logs stay with the caller
// (explore/fleet/peers.ts); so do the wire schemas, passed in as pure checks. The token, version
// and nonce checks are the worker session's (core/handshake-checks.ts).
//
// Root, one RootAdmission per submaster connection (the worker session checked its token and
// handed it over):
//   new --peer_hello: other protocol | other setup | no seat left--> closed (refused)
//   new --peer_hello--> proving [challenge]
//   proving --prove: the nonce read back, a seat left--> seated [rank]
//   proving --wrong nonce | bad frame | no seat left | deadline | peer gone--> closed (refused)
// Root, the seats (JoinRoster): a submaster that asks for a rank (a launcher gave it one) gets
// exactly that rank or is refused (not a submaster rank, or taken); one that asks for none gets
// the lowest free rank, so ranks follow join order as before; open --all N-1 seated--> roster (one
// frame per rank; no seat is left after it) | --the deadline--> failed (named count and fix).
//
// Submaster (SubmasterJoin):
//   new --start--> greeting [peer_hello]
//   greeting --challenge--> awaiting-roster [prove]
//   awaiting-roster --roster--> joined
//   greeting | awaiting-roster --refuse | unexpected frame | deadline | peer gone--> failed
//
// Both sides after the roster (MasterLink): linked --frame--> linked [deliver];
//   linked --silence beyond the grace | peer gone | bad frame--> lost (why)
import assert from "node:assert/strict";
import { MASTER_JOINS, nonceMismatch, noFrameWithin, protocolMismatch, refusalReason } from "./handshake-checks.ts";
import { printable } from "./log-lines.ts";
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
export type RosterFrame = { type: "roster"; epoch: string; rank: number; ranks: number[] };

type Receive = { kind: "receive"; deadline: number };

// ---- root: the seats ---------------------------------------------------------------------------

export type RosterStep =
  /** Wait for a seat to be taken (then check() again) or for `deadline`. */
  | { kind: "wait"; deadline: number }
  /** Everyone is in: send each rank its frame. */
  | { kind: "roster"; frames: RosterFrame[] }
  | { kind: "failed"; message: string };

export class JoinRoster {
  /** Rank -> the host that holds it. */
  private readonly seats = new Map<number, string>();
  /** Why no seat is taken any more (the roster is out, the wait failed), or null while seats are open. */
  private closed: string | null = null;
  private deadline: number | null = null;
  private timeoutMs = 0;

  constructor(
    /** Every master of the campaign, the root included. */
    private readonly masters: number,
    private readonly epoch: string,
  ) {
    assert.ok(Number.isInteger(masters) && masters >= 2, `a root has at least one submaster, got ${masters} masters`);
  }

  get ranks(): number[] {
    return Array.from({ length: this.masters }, (_, i) => i);
  }

  /** Why a submaster (asking for `requested`, or for any rank) cannot join now, or null when it may. */
  noSeat(requested: number | null = null): string | null {
    if (this.closed !== null) return this.closed;
    if (this.seats.size >= this.masters - 1) return this.full();
    if (requested === null) return null;
    if (!Number.isInteger(requested) || requested < 1 || requested >= this.masters) {
      return (
        `this master asked for rank ${requested}, which is no submaster rank of a campaign of ${this.masters} masters (1 to ${this.masters - 1}): ` +
        `give the root the same --masters as the launch, or start fewer masters`
      );
    }
    const holder = this.seats.get(requested);
    if (holder !== undefined) return `rank ${requested} is held already (by ${holder}): two masters asked for the same rank; give each launched rank its own`;
    return null;
  }

  /** Seats a submaster whose proof checked out: its rank, and the line that says so. */
  take(host: string, requested: number | null = null): { rank: number; line: string } | { refused: string } {
    const no = this.noSeat(requested);
    if (no !== null) return { refused: no };
    let rank = requested;
    if (rank === null) for (rank = 1; this.seats.has(rank); rank++);
    this.seats.set(rank, host);
    return {
      rank,
      line: `master ${host} joined as rank ${rank}${requested !== null ? " (as asked)" : ""} (${this.seats.size + 1} of ${this.masters})`,
    };
  }

  /** The root starts waiting for its submasters, for at most `timeoutMs`. */
  open(now: number, timeoutMs: number): RosterStep {
    assert.equal(this.deadline, null, "the roster wait opened twice");
    this.deadline = now + timeoutMs;
    this.timeoutMs = timeoutMs;
    return this.check(now);
  }

  /** Where the wait stands: after a seat was taken, or when its deadline came. */
  check(now: number): RosterStep {
    assert.ok(this.deadline !== null, "the roster wait was not opened");
    assert.equal(this.closed, null, "the roster wait is over");
    if (this.seats.size === this.masters - 1) {
      this.closed = this.full();
      return { kind: "roster", frames: this.ranks.slice(1).map((rank) => ({ type: "roster", epoch: this.epoch, rank, ranks: this.ranks })) };
    }
    if (now < this.deadline) return { kind: "wait", deadline: this.deadline };
    this.closed = "the root gave up waiting for its masters";
    return {
      kind: "failed",
      message: `only ${this.seats.size + 1} of ${this.masters} masters joined within ${Math.round(this.timeoutMs / 1000)}s; start the others with --join, or lower --masters`,
    };
  }

  private full(): string {
    return `all ${this.masters} masters have joined already (start the root with a larger --masters)`;
  }
}

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
    private readonly seats: JoinRoster,
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

// ---- both sides, after the roster ----------------------------------------------------------------

export type LinkAction<F> = Receive | { kind: "deliver"; frame: F } | { kind: "lost"; why: string };
export type LinkState = "new" | "linked" | "lost";

/** A master's link to another after the roster: every frame delivered, silence beyond the grace a loss. */
export class MasterLink<F extends { type: string }> {
  private current: LinkState = "new";
  private deadline: number | null = null;

  constructor(
    /** A master silent for longer than this is lost (the statuses every master sends are its keepalive). */
    private readonly graceMs: number,
    private readonly validate: (raw: unknown) => Checked<F>,
  ) {}

  get state(): LinkState {
    return this.current;
  }

  start(now: number): LinkAction<F>[] {
    assert.equal(this.current, "new", `start while ${this.current}`);
    this.current = "linked";
    return [this.wait(now)];
  }

  frame(raw: unknown, now: number): LinkAction<F>[] {
    this.waited("a frame");
    const checked = this.validate(raw);
    if (!checked.ok) return this.lose(`protocol error: ${checked.reason}`);
    return [{ kind: "deliver", frame: printableReason(checked.frame) }, this.wait(now)];
  }

  timeout(now: number): LinkAction<F>[] {
    assert.ok(this.deadline !== null, `a timeout while ${this.current}, with no wait`);
    if (now < this.deadline) return [{ kind: "receive", deadline: this.deadline }];
    this.waited("a timeout");
    return this.lose(`silent for more than ${Math.round(this.graceMs / 1000)}s`);
  }

  closed(_message: string): LinkAction<F>[] {
    this.waited("a close");
    return this.lose("connection closed");
  }

  broken(message: string): LinkAction<F>[] {
    this.waited("a broken frame");
    return this.lose(`protocol error: ${message}`);
  }

  private lose(why: string): LinkAction<F>[] {
    this.current = "lost";
    this.deadline = null;
    return [{ kind: "lost", why }];
  }

  private wait(now: number): Receive {
    this.deadline = now + this.graceMs;
    return { kind: "receive", deadline: this.deadline };
  }

  private waited(what: string): void {
    assert.ok(this.current === "linked" && this.deadline !== null, `${what} while ${this.current}, with no wait`);
    this.deadline = null;
  }
}

/** The free text a master sends (an abandon's or a refusal's reason), made printable before anyone logs it. */
function printableReason<F extends { type: string }>(frame: F): F {
  const reason = (frame as { reason?: unknown }).reason;
  if ((frame.type !== "abandon" && frame.type !== "refuse") || typeof reason !== "string") return frame;
  return { ...frame, reason: printable(reason, { max: 2000 }) };
}
