// A submaster's ending when the root may be lost: the root's role moves with the root's share.
// With partitioned shares (several masters under rendezvous ownership) a lost root is not the end
// of the campaign: its share is taken over once its lease expires (master/recovery.ts), like any
// master's, and whoever takes that share (ROLE_SHARE) takes the role with it. The share's
// takeover is already fenced (one taker, under a new generation), so it doubles as the election:
//
//   following --the link to the leader is lost--> orphaned
//   orphaned  --this master took the role's share--> leading: it listens for the others (on its
//               --port, or on a port of its own at the address it reached the root from),
//               publishes where (state/coordinator-record.ts, under the share's generation), and
//               leads the quiescence vote and the statistics exchange with the masters that rejoin
//   orphaned  --another took it and published where it listens--> joining --roster--> following it
//   orphaned  --nobody took it within the lease time + the join timeout--> the campaign fails
//   leading   --its own role share taken over (it stalled past its lease)--> it stops (RootEnding)
//
// The masters expected back are those still serving their own share when the role was taken; one
// that does not rejoin within the join timeout is dropped from the vote, and its share is busy
// until it is taken over, so quiescence keeps its meaning. Without partitioned shares (broadcast
// ownership) nothing can take the root's share over, and a lost root fails the campaign as before.
import type { Problem } from "../../core/problems.ts";
import { problem } from "../../core/problems.ts";
import type { Connection } from "../../net/connection.ts";
import type { FromPeerT, FromRootT, PeerHelloFrame } from "../../net/messages.ts";
import type { ExploreMaster } from "../master/master.ts";
import { readCoordinator, writeCoordinator } from "../state/coordinator-record.ts";
import { ParticipantEnding, RootEnding, ROLE_SHARE, type Ending, type EndReason } from "./endings.ts";
import { joinRoot, readRoot, RootHub, type CampaignSetup } from "./peers.ts";

/** How often an orphaned master looks whether the role's share was taken, and by whom. */
const ORPHAN_LOOK_MS = 200;

export interface FailoverOptions {
  master: ExploreMaster;
  rank: number;
  /** Every rank of the campaign. */
  ranks: number[];
  epoch: string;
  workDir: string;
  token: string;
  setup: CampaignSetup;
  /** This master's nonce: a master that rejoins it proves it sees the same directory. */
  nonce: { path: string; value: string };
  graceMs: number;
  joinTimeoutMs: number;
  leaseTtlMs: number;
  maxIdleMs: number;
  follow: boolean;
  signal: AbortSignal;
  now: () => number;
  log: (line: string) => void;
  /**
   * Listens for the masters that rejoin this one (its --port, or a new one), each handed to
   * `accept`; resolves with the address the others dial.
   */
  listen: () => Promise<{ host: string; port: number }>;
  /** The link to the leader changed (closed by the command at the end however the campaign ends). */
  setLink: (conn: Connection | null) => void;
  /** This master leads now: its hub (closed by the command at the end however the campaign ends). */
  setHub: (hub: RootHub) => void;
  /** A frame of the end-of-campaign rounds (stats, stats_ack, release), by the rank it came from. */
  onRoundFrame: (rank: number, frame: FromPeerT | FromRootT) => void;
  /** Why the link to the leader was lost, or null once a new one is up. */
  onLinkLost: (why: string | null) => void;
}

type State = "following" | "orphaned" | "joining" | "promoting" | "leading";

export class FailoverEnding implements Ending {
  private state: State = "following";
  private link: Connection | null = null;
  private participant: ParticipantEnding | null = null;
  private leader: RootEnding | null = null;
  private hubOf: RootHub | null = null;
  /** Problems of this ending's own, and of the endings it left behind. */
  private readonly own: Problem[] = [];
  private ended: EndReason | null = null;
  private orphanedAt = 0;
  private lastLook = -Infinity;
  private absentDeadline = Infinity;

  constructor(private readonly o: FailoverOptions) {}

  get problems(): Problem[] {
    return [...this.own, ...(this.participant?.problems ?? []), ...(this.leader?.problems ?? [])];
  }

  /** The hub of the masters that rejoined this one, once it leads (null while it follows). */
  get hub(): RootHub | null {
    return this.state === "leading" ? this.hubOf : null;
  }

  /** The rank of the master this one follows (its own when it leads). */
  leaderRank = 0;

  /** Where this master stands, as the dashboard shows it; null while nothing is under way. */
  get phase(): string | null {
    switch (this.state) {
      case "following":
        return this.participant?.phase ?? null;
      case "leading":
        return this.leader?.phase ?? `leading (took over the root's role)`;
      case "promoting":
        return "taking over the root's role";
      default:
        return `root lost: waiting for the master that takes over its role`;
    }
  }

  /** Follows the leader at the other end of `conn` (the root first). */
  follow(conn: Connection, leaderRank: number): void {
    this.link = conn;
    this.leaderRank = leaderRank;
    this.o.setLink(conn);
    if (this.participant) this.own.push(...this.participant.problems);
    const p = (this.participant = new ParticipantEnding(this.o.master, conn, this.o.rank, this.o.log, leaderRank));
    this.state = "following";
    void readRoot(
      conn,
      this.o.graceMs,
      (f) => {
        if (f.type === "stats_ack" || f.type === "release") this.o.onRoundFrame(leaderRank, f);
        else p.onFrame(f);
      },
      (why) => this.lost(conn, p, why),
    );
  }

  /** The worker server's hook for a master's hello: seated on this master's hub while it leads, refused otherwise. */
  async accept(conn: Connection, hello: PeerHelloFrame): Promise<void> {
    if (this.hubOf !== null) return this.hubOf.accept(conn, hello);
    try {
      conn.send({ type: "refuse", reason: `this is a submaster (rank ${this.o.rank}); masters join the root` });
    } finally {
      conn.close();
    }
  }

  step(now: number, found: number): EndReason | null {
    if (this.ended) return this.ended;
    switch (this.state) {
      case "following":
        return this.participant!.step(now, found);
      case "leading":
        if (now >= this.absentDeadline) {
          // Whoever has not rejoined by now is dropped from the vote, and refused if it comes later:
          // a master outside the vote must not serve its share beside a decided quiescence.
          this.absentDeadline = Infinity;
          this.hubOf!.closeRejoin(this.o.joinTimeoutMs);
          for (const r of this.hubOf!.absent) this.leader!.absent(r);
        }
        return this.leader!.step(now, found);
      case "orphaned":
        if (now - this.lastLook >= ORPHAN_LOOK_MS) {
          this.lastLook = now;
          this.look(now);
        }
        return this.ended;
      default:
        return this.ended;
    }
  }

  private lost(conn: Connection, p: ParticipantEnding, why: string): void {
    if (conn !== this.link) return;
    this.o.onLinkLost(why);
    // Nothing can take the root's share over without partitioned shares; and a link lost once the
    // campaign was decided (or the root gave up) is no root to replace.
    if (this.o.master.leaseTable.partition === null || p.settled) {
      p.onLost(why);
      return;
    }
    this.link = null;
    this.o.setLink(null);
    this.state = "orphaned";
    this.orphanedAt = this.o.now();
    if (this.o.master.frozen) this.o.master.frozen = false;
    this.o.log(`the master leading the campaign (rank ${this.leaderRank}) was lost: ${why}; its role moves with its share — whoever takes that over leads`);
  }

  private look(now: number): void {
    const p = this.o.master.leaseTable.partition!;
    if (p.served.includes(ROLE_SHARE)) {
      this.state = "promoting";
      void this.promote().catch((err: Error) => this.fail(`could not take over the root's role: ${err.message}`));
      return;
    }
    const share = p.partitions().find((s) => s.rank === ROLE_SHARE);
    const { record, problem: bad } = readCoordinator(this.o.workDir);
    if (bad !== null) this.o.log(`ignored: ${bad}`);
    if (record && share && share.live && share.holderRank === record.rank && share.generation === record.generation && record.rank !== this.o.rank) {
      this.state = "joining";
      void this.rejoin(record).catch((err: Error) => {
        this.o.log(`could not rejoin rank ${record.rank} at ${record.host}:${record.port}: ${err.message}; looking again`);
        this.state = "orphaned";
      });
      return;
    }
    const waitMs = this.o.leaseTtlMs + this.o.joinTimeoutMs;
    if (now - this.orphanedAt >= waitMs) {
      this.fail(`the root master was lost and no master took over its role within ${Math.round(waitMs / 1000)}s (the lease time and the join timeout)`);
    }
  }

  private async promote(): Promise<void> {
    const p = this.o.master.leaseTable.partition!;
    const shares = p.partitions();
    const role = shares.find((s) => s.rank === ROLE_SHARE)!;
    // The masters still serving their own share are expected back; the others' shares are taken over.
    const expected = shares.filter((s) => s.rank !== ROLE_SHARE && s.rank !== this.o.rank && s.live && s.holderRank === s.rank).map((s) => s.rank);
    const hub = new RootHub({
      token: this.o.token,
      masters: this.o.ranks.length,
      setup: this.o.setup,
      nonce: this.o.nonce,
      epoch: this.o.epoch,
      graceMs: this.o.graceMs,
      log: this.o.log,
      onFrame: (peer, f) => {
        if (f.type === "stats") this.o.onRoundFrame(peer.rank, f);
        else this.leader?.onFrame(peer, f);
      },
      onLost: (peer, why) => this.leader?.onLost(peer, why),
      rejoin: { ranks: this.o.ranks, expected, leader: this.o.rank },
    });
    this.hubOf = hub;
    this.o.setHub(hub);
    this.leader = new RootEnding({ master: this.o.master, hub, maxIdleMs: this.o.maxIdleMs, follow: this.o.follow, now: this.o.now, log: this.o.log, rank: this.o.rank, peers: expected });
    const at = await this.o.listen();
    writeCoordinator(this.o.workDir, { rank: this.o.rank, generation: role.generation, host: at.host, port: at.port });
    this.leaderRank = this.o.rank;
    this.absentDeadline = this.o.now() + this.o.joinTimeoutMs;
    this.state = "leading";
    this.o.log(
      `took over the root's role with the share of rank ${ROLE_SHARE} (generation ${role.generation}), ` +
        `${((this.o.now() - this.orphanedAt) / 1000).toFixed(3)}s after the loss; leading from ${at.host}:${at.port}` +
        `${expected.length > 0 ? `, expecting rank ${expected.join(", ")} back` : ", alone"}`,
    );
  }

  private async rejoin(record: { rank: number; host: string; port: number }): Promise<void> {
    const joined = await joinRoot({
      host: record.host,
      port: record.port,
      token: this.o.token,
      setup: this.o.setup,
      waitSeconds: 5,
      joinTimeoutMs: this.o.joinTimeoutMs,
      signal: this.o.signal,
      log: this.o.log,
      rank: this.o.rank,
    });
    if (joined.epoch !== this.o.epoch || joined.rank !== this.o.rank) {
      joined.conn.destroy();
      throw new Error(`it answered epoch ${joined.epoch} rank ${joined.rank}, this master is rank ${this.o.rank} of ${this.o.epoch}`);
    }
    this.o.onLinkLost(null);
    this.follow(joined.conn, record.rank);
    this.o.log(`rejoined the campaign under rank ${record.rank}, which took over the root's role, ${((this.o.now() - this.orphanedAt) / 1000).toFixed(3)}s after the loss`);
  }

  private fail(message: string): void {
    this.own.push(problem("masters", message));
    this.o.log(message);
    this.ended ??= "master lost";
  }
}
