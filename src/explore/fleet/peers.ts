// The master-to-master control channel of an explore campaign with several masters. Submasters
// dial the root (pull-only, token on the first frame, same wire as workers); the root assigns
// ranks (the one a submaster asks for — its launcher rank — or else the next in join order) and, once all N masters are in, sends every one the roster (epoch, ranks).
// After that both sides send frames whenever they have something to say; each side reads in its
// own loop and treats silence longer than the grace, or a closed connection, as a lost master.
// What each step decides is core/peer-join.ts's machines; this file drives them between the
// sockets, the clock, the nonce file and the log.
//
// Root:        accept peer_hello -> setup must match -> challenge/prove (same shared directory)
//              -> wait (bounded, woken by each join) for N-1 peers -> roster to each -> read loops
// Submaster:   dial (waiting for the root) -> peer_hello -> prove -> wait (bounded) for roster
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { hostname as osHostname } from "node:os";
import { performance } from "node:perf_hooks";
import { z } from "zod";
import { JoinRoster, RejoinSeats, type Seats } from "../../core/join-roster.ts";
import { MasterLink, type LinkAction } from "../../core/master-link.ts";
import { RootAdmission, SubmasterJoin, type AdmissionAction, type AdmissionRules } from "../../core/peer-join.ts";
import { RefusedError, RuntimeFailure } from "../../errors.ts";
import { Connection, FrameTimeout, PeerClosed } from "../../net/connection.ts";
import { encodeFrame, FIRST_FRAME_BYTES } from "../../net/frame.ts";
import {
  check,
  FromPeer,
  FromRoot,
  HandshakeReply,
  PROTOCOL_VERSION,
  Prove,
  Refuse,
  Roster,
  type Frame,
  type FromPeerT,
  type FromRootT,
  type PeerHelloFrame,
  type ProveFrame,
} from "../../net/messages.ts";
import { RefusalLog } from "../../net/worker-server.ts";
import { proveIdentity } from "../../config/identity.ts";
import { connectWithWait } from "../../net/dial-wait.ts";
import { WakeablePause } from "../../util/pause.ts";

const HANDSHAKE_MS = 30_000;

/** What every master of one campaign must agree on; its hash travels in peer_hello. */
export interface CampaignSetup {
  corpus_dir: string;
  input_dir: string;
  target: string[];
  /** The target's build (state/target-identity.ts): a submaster that would run another is refused. */
  target_build: string;
  timeout_seconds: number;
  max_idle_seconds: number;
  simulate: boolean;
  max_children: number;
  max_result_bytes: number;
  max_input_bytes: number;
  lease_ttl_seconds: number;
  ownership: string;
}

export function setupText(s: CampaignSetup): string {
  return JSON.stringify(s, Object.keys(s).sort());
}

export function setupHash(s: CampaignSetup): string {
  return createHash("sha256").update(setupText(s)).digest("hex");
}

/** The keys whose values differ, with both values, for a refusal that says what to fix. */
function setupDifferences(mine: CampaignSetup, theirsText: string): string {
  if (theirsText === "") return `this master's setup is too long to travel in its first frame: compare the two command lines`;
  let theirs: Record<string, unknown>;
  try {
    theirs = JSON.parse(theirsText) as Record<string, unknown>;
  } catch {
    return "the setup could not be read";
  }
  const diffs: string[] = [];
  for (const [k, v] of Object.entries(mine)) {
    if (JSON.stringify(theirs[k]) !== JSON.stringify(v)) diffs.push(`${k}: root ${JSON.stringify(v)}, this master ${JSON.stringify(theirs[k])}`);
  }
  return diffs.join("; ") || "unknown difference";
}

/**
 * A submaster's first frame. It must fit the root's cap on unauthenticated frames
 * (FIRST_FRAME_BYTES); setup_text only names differences for a refusal, so when the whole setup
 * does not fit it travels empty and the root says so (the hash alone decides).
 */
export function peerHello(token: string, host: string, setup: CampaignSetup, rank: number | null = null): PeerHelloFrame {
  const frame: PeerHelloFrame = { type: "peer_hello", token, protocol: PROTOCOL_VERSION, host, setup: setupHash(setup), setup_text: setupText(setup) };
  if (rank !== null) frame.rank = rank;
  return encodeFrame(frame).length <= FIRST_FRAME_BYTES ? frame : { ...frame, setup_text: "" };
}

export interface PeerLink {
  readonly rank: number;
  readonly host: string;
  readonly conn: Connection;
  lost: string | null;
}

export interface RootHubOptions {
  token: string;
  masters: number;
  setup: CampaignSetup;
  nonce: { path: string; value: string };
  epoch: string;
  /** A peer silent for longer than this is lost. */
  graceMs: number;
  /** The monotonic clock, in ms (performance.now() unless given). */
  now?: () => number;
  log: (line: string) => void;
  onFrame: (peer: PeerLink, frame: FromPeerT) => void;
  onLost: (peer: PeerLink, why: string) => void;
  /**
   * A hub of a master that took over the lost root's role (failover.ts): the campaign's ranks,
   * the submasters expected back, and this master's rank. Each is given its roster as it sits.
   */
  rejoin?: { ranks: number[]; expected: number[]; leader: number };
}

const RosterOrRefuse = z.discriminatedUnion("type", [Roster, Refuse]);

/** The root's side: seats and roster, and one reader per submaster. */
export class RootHub {
  readonly peers: PeerLink[] = [];
  private readonly seats: Seats;
  private readonly rejoin: RejoinSeats | null;
  private readonly rules: AdmissionRules<ProveFrame>;
  private readonly now: () => number;
  /** Wakes start() when a submaster takes a seat. */
  private readonly seated = new WakeablePause();
  /** Wakes nextEvent() when a submaster's frame was delivered or a submaster was lost. */
  private readonly activity = new WakeablePause();
  private readonly refusals: RefusalLog;

  constructor(private readonly o: RootHubOptions) {
    this.now = o.now ?? (() => performance.now());
    this.rejoin = o.rejoin ? new RejoinSeats(o.rejoin.ranks, o.rejoin.expected, o.rejoin.leader, o.epoch) : null;
    this.seats = this.rejoin ?? new JoinRoster(o.masters, o.epoch);
    const setup = setupHash(o.setup);
    this.rules = {
      speaks: PROTOCOL_VERSION,
      nonce: o.nonce,
      setup: { hash: setup, differences: (theirs) => setupDifferences(o.setup, theirs) },
      handshakeMs: HANDSHAKE_MS,
      validate: { prove: (raw) => check(Prove, raw) },
    };
    this.refusals = new RefusalLog(o.log, this.now, (n, sec) => `REFUSED ${n} more master connection(s) within ${sec}s, not logged one by one`);
  }

  get ranks(): number[] {
    return this.rejoin ? this.o.rejoin!.ranks : (this.seats as JoinRoster).ranks;
  }

  /** The submasters expected back after a failover that have not rejoined (none on a root's hub). */
  get absent(): number[] {
    return this.rejoin?.absent ?? [];
  }

  /** After a failover: the wait for the masters expected back is over; a later one is refused. */
  closeRejoin(waitedMs: number): void {
    this.rejoin?.close(waitedMs);
  }

  /** The WorkerServer's onPeer hook: drives one submaster's admission until it is seated or refused. */
  async accept(conn: Connection, hello: PeerHelloFrame): Promise<void> {
    const admission = new RootAdmission(this.rules, conn.remote, this.seats);
    await drive(conn, admission, admission.hello(hello, this.now()), this.now, (a: AdmissionAction) => {
      switch (a.kind) {
        case "send":
          sendQuietly(conn, a.frame);
          return;
        case "refuse":
          this.refusals.write(`REFUSED master ${conn.remote} — ${a.reason}`);
          sendQuietly(conn, { type: "refuse", reason: a.reason });
          return;
        case "close":
          conn.close();
          return;
        case "seated": {
          const peer: PeerLink = { rank: a.rank, host: a.host, conn, lost: null };
          this.peers.push(peer);
          this.o.log(a.line);
          if (this.rejoin) {
            // Rejoined: its roster at once, and from now on it is read like any submaster.
            this.send(peer, this.rejoin.roster(a.rank));
            void this.read(peer);
            this.activity.wake();
          }
          this.seated.wake();
          return;
        }
      }
    });
  }

  /** Waits (bounded, woken by every join) until every submaster joined, then sends the roster and starts reading. */
  async start(joinTimeoutMs: number): Promise<void> {
    assert.equal(this.rejoin, null, "a hub after a failover seats each master as it rejoins");
    const seats = this.seats as JoinRoster;
    let step = seats.open(this.now(), joinTimeoutMs);
    while (step.kind === "wait") {
      await this.seated.pause(Math.max(1, step.deadline - this.now()));
      step = seats.check(this.now());
    }
    if (step.kind === "failed") throw new RuntimeFailure(step.message);
    for (const frame of step.frames) {
      const p = this.peers.find((q) => q.rank === frame.rank)!;
      this.send(p, frame);
      void this.read(p);
    }
  }

  send(peer: PeerLink, frame: Frame): void {
    if (peer.lost) return;
    try {
      peer.conn.send(frame);
    } catch (err) {
      this.lose(peer, (err as Error).message);
    }
  }

  broadcast(frame: Frame, to?: readonly number[]): void {
    for (const p of this.peers) if (!to || to.includes(p.rank)) this.send(p, frame);
  }

  /** Resolves when a submaster's frame was delivered or a submaster was lost (since the last call), or after `ms`. */
  nextEvent(ms: number): Promise<void> {
    return this.activity.pause(ms);
  }

  close(): void {
    for (const p of this.peers) p.conn.close();
    this.refusals.close();
  }

  private async read(peer: PeerLink): Promise<void> {
    if (peer.lost) return;
    const link = new MasterLink(this.o.graceMs, (raw) => check(FromPeer, raw));
    await drive(peer.conn, link, link.start(this.now()), this.now, (a: LinkAction<FromPeerT>) => {
      if (a.kind === "lost") this.lose(peer, a.why);
      else if (a.kind === "deliver" && !peer.lost) {
        this.o.onFrame(peer, a.frame);
        this.activity.wake();
      }
    });
  }

  private lose(peer: PeerLink, why: string): void {
    if (peer.lost) return;
    peer.lost = why;
    peer.conn.destroy();
    this.o.onLost(peer, why);
    this.activity.wake();
  }
}

export interface JoinedRoot {
  conn: Connection;
  epoch: string;
  rank: number;
  ranks: number[];
}

/** The submaster's side of joining: dial (waiting for the root), prove, wait for the roster. */
export async function joinRoot(o: {
  host: string;
  port: number;
  token: string;
  setup: CampaignSetup;
  waitSeconds: number;
  joinTimeoutMs: number;
  signal: AbortSignal;
  log: (line: string) => void;
  /** The rank to ask for (a launcher's); null: whichever is free. */
  rank?: number | null;
}): Promise<JoinedRoot> {
  const conn = await connectWithWait({ ...o, who: "the root master" });
  if (!conn) throw new RuntimeFailure("interrupted while waiting for the root master");
  const now = () => performance.now();
  const join = new SubmasterJoin<PeerHelloFrame, z.infer<typeof HandshakeReply>, z.infer<typeof RosterOrRefuse>>({
    handshakeMs: HANDSHAKE_MS,
    joinTimeoutMs: o.joinTimeoutMs,
    validate: { reply: (raw) => check(HandshakeReply, raw), roster: (raw) => check(RosterOrRefuse, raw) },
  });
  const outcome: { joined?: JoinedRoot; failure?: Error } = {};
  await drive(conn, join, join.start(peerHello(o.token, osHostname(), o.setup, o.rank ?? null), now()), now, (a) => {
    switch (a.kind) {
      case "send":
        sendQuietly(conn, a.frame);
        return;
      case "prove":
        sendQuietly(conn, proveIdentity(a.challenge));
        return;
      case "joined":
        outcome.joined = { conn, epoch: a.roster.epoch, rank: a.roster.rank, ranks: a.roster.ranks };
        return;
      case "failed":
        conn.destroy();
        outcome.failure = a.refused ? new RefusedError(a.message) : new RuntimeFailure(a.message);
        return;
    }
  });
  if (outcome.failure) throw outcome.failure;
  assert.ok(outcome.joined, "the join ended neither joined nor failed");
  return outcome.joined;
}

/** What readRoot brought on each link to the root: a frame delivered, the link lost. */
const fromRoot = new WeakMap<Connection, WakeablePause>();
function rootActivity(conn: Connection): WakeablePause {
  let pause = fromRoot.get(conn);
  if (!pause) fromRoot.set(conn, (pause = new WakeablePause()));
  return pause;
}

/** Reads the root's frames until the connection ends; silence beyond the grace counts as lost. */
export async function readRoot(conn: Connection, graceMs: number, onFrame: (f: FromRootT) => void, onLost: (why: string) => void): Promise<void> {
  const now = () => performance.now();
  const link = new MasterLink(graceMs, (raw) => check(FromRoot, raw));
  const activity = rootActivity(conn);
  await drive(conn, link, link.start(now()), now, (a: LinkAction<FromRootT>) => {
    if (a.kind === "lost") onLost(a.why);
    else if (a.kind === "deliver") onFrame(a.frame);
    activity.wake();
  });
}

/** Resolves when readRoot delivered a frame from `conn` or lost it (since the last call), or after `ms`. */
export function nextFromRoot(conn: Connection, ms: number): Promise<void> {
  return rootActivity(conn).pause(ms);
}

/** A machine that waits for frames: what it makes of the wait's outcome. */
interface Receiving<A> {
  frame(raw: unknown, now: number): A[];
  timeout(now: number): A[];
  closed(message: string): A[];
  broken(message: string): A[];
}

/**
 * Performs a machine's actions in order until it has nothing more to do. A receive is the last
 * action of its batch and the only one awaited; what the machine makes of its outcome is the next
 * batch. Every other action is `perform`'s.
 */
async function drive<A extends { kind: string }>(
  conn: Connection,
  machine: Receiving<A>,
  first: A[],
  now: () => number,
  perform: (a: Exclude<A, { kind: "receive" }>) => void,
): Promise<void> {
  let actions = first;
  while (actions.length > 0) {
    let next: A[] = [];
    for (const a of actions) {
      if (a.kind === "receive") next = await receive(conn, machine, (a as unknown as { deadline: number }).deadline, now);
      else perform(a as Exclude<A, { kind: "receive" }>);
    }
    actions = next;
  }
}

async function receive<A>(conn: Connection, machine: Receiving<A>, deadline: number, now: () => number): Promise<A[]> {
  let raw: unknown;
  try {
    raw = await conn.receiveRaw(Math.max(0, deadline - now()));
  } catch (err) {
    if (err instanceof FrameTimeout) return machine.timeout(now());
    if (err instanceof PeerClosed) return machine.closed(err.message);
    return machine.broken((err as Error).message);
  }
  return machine.frame(raw, now());
}

/** A peer that is gone learns nothing more; the machine's next wait reports it gone. */
function sendQuietly(conn: Connection, frame: Frame): void {
  try {
    conn.send(frame);
  } catch {
    // Every send is followed by a receive (which fails with PeerClosed) or by the close.
  }
}
