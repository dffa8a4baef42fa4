// The root master's seats in an explore campaign with several masters, as a pure machine (the
// caller owns the clock; peer-join.ts admits each submaster, this decides its rank). A submaster that asks for a rank (a launcher gave it one) gets
// exactly that rank or is refused (not a submaster rank, or taken); one that asks for none gets
// the lowest free rank, so ranks follow join order as before; open --all N-1 seated--> roster (one
// frame per rank; no seat is left after it) | --the deadline--> failed (named count and fix).
import assert from "node:assert/strict";

export type RosterFrame = { type: "roster"; epoch: string; rank: number; ranks: number[] };

/** What a root's admission asks of its seats (JoinRoster at the start, RejoinSeats after a failover). */
export interface Seats {
  /** Why a submaster (asking for `requested`, or for any rank) cannot join now, or null when it may. */
  noSeat(requested: number | null): string | null;
  /** Seats a submaster whose proof checked out: its rank, and the line that says so. */
  take(host: string, requested: number | null): { rank: number; line: string } | { refused: string };
}

export type RosterStep =
  /** Wait for a seat to be taken (then check() again) or for `deadline`. */
  | { kind: "wait"; deadline: number }
  /** Everyone is in: send each rank its frame. */
  | { kind: "roster"; frames: RosterFrame[] }
  | { kind: "failed"; message: string };

export class JoinRoster implements Seats {
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

/**
 * The seats of a master that took over the lost root's role (explore/fleet/failover.ts): the
 * campaign's ranks are fixed, so only the submasters still expected may sit, each at its own rank,
 * and each gets its roster as soon as it sits (nobody waits for the others: one that never comes
 * is dropped from the vote at the deadline, its share taken over once its lease expires).
 */
export class RejoinSeats implements Seats {
  private readonly seats = new Map<number, string>();
  /** Set once the wait is over: a master that comes later was dropped from the vote already. */
  private closedAfterMs: number | null = null;

  constructor(
    /** Every rank of the campaign. */
    private readonly ranks: readonly number[],
    /** The ranks that may rejoin: the submasters that still served their share. */
    private readonly expected: readonly number[],
    private readonly leader: number,
    private readonly epoch: string,
  ) {
    assert.ok(!expected.includes(leader), `the leader (rank ${leader}) does not rejoin itself`);
  }

  /** The expected ranks no master sat at (yet). */
  get absent(): number[] {
    return this.expected.filter((r) => !this.seats.has(r));
  }

  /** The wait for the expected masters is over (after `waitedMs`): no seat is given any more. */
  close(waitedMs: number): void {
    this.closedAfterMs ??= waitedMs;
  }

  noSeat(requested: number | null): string | null {
    if (this.closedAfterMs !== null) {
      return `the masters expected back had ${Math.round(this.closedAfterMs / 1000)}s to rejoin after the root was lost; this one is too late and was dropped from the vote: it ends, and its share is taken over`;
    }
    if (requested === null) return `rank ${this.leader} leads this campaign since its root was lost: only its masters rejoin, each asking for its own rank`;
    if (!this.expected.includes(requested)) {
      return `rank ${requested} is not expected back (expected: ${this.expected.join(", ") || "none"}): its share was taken over, or it is no rank of this campaign`;
    }
    const holder = this.seats.get(requested);
    if (holder !== undefined) return `rank ${requested} has rejoined already (from ${holder})`;
    return null;
  }

  take(host: string, requested: number | null): { rank: number; line: string } | { refused: string } {
    const no = this.noSeat(requested);
    if (no !== null) return { refused: no };
    const rank = requested!;
    this.seats.set(rank, host);
    return {
      rank,
      line: `master ${host} rejoined as rank ${rank} (${this.seats.size} of ${this.expected.length} expected)`,
    };
  }

  /** The roster of a master that just sat. */
  roster(rank: number): RosterFrame {
    return { type: "roster", epoch: this.epoch, rank, ranks: [...this.ranks] };
  }
}
