// Two-phase quiescence of a multi-master explore campaign, as two pure state machines: the root
// decides when the whole fleet is out of work, every other master takes part. They consume
// decoded messages and local observations, and return what to send; the caller owns the
// sockets, the clock and the frontier refresh. Messages arrive already checked against their
// wire schema (net/messages.ts, the one check of every frame's shape); what is decided here is
// what a well-formed message means: its sender, its sequence, its token. Fields beyond the ones
// named below (a frame `type`, say) are ignored.
//
// Root (RootQuiescence):
//   watching   --tick: root idle and every peer status fresh and idle for maxIdleMs--> refreshing
//   refreshing --afterRefresh(idle, still globally idle for the window)--> proposing  [PREPARE]
//   refreshing --afterRefresh(busy) | window broken meanwhile--> watching (window restarts)
//   proposing  --BUSY vote | BUSY status | stale/missing status | root busy--> watching [ABORT]
//   proposing  --every peer voted YES and still globally idle--> committing           [COMMIT]
//   committing --every peer ACKed committed=true--> committed                    ["committed"]
//   committing | committed --BUSY status | root busy | rejected ACK--> conflict ["conflict"]
// An ABORT carries the exact token of the cancelled PREPARE and goes to the peers that were
// sent it, once. After COMMIT nothing is ever proposed again.
//
// Participant (ParticipantQuiescence, in quiescence-participant.ts): votes on a PREPARE after
// refreshing its frontier, and leaves on the matching COMMIT.
// While frozen the caller discovers no new work (no input, corpus or lease-recovery scans): the
// YES vote is the linearisation point, and whatever arrives later belongs to a later campaign.
import assert from "node:assert/strict";
import { HEX64 } from "./message-checks.ts";

export type Action =
  | { kind: "prepare"; token: string; to: number[] }
  | { kind: "abort"; token: string; to: number[] }
  | { kind: "commit"; token: string; to: number[] }
  /** Refresh the root's own frontier, then call afterRefresh. */
  | { kind: "refresh" }
  /** Fatal control-plane conflict: the campaign fails (exit 70). */
  | { kind: "conflict"; reason: string }
  /** Every peer acknowledged the commit exactly: leave the scheduling loop. */
  | { kind: "committed" };

export type StatusClass = "current" | "stale" | "foreign" | "unowned" | "conflict";
export type VoteClass = "yes" | "busy" | "stale" | "foreign" | "unowned";
export type AckClass = "committed" | "rejected" | "stale" | "foreign" | "unowned";
export type RootPhase = "watching" | "refreshing" | "proposing" | "committing" | "committed" | "conflict";

/** status {rank, sequence, idle}: sequence starts at 1 and strictly increases per sender. */
export interface StatusMessage {
  rank: number;
  sequence: number;
  idle: boolean;
}
/** vote {rank, token, idle}: the answer to a PREPARE. */
export interface VoteMessage {
  rank: number;
  token: string;
  idle: boolean;
}
/** commit_ack {rank, token, committed}. */
export interface CommitAckMessage {
  rank: number;
  token: string;
  committed: boolean;
}
/** prepare / abort / commit {token}, root to participant. */
export interface DecisionMessage {
  token: string;
}

const TOKEN = HEX64;

export function isQuiescenceToken(value: unknown): value is string {
  return typeof value === "string" && TOKEN.test(value);
}

interface PeerStatus {
  sequence: number;
  idle: boolean;
  receivedAt: number;
}

interface Round {
  token: string;
  to: number[];
  /** Peers that voted YES (proposal) or ACKed committed=true (decision). */
  answered: Set<number>;
}

export class RootQuiescence {
  /** Ignored messages, keyed `<message>.<class>` (e.g. `status.stale`, `vote.unowned`). */
  readonly counters: Record<string, number> = {};
  private peers: readonly number[];
  private peerSet: ReadonlySet<number>;
  private readonly maxIdleMs: number;
  private readonly freshMs: number;
  private readonly statuses = new Map<number, PeerStatus>();
  private local = false;
  /** Start of the current stretch of global idleness; null while not globally idle. */
  private idleSince: number | null = null;
  private refreshing = false;
  private proposal: Round | null = null;
  private decision: Round | null = null;
  private conflictReason: string | null = null;
  private readonly usedTokens = new Set<string>();

  constructor(opts: { peers: readonly number[]; maxIdleMs: number; freshMs: number }) {
    // No peer at all: a master that took over a lost root's role alone (its peers all dropped),
    // which decides at once once its own window passed, as a root whose peers were all dropped does.
    for (const p of opts.peers) assert.ok(Number.isSafeInteger(p) && p >= 0, `peer rank must be a non-negative integer, got ${p}`);
    assert.equal(new Set(opts.peers).size, opts.peers.length, `peer ranks must be unique, got ${opts.peers.join(",")}`);
    assert.ok(Number.isFinite(opts.maxIdleMs) && opts.maxIdleMs >= 0, `maxIdleMs must be >= 0, got ${opts.maxIdleMs}`);
    assert.ok(Number.isFinite(opts.freshMs) && opts.freshMs > 0, `freshMs must be > 0, got ${opts.freshMs}`);
    this.peers = [...opts.peers].sort((a, b) => a - b);
    this.peerSet = new Set(this.peers);
    this.maxIdleMs = opts.maxIdleMs;
    this.freshMs = opts.freshMs;
  }

  get phase(): RootPhase {
    if (this.conflictReason !== null) return "conflict";
    if (this.decision) return this.decision.answered.size === this.decision.to.length ? "committed" : "committing";
    if (this.proposal) return "proposing";
    return this.refreshing ? "refreshing" : "watching";
  }

  /** The root's own idleness (empty queue, no active work). The root starts busy. */
  localIdle(idle: boolean, now: number): Action[] {
    if (this.conflictReason !== null) return [];
    if (this.decision) return idle ? [] : this.conflict("the root found work after COMMIT was sent");
    this.local = idle;
    return this.reassess(now);
  }

  /** "foreign": the status names another rank than the connection it came on. */
  onStatus(from: number, status: StatusMessage, now: number): { class: StatusClass; actions: Action[] } {
    if (!this.peerSet.has(from)) return { class: this.ignore("status", "unowned"), actions: [] };
    if (status.rank !== from) return { class: this.ignore("status", "foreign"), actions: [] };
    const prev = this.statuses.get(from);
    if (prev && status.sequence <= prev.sequence) return { class: this.ignore("status", "stale"), actions: [] };
    this.statuses.set(from, { sequence: status.sequence, idle: status.idle, receivedAt: now });
    if (this.conflictReason !== null) return { class: "current", actions: [] };
    if (this.decision) {
      if (status.idle) return { class: "current", actions: [] };
      return { class: "conflict", actions: this.conflict(`master ${from} reported busy after COMMIT was sent`) };
    }
    return { class: "current", actions: this.reassess(now) };
  }

  /**
   * Call periodically. Once the fleet has been globally idle for maxIdleMs with nothing open,
   * returns [{kind:"refresh"}]; the caller refreshes its own frontier and calls afterRefresh.
   * Also cancels an open proposal whose peers stopped being fresh and idle.
   */
  tick(now: number): Action[] {
    if (this.conflictReason !== null || this.decision) return [];
    const actions = this.reassess(now);
    if (this.windowElapsed(now) && !this.proposal && !this.refreshing) {
      this.refreshing = true;
      actions.push({ kind: "refresh" });
    }
    return actions;
  }

  /**
   * The root refreshed its frontier after a `refresh` action. Still idle, and the fleet still
   * globally idle for the whole window: PREPARE with `token` (fresh, 64 lowercase hex). Busy:
   * the root counts as busy until localIdle(true) and the window restarts; no token is used.
   */
  afterRefresh(stillIdle: boolean, now: number, token: string): Action[] {
    assert.ok(this.refreshing, "afterRefresh called without a pending refresh");
    this.refreshing = false;
    if (this.conflictReason !== null || this.decision) return [];
    if (!stillIdle) {
      this.local = false;
      return this.reassess(now);
    }
    const actions = this.reassess(now);
    if (!this.windowElapsed(now)) return actions;
    assert.ok(isQuiescenceToken(token), `a PREPARE token must be 64 lowercase hex characters, got ${JSON.stringify(token)}`);
    assert.ok(!this.usedTokens.has(token), "a PREPARE token must never be reused");
    this.usedTokens.add(token);
    if (this.peers.length === 0) {
      // Every peer was dropped (its share taken over): the root alone decides, at once.
      this.decision = { token, to: [], answered: new Set() };
      actions.push({ kind: "commit", token, to: [] }, { kind: "committed" });
      return actions;
    }
    this.proposal = { token, to: [...this.peers], answered: new Set() };
    actions.push({ kind: "prepare", token, to: [...this.peers] });
    return actions;
  }

  onVote(from: number, vote: VoteMessage, now: number): { class: VoteClass; actions: Action[] } {
    if (!this.peerSet.has(from)) return { class: this.ignore("vote", "unowned"), actions: [] };
    if (vote.rank !== from) return { class: this.ignore("vote", "foreign"), actions: [] };
    const proposal = this.proposal;
    if (this.conflictReason !== null || !proposal || vote.token !== proposal.token) {
      return { class: this.ignore("vote", "stale"), actions: [] };
    }
    if (!vote.idle) {
      this.idleSince = null;
      return { class: "busy", actions: this.cancelProposal() };
    }
    proposal.answered.add(from);
    if (proposal.answered.size < proposal.to.length) return { class: "yes", actions: [] };
    if (!this.globallyIdle(now)) return { class: "yes", actions: this.reassess(now) };
    this.proposal = null;
    this.decision = { token: proposal.token, to: proposal.to, answered: new Set() };
    return { class: "yes", actions: [{ kind: "commit", token: proposal.token, to: [...proposal.to] }] };
  }

  /**
   * A peer is gone for good and its share is (or will be) served by another master, so it takes
   * no part any more. Before COMMIT an open proposal is aborted (to those it went to) and the
   * idle window restarts; after COMMIT the decision no longer waits for its ACK.
   */
  dropPeer(rank: number, now: number): Action[] {
    if (!this.peerSet.has(rank)) return [];
    this.peers = this.peers.filter((p) => p !== rank);
    this.peerSet = new Set(this.peers);
    this.statuses.delete(rank);
    if (this.conflictReason !== null) return [];
    const decision = this.decision;
    if (decision) {
      decision.to = decision.to.filter((p) => p !== rank);
      decision.answered.delete(rank);
      return decision.answered.size === decision.to.length ? [{ kind: "committed" }] : [];
    }
    const actions = this.cancelProposal();
    this.idleSince = null;
    return [...actions, ...this.reassess(now)];
  }

  onAck(from: number, ack: CommitAckMessage): { class: AckClass; actions: Action[] } {
    if (!this.peerSet.has(from)) return { class: this.ignore("ack", "unowned"), actions: [] };
    if (ack.rank !== from) return { class: this.ignore("ack", "foreign"), actions: [] };
    const decision = this.decision;
    if (!decision || ack.token !== decision.token || decision.answered.has(from)) {
      return { class: this.ignore("ack", "stale"), actions: [] };
    }
    if (!ack.committed) {
      return { class: "rejected", actions: this.conflict(`master ${from} rejected the COMMIT`) };
    }
    decision.answered.add(from);
    const done = decision.answered.size === decision.to.length && this.conflictReason === null;
    return { class: "committed", actions: done ? [{ kind: "committed" }] : [] };
  }

  private globallyIdle(now: number): boolean {
    if (!this.local) return false;
    return this.peers.every((p) => {
      const s = this.statuses.get(p);
      return s !== undefined && s.idle && now - s.receivedAt <= this.freshMs;
    });
  }

  private windowElapsed(now: number): boolean {
    return this.idleSince !== null && now - this.idleSince >= this.maxIdleMs;
  }

  /** Starts or breaks the idle window; breaking it cancels an open proposal. */
  private reassess(now: number): Action[] {
    assert.equal(this.decision, null, "no reassessment after COMMIT");
    if (this.globallyIdle(now)) {
      this.idleSince ??= now;
      return [];
    }
    this.idleSince = null;
    return this.cancelProposal();
  }

  private cancelProposal(): Action[] {
    const p = this.proposal;
    if (!p) return [];
    this.proposal = null;
    return [{ kind: "abort", token: p.token, to: [...p.to] }];
  }

  private conflict(reason: string): Action[] {
    if (this.conflictReason !== null) return [];
    this.conflictReason = reason;
    return [{ kind: "conflict", reason }];
  }

  private ignore<C extends string>(message: string, cls: C): C {
    const key = `${message}.${cls}`;
    this.counters[key] = (this.counters[key] ?? 0) + 1;
    return cls;
  }
}

/** A share of a partitioned fleet as quiescence sees it: who serves it, and whether its lease is live. */
export interface ShareState {
  rank: number;
  holder: string;
  live: boolean;
}

/**
 * Whether a partitioned fleet may count as idle: every share is served by a holder with a live
 * lease that itself reports idle. A share without a holder, or whose lease expired (its master
 * died or stalled and the share waits to be taken over, or is being taken over), is busy: its
 * records may still hold work that only a takeover will find.
 */
export function sharesIdle(shares: readonly ShareState[], idleHolders: ReadonlySet<string>): boolean {
  return shares.every((s) => s.holder !== "" && s.live && idleHolders.has(s.holder));
}
