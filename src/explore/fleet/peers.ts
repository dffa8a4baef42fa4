// The master-to-master control channel of an explore campaign with several masters. Submasters
// dial the root (pull-only, token on the first frame, same wire as workers); the root assigns
// ranks in join order and, once all N masters are in, sends every one the roster (epoch, ranks).
// After that both sides send frames whenever they have something to say; each side reads in its
// own loop and treats silence longer than the grace, or a closed connection, as a lost master.
//
// Root:        accept peer_hello -> challenge/prove (same shared directory) -> setup must match
//              -> wait (bounded) for N-1 peers -> roster to each -> read loops
// Submaster:   dial (waiting for the root) -> peer_hello -> prove -> wait (bounded) for roster
import { createHash } from "node:crypto";
import { hostname as osHostname } from "node:os";
import { performance } from "node:perf_hooks";
import { z } from "zod";
import { printable } from "../../core/log-lines.ts";
import { RefusedError, RuntimeFailure } from "../../errors.ts";
import { Connection, FrameTimeout, PeerClosed } from "../../net/connection.ts";
import { encodeFrame, FIRST_FRAME_BYTES } from "../../net/frame.ts";
import {
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
} from "../../net/messages.ts";
import { RefusalLog } from "../../net/worker-server.ts";
import { proveIdentity } from "../../generator/identity.ts";
import { connectWithWait } from "../../net/dial-wait.ts";

const HANDSHAKE_MS = 30_000;

/** What every master of one campaign must agree on; its hash travels in peer_hello. */
export interface CampaignSetup {
  corpus_dir: string;
  input_dir: string;
  target: string[];
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
export function peerHello(token: string, host: string, setup: CampaignSetup): PeerHelloFrame {
  const frame: PeerHelloFrame = { type: "peer_hello", token, protocol: PROTOCOL_VERSION, host, setup: setupHash(setup), setup_text: setupText(setup) };
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
  log: (line: string) => void;
  onFrame: (peer: PeerLink, frame: FromPeerT) => void;
  onLost: (peer: PeerLink, why: string) => void;
}

/** The root's side: ranks, roster, and one reader per submaster. */
export class RootHub {
  readonly peers: PeerLink[] = [];
  private rosterSent = false;
  private waiters: (() => void)[] = [];

  private readonly refusals: RefusalLog;

  constructor(private readonly o: RootHubOptions) {
    this.refusals = new RefusalLog(o.log, () => performance.now(), (n, sec) => `REFUSED ${n} more master connection(s) within ${sec}s, not logged one by one`);
  }

  get ranks(): number[] {
    return Array.from({ length: this.o.masters }, (_, i) => i);
  }

  /** The WorkerServer's onPeer hook. */
  async accept(conn: Connection, hello: PeerHelloFrame): Promise<void> {
    const refuse = (why: string) => {
      const reason = printable(why, { max: 2000 });
      this.refusals.write(`REFUSED master ${conn.remote} — ${reason}`);
      try {
        conn.send({ type: "refuse", reason });
      } catch {
        // gone
      }
      conn.close();
    };
    if (hello.protocol !== PROTOCOL_VERSION) return refuse(`protocol version ${hello.protocol}, this root speaks ${PROTOCOL_VERSION}`);
    if (hello.setup !== setupHash(this.o.setup)) {
      return refuse(`the campaign setup differs — ${setupDifferences(this.o.setup, hello.setup_text)}`);
    }
    if (this.rosterSent || this.peers.length >= this.o.masters - 1) {
      return refuse(`all ${this.o.masters} masters have joined already (start the root with a larger --masters)`);
    }
    conn.send({ type: "challenge", nonce_path: this.o.nonce.path, identity: null, app_path: null });
    let prove;
    try {
      prove = await conn.receive(Prove, HANDSHAKE_MS);
    } catch (err) {
      return refuse((err as Error).message);
    }
    if (prove.nonce !== this.o.nonce.value) {
      return refuse(`the master cannot read the nonce at ${this.o.nonce.path}: every master must mount the corpus directory at the same path`);
    }
    if (this.rosterSent || this.peers.length >= this.o.masters - 1) return refuse("all masters have joined already");
    const host = printable(hello.host, { max: 255 });
    const peer: PeerLink = { rank: this.peers.length + 1, host, conn, lost: null };
    this.peers.push(peer);
    this.o.log(`master ${host} joined as rank ${peer.rank} (${this.peers.length + 1} of ${this.o.masters})`);
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits (bounded) until every submaster joined, then sends the roster and starts reading. */
  async start(joinTimeoutMs: number): Promise<void> {
    const deadline = performance.now() + joinTimeoutMs;
    while (this.peers.length < this.o.masters - 1) {
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new RuntimeFailure(
          `only ${this.peers.length + 1} of ${this.o.masters} masters joined within ${Math.round(joinTimeoutMs / 1000)}s; ` +
            "start the others with --join, or lower --masters",
        );
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 500));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    this.rosterSent = true;
    for (const p of this.peers) {
      p.conn.send({ type: "roster", epoch: this.o.epoch, rank: p.rank, ranks: this.ranks });
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

  close(): void {
    for (const p of this.peers) p.conn.close();
    this.refusals.close();
  }

  private async read(peer: PeerLink): Promise<void> {
    for (;;) {
      let frame: FromPeerT;
      try {
        frame = await peer.conn.receive(FromPeer, this.o.graceMs);
      } catch (err) {
        this.lose(peer, lostReason(err, this.o.graceMs));
        return;
      }
      if (peer.lost) return;
      this.o.onFrame(peer, printableReason(frame));
    }
  }

  private lose(peer: PeerLink, why: string): void {
    if (peer.lost) return;
    peer.lost = why;
    peer.conn.destroy();
    this.o.onLost(peer, why);
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
}): Promise<JoinedRoot> {
  const conn = await connectWithWait(o);
  if (!conn) throw new RuntimeFailure("interrupted while waiting for the root master");
  try {
    const first = await conn.request(peerHello(o.token, osHostname(), o.setup), HandshakeReply, HANDSHAKE_MS);
    if (first.type === "refuse") throw new RefusedError(`the root master refused this master:\n  ${printable(first.reason, { max: 2000 })}`);
    if (first.type !== "challenge") throw new RuntimeFailure(`unexpected reply '${first.type}' from the root master`);
    conn.send(proveIdentity(first));
    const roster = await conn.receive(z.discriminatedUnion("type", [Roster, Refuse]), o.joinTimeoutMs);
    if (roster.type === "refuse") throw new RefusedError(`the root master refused this master:\n  ${printable(roster.reason, { max: 2000 })}`);
    return { conn, epoch: roster.epoch, rank: roster.rank, ranks: roster.ranks };
  } catch (err) {
    conn.destroy();
    if (err instanceof FrameTimeout) throw new RuntimeFailure(`the root master sent no roster within ${Math.round(o.joinTimeoutMs / 1000)}s (are all --masters started?)`);
    throw err;
  }
}

/** Reads the root's frames until the connection ends; silence beyond the grace counts as lost. */
export async function readRoot(conn: Connection, graceMs: number, onFrame: (f: FromRootT) => void, onLost: (why: string) => void): Promise<void> {
  for (;;) {
    let frame: FromRootT;
    try {
      frame = await conn.receive(FromRoot, graceMs);
    } catch (err) {
      onLost(lostReason(err, graceMs));
      return;
    }
    onFrame(printableReason(frame));
  }
}

/** The free text a master sends (an abandon's or a refusal's reason), made printable before anyone logs it. */
function printableReason<F extends FromPeerT | FromRootT>(frame: F): F {
  if (frame.type !== "abandon" && frame.type !== "refuse") return frame;
  return { ...frame, reason: printable(frame.reason, { max: 2000 }) };
}

/** Why a master's link ended, for the report that names it. */
function lostReason(err: unknown, graceMs: number): string {
  if (err instanceof FrameTimeout) return `silent for more than ${Math.round(graceMs / 1000)}s`;
  if (err instanceof PeerClosed) return "connection closed";
  return `protocol error: ${(err as Error).message}`;
}
