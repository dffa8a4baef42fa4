// The participant's half of two-phase quiescence (the protocol and the root's half are in
// quiescence.ts): every master but the root takes part. It answers the root's PREPARE with a vote
// after refreshing its frontier, freezes discovery while its YES stands, and leaves on the
// matching COMMIT:
//   open   --PREPARE t--> refresh the frontier, then vote: idle => accept t, frozen; busy => open
//   frozen --PREPARE t (same)--> vote current idleness, no refresh
//   frozen --ABORT t (exact)--> open
//   frozen --COMMIT t (exact) while locally idle--> left (ACK committed=true)
//   left   --local work appears--> conflict
import assert from "node:assert/strict";
import type { CommitAckMessage, DecisionMessage, VoteMessage } from "./quiescence.ts";

export type PrepareClass = "refresh" | "repeat" | "ignored";

export class ParticipantQuiescence {
  /** Ignored messages, keyed `<message>.<reason>` (e.g. `prepare.foreign`, `commit.rejected`). */
  readonly counters: Record<string, number> = {};
  readonly rank: number;
  readonly root: number;
  /** The token this master voted YES on; set while frozen and after leaving. */
  private accepted: string | null = null;
  /** The token of the PREPARE whose refresh is under way. */
  private requested: string | null = null;
  /** Tokens aborted or superseded before this master voted on them: a late vote never accepts them. */
  private readonly retired = new Set<string>();
  private hasLeft = false;

  constructor(opts: { rank: number; root: number }) {
    assert.ok(Number.isSafeInteger(opts.rank) && opts.rank >= 0, `rank must be a non-negative integer, got ${opts.rank}`);
    assert.ok(Number.isSafeInteger(opts.root) && opts.root >= 0, `root must be a non-negative integer, got ${opts.root}`);
    assert.notEqual(opts.rank, opts.root, "the root does not take part as a participant");
    this.rank = opts.rank;
    this.root = opts.root;
  }

  /** Discovery of new work is suspended: a YES vote is outstanding or the commit happened. */
  get frozen(): boolean {
    return this.accepted !== null;
  }

  /** This master committed and leaves the scheduling loop. */
  get left(): boolean {
    return this.hasLeft;
  }

  /**
   * "refresh": refresh the frontier (inputs, corpus, expired leases), then vote(token, idle).
   * "repeat": the accepted token again; vote(token, idle) with the current idleness, no refresh.
   * "ignored": not from the root, a retired token, a different token while one is
   * accepted, or after the commit; counted.
   */
  onPrepare(from: number, prepare: DecisionMessage): { class: PrepareClass; token?: string } {
    if (from !== this.root) return this.ignorePrepare("unowned");
    if (this.hasLeft) return this.ignorePrepare("after-commit");
    if (this.accepted !== null) {
      if (prepare.token === this.accepted) return { class: "repeat", token: prepare.token };
      return this.ignorePrepare("foreign");
    }
    if (this.retired.has(prepare.token)) return this.ignorePrepare("retired");
    if (this.requested !== null && this.requested !== prepare.token) this.retired.add(this.requested);
    this.requested = prepare.token;
    return { class: "refresh", token: prepare.token };
  }

  /** The answer to a PREPARE that onPrepare passed on. Idle on a live token accepts it and freezes. */
  vote(token: string, idle: boolean): { frozen: boolean; reply: VoteMessage } {
    const known = token === this.accepted || token === this.requested || this.retired.has(token);
    assert.ok(known, "vote on a token that onPrepare never passed on");
    if (token === this.requested) {
      this.requested = null;
      if (idle) this.accepted = token;
    }
    return { frozen: this.frozen, reply: { rank: this.rank, token, idle } };
  }

  /** Only the exact accepted token unfreezes; any other ABORT is idempotent. */
  onAbort(from: number, abort: DecisionMessage): { unfrozen: boolean } {
    if (from !== this.root) return this.ignoreAbort("unowned");
    if (this.hasLeft) return this.ignoreAbort("after-commit");
    if (abort.token === this.requested) this.requested = null;
    this.retired.add(abort.token);
    if (abort.token !== this.accepted) return { unfrozen: false };
    this.accepted = null;
    return { unfrozen: true };
  }

  /**
   * committed = the token is the accepted one and this master is locally idle; the reply is
   * sent either way. A COMMIT from anyone but the root gets no reply.
   */
  onCommit(from: number, commit: DecisionMessage, locallyIdle: boolean): { reply: CommitAckMessage | null; leave: boolean } {
    if (from !== this.root) return this.ignoreCommit("unowned");
    const committed = this.accepted !== null && commit.token === this.accepted && locallyIdle;
    if (committed) this.hasLeft = true;
    else this.count("commit.rejected");
    return { reply: { rank: this.rank, token: commit.token, committed }, leave: committed };
  }

  /** Call when local work appears. After the commit it is a conflict, never a silent success. */
  busyAfterCommit(): { kind: "conflict"; reason: string } | null {
    if (!this.hasLeft) return null;
    return { kind: "conflict", reason: `master ${this.rank} found work after committing quiescence` };
  }

  private ignorePrepare(reason: string): { class: "ignored" } {
    this.count(`prepare.${reason}`);
    return { class: "ignored" };
  }

  private ignoreAbort(reason: string): { unfrozen: false } {
    this.count(`abort.${reason}`);
    return { unfrozen: false };
  }

  private ignoreCommit(reason: string): { reply: null; leave: false } {
    this.count(`commit.${reason}`);
    return { reply: null, leave: false };
  }

  private count(key: string): void {
    this.counters[key] = (this.counters[key] ?? 0) + 1;
  }
}
