// The bounded end-of-campaign stats exchange between masters, as two pure ledgers. Every
// non-root master sends its counters once with a random token and waits for the root's exact
// ACK; the root accepts exactly one valid report per peer, sums them with its own, and ACKs
// every peer only once all have reported. Anything else is quarantined and counted. Messages
// arrive already checked against their wire schema (net/messages.ts); the ledgers decide what a
// well-formed one means. The caller sends, receives and owns the deadline; a peer still silent at
// the deadline is listed as pending and the exchange is incomplete (the campaign fails instead of
// hanging). Each master's executors (local slots, remote workers) are counters of its report like
// the others, so the root's totals count every slot and worker of every master that reported.
import assert from "node:assert/strict";
import { asObject, HEX64, isCount } from "./message-checks.ts";

/** What one master did during the campaign (all non-negative integers). */
export interface MasterStats {
  /** Inputs executed to completion (committed results). */
  observations: number;
  /** Child inputs the target generated. */
  generated: number;
  /** Children that were new to the corpus. */
  interesting: number;
  /** Inputs admitted from outside (seed and input directories). */
  external: number;
  /** Input files that arrived after this master froze discovery: left for a later campaign. */
  late: number;
  /** Its local execution slots (-j). */
  local_slots: number;
  /** The remote workers it served. */
  remote_workers: number;
}

/** stats {rank, token, observations, generated, interesting, external, late, local_slots, remote_workers}, peer to root. */
export interface StatsMessage extends MasterStats {
  rank: number;
  token: string;
}

/** stats_ack {rank, token}, root to peer: echoes the peer's own token. */
export interface StatsAck {
  rank: number;
  token: string;
}

export type StatsClass = "accepted" | "duplicate" | "foreign" | "unowned";

export interface StatsOutcome {
  /** Every peer reported exactly once. */
  complete: boolean;
  /** Complete, or the deadline passed: stop waiting. */
  settled: boolean;
  /** Peer ranks whose report was accepted, ascending. */
  received: number[];
  /** Peer ranks with no accepted report, ascending. */
  pending: number[];
  /** The root's own counters plus every accepted report. */
  totals: MasterStats;
  /** Observations per master rank: the root and every peer that reported. */
  byMaster: Record<number, number>;
  /** Reports refused (naming another rank, duplicate, from a non-peer). */
  quarantined: number;
}

/** The executors of one master: its local slots and the remote workers it served. */
export interface ExecutorCounts {
  local_slots: number;
  remote_workers: number;
}

const TOKEN = HEX64;
const FIELDS = ["observations", "generated", "interesting", "external", "late", "local_slots", "remote_workers"] as const;

export class StatsCollector {
  /** Refused reports by class: `duplicate`, `foreign` (naming another rank than its sender), `unowned`. */
  readonly counters: Record<string, number> = {};
  private readonly rank: number;
  private readonly own: MasterStats;
  private readonly peers: readonly number[];
  private readonly reports = new Map<number, StatsMessage>();

  constructor(opts: { rank: number; own: MasterStats; peers: readonly number[] }) {
    assert.ok(isCount(opts.rank), `rank must be a non-negative integer, got ${opts.rank}`);
    assert.ok(isMasterStats(opts.own), `the root's own stats must be non-negative integers, got ${JSON.stringify(opts.own)}`);
    assert.equal(new Set(opts.peers).size, opts.peers.length, `peer ranks must be unique, got ${opts.peers.join(",")}`);
    for (const p of opts.peers) {
      assert.ok(isCount(p) && p !== opts.rank, `peer rank must be a non-negative integer other than the root's, got ${p}`);
    }
    this.rank = opts.rank;
    this.own = pickStats(opts.own);
    this.peers = [...opts.peers].sort((a, b) => a - b);
  }

  get complete(): boolean {
    return this.reports.size === this.peers.length;
  }

  /**
   * Takes one message from peer `from`. The report that completes the set returns the exact ACK
   * for every peer (its rank and its own token); every other call returns no ACKs.
   */
  onStats(from: number, report: StatsMessage): { class: StatsClass; acks: StatsAck[] } {
    if (!this.peers.includes(from)) return { class: this.quarantine("unowned"), acks: [] };
    if (report.rank !== from) return { class: this.quarantine("foreign"), acks: [] };
    if (this.reports.has(from)) return { class: this.quarantine("duplicate"), acks: [] };
    this.reports.set(from, { rank: report.rank, token: report.token, ...pickStats(report) });
    if (!this.complete) return { class: "accepted", acks: [] };
    return { class: "accepted", acks: this.peers.map((p) => ({ rank: p, token: this.reports.get(p)!.token })) };
  }

  outcome(now: number, deadline: number): StatsOutcome {
    const totals = { ...this.own };
    const byMaster: Record<number, number> = { [this.rank]: this.own.observations };
    const received: number[] = [];
    const pending: number[] = [];
    for (const p of this.peers) {
      const r = this.reports.get(p);
      if (!r) {
        pending.push(p);
        continue;
      }
      received.push(p);
      for (const f of FIELDS) totals[f] += r[f];
      byMaster[p] = r.observations;
    }
    const quarantined = Object.values(this.counters).reduce((a, b) => a + b, 0);
    const complete = pending.length === 0;
    return { complete, settled: complete || now >= deadline, received, pending, totals, byMaster, quarantined };
  }

  private quarantine<C extends StatsClass>(cls: C): C {
    this.counters[cls] = (this.counters[cls] ?? 0) + 1;
    return cls;
  }
}

export type StatsAckClass = "exact" | "duplicate" | "foreign";

export class StatsSender {
  /** Refused ACKs by class: `duplicate`, `foreign` (wrong rank or token). */
  readonly counters: Record<string, number> = {};
  readonly rank: number;
  readonly token: string;
  private acked = false;

  /** `token` is fresh random bytes as 64 lowercase hex; the root echoes it in the ACK. */
  constructor(rank: number, token: string) {
    assert.ok(isCount(rank), `rank must be a non-negative integer, got ${rank}`);
    assert.ok(TOKEN.test(token), `a stats token must be 64 lowercase hex characters, got ${JSON.stringify(token)}`);
    this.rank = rank;
    this.token = token;
  }

  /** The exact ACK arrived. */
  get done(): boolean {
    return this.acked;
  }

  /** The report to send to the root. */
  message(stats: MasterStats): StatsMessage {
    assert.ok(isMasterStats(stats), `stats must be non-negative integers, got ${JSON.stringify(stats)}`);
    return { rank: this.rank, token: this.token, ...pickStats(stats) };
  }

  /** Only {rank: own, token: own} counts; anything else is counted and changes nothing. */
  onAck(ack: StatsAck): StatsAckClass {
    if (ack.rank !== this.rank || ack.token !== this.token) return this.refuse("foreign");
    if (this.acked) return this.refuse("duplicate");
    this.acked = true;
    return "exact";
  }

  outcome(now: number, deadline: number): { complete: boolean; settled: boolean } {
    return { complete: this.acked, settled: this.acked || now >= deadline };
  }

  private refuse<C extends StatsAckClass>(cls: C): C {
    this.counters[cls] = (this.counters[cls] ?? 0) + 1;
    return cls;
  }
}

function isMasterStats(v: unknown): v is MasterStats {
  const o = asObject(v);
  return o !== null && FIELDS.every((f) => isCount(o[f]));
}

function pickStats(s: MasterStats): MasterStats {
  return {
    observations: s.observations,
    generated: s.generated,
    interesting: s.interesting,
    external: s.external,
    late: s.late,
    local_slots: s.local_slots,
    remote_workers: s.remote_workers,
  };
}
