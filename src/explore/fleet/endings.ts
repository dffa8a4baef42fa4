// How an explore campaign decides its frontier is exhausted. The master loop calls step() on
// every turn; an ending returns the reason to stop, or null to go on.
//
// IdleWindow (one master): idle = nothing pending, nothing running, and a fresh rescan found
//   nothing; the campaign ends exactly --max-idle seconds later on the monotonic clock unless
//   work appears.
// RootEnding (several masters, rank 0): the two-phase quiescence commit of core/quiescence.ts
//   — stable fleet-wide idle for --max-idle -> own refresh -> PREPARE -> all YES -> COMMIT ->
//   every exact ACK. Any BUSY aborts; a conflict after COMMIT fails the campaign.
// Follow mode (--follow): the inputs are a live producer's (an AFL++ queue), so an idle frontier is
//   not the end: IdleWindow never ends the campaign and the root never proposes quiescence. The
//   campaign ends by the wall budget or a signal (the master loop's ends).
//   With partitioned shares a lost submaster is dropped from the vote instead: its share is taken
//   over, and a refresh finds it busy until then.
// ParticipantEnding (several masters, rank > 0): publishes idle/busy status, refreshes and votes
//   on PREPARE (freezing discovery after YES), leaves on the exact COMMIT.
import { ParticipantQuiescence } from "../../core/quiescence-participant.ts";
import { RootQuiescence, type Action } from "../../core/quiescence.ts";
import type { Connection } from "../../net/connection.ts";
import type { FromPeerT, FromRootT } from "../../net/messages.ts";
import type { ExploreMaster } from "../master/master.ts";
import type { PeerLink, RootHub } from "./peers.ts";
import { randomToken } from "./tokens.ts";
import { problem, type Problem } from "../../core/problems.ts";

export type EndReason =
  | "idle"
  | "quiescence"
  | "wall budget"
  | "interrupted"
  | "no usable executor"
  | "conflict"
  | "master lost";

export interface Ending {
  step(now: number, found: number): EndReason | null;
  /** Problems that make the campaign fail (exit 70), in order. */
  readonly problems: Problem[];
}

/** The share that carries the root's role: whoever serves it leads the campaign (fleet/failover.ts). */
export const ROLE_SHARE = 0;

/** How often a master says whether it is idle (also its keepalive). */
export const STATUS_INTERVAL_MS = 125;
/** A status is fresh for this long. */
export const STATUS_FRESH_MS = Math.max(1000, 10 * STATUS_INTERVAL_MS);

export class IdleWindow implements Ending {
  readonly problems: Problem[] = [];
  private idleSince: number | null = null;
  private said = false;

  constructor(
    private readonly master: ExploreMaster,
    private readonly maxIdleMs: number,
    private readonly log: (line: string) => void,
    /** --follow: idle is never the end. */
    private readonly follow = false,
  ) {}

  /** Milliseconds until the window closes (Infinity when not idle): the loop sleeps no longer. */
  untilEnd(now: number): number {
    return this.idleSince === null ? Infinity : this.idleSince + this.maxIdleMs - now;
  }

  step(now: number, found: number): EndReason | null {
    if (!this.master.idle || found > 0) {
      this.idleSince = null;
      return null;
    }
    if (this.follow) {
      if (!this.said) this.log("caught up with the inputs; following them (--follow: the campaign ends by --wall-timeout or a signal)");
      this.said = true;
      return null;
    }
    if (this.idleSince === null) {
      // A fresh rescan first: the window starts only when nothing is left anywhere.
      if (this.master.refresh()) return null;
      this.idleSince = now;
      this.log(`no more work in sight — ending in ${this.maxIdleMs / 1000}s unless some appears`);
      return null;
    }
    if (now - this.idleSince >= this.maxIdleMs) {
      // And a fresh rescan last: between two listings an unchanged input directory is not read
      // (admission.ts), and a file rewritten in place meanwhile must not be left behind.
      if (this.master.refresh()) {
        this.idleSince = null;
        return null;
      }
      this.log(`no more inputs after ${((now - this.idleSince) / 1000).toFixed(3)}s (limit ${this.maxIdleMs / 1000}s)`);
      return "idle";
    }
    return null;
  }
}

export interface RootEndingOptions {
  master: ExploreMaster;
  hub: RootHub;
  /** The fleet-wide idle window (--max-idle) before a PREPARE. */
  maxIdleMs: number;
  /** --follow: never propose quiescence. */
  follow?: boolean;
  /** The monotonic clock, in ms. */
  now: () => number;
  log: (line: string) => void;
  /** This master's rank: 0 for the root, another for a master that took over the lost root's role. */
  rank?: number;
  /** The submasters that vote (default: every master seated on the hub). */
  peers?: number[];
}

export class RootEnding implements Ending {
  readonly problems: Problem[] = [];
  private readonly q: RootQuiescence;
  private ended: EndReason | null = null;
  private lastStatus = 0;
  private sequence = 0;
  private readonly master: ExploreMaster;
  private readonly hub: RootHub;
  private readonly now: () => number;
  private readonly log: (line: string) => void;
  private readonly follow: boolean;
  readonly rank: number;

  constructor(o: RootEndingOptions) {
    this.follow = o.follow ?? false;
    this.master = o.master;
    this.hub = o.hub;
    this.now = o.now;
    this.log = o.log;
    this.rank = o.rank ?? 0;
    this.q = new RootQuiescence({ peers: o.peers ?? o.hub.peers.map((p) => p.rank), maxIdleMs: o.maxIdleMs, freshMs: STATUS_FRESH_MS });
  }

  /** The root's quiescence phase while a decision is under way, as the dashboard shows it; null while it only watches. */
  get phase(): string | null {
    const p = this.q.phase;
    return p === "watching" ? null : `quiescence: ${p}`;
  }

  step(now: number, found: number): EndReason | null {
    if (this.ended) return this.ended;
    if (now - this.lastStatus >= STATUS_INTERVAL_MS) {
      // The root's status is its keepalive towards the submasters.
      this.hub.broadcast({ type: "status", rank: this.rank, sequence: ++this.sequence, idle: this.master.idle });
      this.lastStatus = now;
      // The role moves with the share: a leader whose own share was taken over (it stalled past its
      // lease on a file system that dropped its lock) leads no more; its taker does.
      const p = this.master.leaseTable.partition;
      if (p !== null && !p.served.includes(ROLE_SHARE)) {
        this.fail("master lost", `this master no longer serves the share of rank ${ROLE_SHARE}, which carries the root's role: another master took it over and leads the campaign now`);
        return this.ended;
      }
    }
    // Following, the root never counts itself idle, so no quiescence is ever proposed.
    this.apply(this.q.localIdle(!this.follow && this.master.idle && found === 0, now));
    this.apply(this.q.tick(now));
    return this.ended;
  }

  onFrame(peer: PeerLink, f: FromPeerT): void {
    const now = this.now();
    switch (f.type) {
      case "status":
        this.apply(this.q.onStatus(peer.rank, f, now).actions);
        break;
      case "vote": {
        const r = this.q.onVote(peer.rank, f, now);
        if (r.class === "busy") this.log(`master ${peer.rank} voted BUSY: the proposal is aborted`);
        this.apply(r.actions);
        break;
      }
      case "commit_ack":
        this.apply(this.q.onAck(peer.rank, f).actions);
        break;
      case "abandon":
        this.fail("master lost", `master rank ${peer.rank} gave up: ${f.reason}`);
        break;
      case "stats":
        // Statistics arrive after the loop; StatsRound reads them.
        break;
    }
  }

  onLost(peer: PeerLink, why: string): void {
    if (this.ended === "quiescence") return;
    if (this.master.leaseTable.partition !== null) {
      // Its share is taken over once its lease expires (master/recovery.ts); until then a refresh
      // finds the share unserved, so nothing is decided without it.
      this.log(`master rank ${peer.rank} (${peer.host}) was lost: ${why}; its share is taken over once its lease expires`);
      this.apply(this.q.dropPeer(peer.rank, this.now()));
      return;
    }
    this.fail("master lost", `master rank ${peer.rank} (${peer.host}) was lost: ${why}`);
  }

  /** A submaster expected back after a failover that did not rejoin in time: dropped from the vote, as a lost one is. */
  absent(rank: number): void {
    this.log(`master rank ${rank} did not rejoin; its share is taken over once its lease expires`);
    this.apply(this.q.dropPeer(rank, this.now()));
  }

  private apply(actions: Action[]): void {
    for (const a of actions) {
      switch (a.kind) {
        case "refresh": {
          const work = this.master.refresh() || !this.sharesWithPresentMasters();
          const token = randomToken();
          this.apply(this.q.afterRefresh(!work && this.master.idle, this.now(), token));
          break;
        }
        case "prepare":
          // The root is a participant too: from its proposal to the decision it discovers nothing.
          this.master.frozen = true;
          this.log(`the whole fleet has been idle: PREPARE ${a.token.slice(0, 12)} to ${a.to.length} master(s)`);
          this.send(a);
          break;
        case "abort":
          this.master.frozen = false;
          this.send(a);
          break;
        case "commit":
          this.send(a);
          break;
        case "conflict":
          this.fail("conflict", `quiescence conflict: ${a.reason}`);
          break;
        case "committed":
          this.log("global quiescence committed by all masters");
          this.ended = "quiescence";
          break;
      }
    }
  }

  /**
   * Partitioned: every share is served under a live lease by the root or a submaster still
   * connected. A share whose holder was dropped from the vote (lost) must be taken over, or be
   * released and then taken over, before the fleet can be quiescent: until then it is busy.
   */
  private sharesWithPresentMasters(): boolean {
    const p = this.master.leaseTable.partition;
    if (p === null) return true;
    const present = new Set([this.rank, ...this.hub.peers.filter((x) => !x.lost).map((x) => x.rank)]);
    return p.partitions().every((s) => s.live && s.holderRank !== null && present.has(s.holderRank));
  }

  private send(a: Extract<Action, { kind: "prepare" | "abort" | "commit" }>): void {
    const frame = a.kind === "prepare" ? { type: "probe" as const, token: a.token } : { type: a.kind, token: a.token };
    if (a.kind === "commit") this.log(`every master voted YES: COMMIT ${a.token.slice(0, 12)}`);
    this.hub.broadcast(frame, a.to);
  }

  private fail(reason: EndReason, message: string): void {
    this.problems.push(problem("masters", message));
    this.log(message);
    this.ended ??= reason;
  }
}

export class ParticipantEnding implements Ending {
  readonly problems: Problem[] = [];
  private readonly p: ParticipantQuiescence;
  private ended: EndReason | null = null;
  private sequence = 0;
  private lastStatus = 0;
  private lastIdle: boolean | null = null;

  constructor(
    private readonly master: ExploreMaster,
    private readonly root: Connection,
    readonly rank: number,
    private readonly log: (line: string) => void,
    /** The leader's rank: the root's, or that of the master that took over its role. */
    private readonly rootRank = 0,
  ) {
    this.p = new ParticipantQuiescence({ rank, root: rootRank });
  }

  /** Whether it decided the end (quiescence, a conflict, a root that gave up): a lost link then replaces no root. */
  get settled(): boolean {
    return this.ended !== null;
  }

  /** A submaster's part in the quiescence vote, as the dashboard shows it; null while no vote holds it. */
  get phase(): string | null {
    return this.p.left ? "left the campaign" : this.p.frozen ? "frozen (voted YES: a quiescence decision is pending)" : null;
  }

  step(now: number, found: number): EndReason | null {
    if (this.ended) return this.ended;
    const idle = this.master.idle && found === 0;
    if (idle !== this.lastIdle || now - this.lastStatus >= STATUS_INTERVAL_MS) {
      this.send({ type: "status", rank: this.rank, sequence: ++this.sequence, idle });
      this.lastIdle = idle;
      this.lastStatus = now;
    }
    return this.ended;
  }

  onFrame(f: FromRootT): void {
    switch (f.type) {
      case "probe": {
        const r = this.p.onPrepare(this.rootRank, f);
        if (r.class === "ignored") break;
        const idle = r.class === "refresh" ? !this.master.refresh() && this.master.idle : this.master.idle;
        const v = this.p.vote(f.token, idle);
        if (v.frozen) {
          this.master.frozen = true;
          this.log(`PREPARE ${f.token.slice(0, 12)}: voted YES — discovery frozen until the decision`);
        } else {
          this.log(`PREPARE ${f.token.slice(0, 12)}: voted BUSY`);
        }
        this.send({ type: "vote", ...v.reply });
        break;
      }
      case "abort":
        if (this.p.onAbort(this.rootRank, f).unfrozen) {
          this.master.frozen = false;
          this.log(`ABORT ${f.token.slice(0, 12)}: discovery resumed`);
        }
        break;
      case "commit": {
        const r = this.p.onCommit(this.rootRank, f, this.master.idle);
        if (r.reply) this.send({ type: "commit_ack", ...r.reply });
        if (r.leave) {
          this.log("global quiescence committed");
          this.ended = "quiescence";
        } else if (r.reply) {
          this.fail("conflict", `COMMIT ${f.token.slice(0, 12)} refused (not prepared for that token, or busy)`);
        }
        break;
      }
      case "abandon":
        this.fail("master lost", `the root gave up: ${f.reason}`);
        break;
      case "status":
      case "stats_ack":
      case "release":
      case "roster":
      case "refuse":
      case "challenge":
        // stats_ack and release belong to the end of the campaign (StatsRound); the root's
        // status is its keepalive.
        break;
    }
  }

  onLost(why: string): void {
    if (this.ended) return;
    this.fail("master lost", `the root master was lost: ${why}`);
  }

  private send(frame: Parameters<Connection["send"]>[0]): void {
    try {
      this.root.send(frame);
    } catch (err) {
      this.onLost((err as Error).message);
    }
  }

  private fail(reason: EndReason, message: string): void {
    this.problems.push(problem("masters", message));
    this.log(message);
    this.ended ??= reason;
  }
}
