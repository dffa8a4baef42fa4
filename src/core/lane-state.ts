import assert from "node:assert/strict";
import { LAST_SEED, mergeRanges, SEED_LIMIT, subtractRanges, totalSize, type Range } from "./ranges.ts";

/** The columns of a chunk row that recovery needs. */
export interface ChunkRow {
  seedFrom: number;
  seedTo: number;
  /** 'complete' counts as swept; every other status ('running', 'leased', 'reissued', 'aborted:*') does not. */
  status: string;
}

/** A lane's state at one moment, to put back when the transaction that changed it was refused. */
export interface LaneSnapshot {
  readonly cursor: number;
  readonly allocNext: number;
  readonly pending: readonly Range[];
  readonly doneAhead: readonly Range[];
}

/**
 * The low-water-mark cursor of one lane while chunks run in parallel.
 *
 * Invariant, after every public method returns:
 *   - every seed in [baseSeed, cursor) lies in a completed range, so `cursor` is coverage;
 *   - `pending` and `doneAhead` are each merged (sorted, non-empty, neither overlapping nor
 *     adjacent), are disjoint from each other, and lie inside [cursor, allocNext);
 *   - `doneAhead` never contains `cursor` itself (it would have been absorbed);
 *   - baseSeed <= cursor <= allocNext <= SEED_LIMIT, and `cursor` never decreases but through restore():
 *     no seed past LAST_SEED is ever handed out, so every number here is an exact integer.
 *
 * Seeds in [cursor, allocNext) that are in neither list are handed out and not yet completed.
 *
 * Transitions:
 *   take(n)        pending is non-empty -> hand out the front of its lowest range (gaps first);
 *                  otherwise            -> hand out fresh ground at allocNext and advance it,
 *                                          at most up to LAST_SEED. Only while hasWork().
 *   complete(a,b)  the seeds become done: out of pending, into doneAhead, then absorbed into the
 *                  cursor where contiguous. Idempotent; a late completion of a reissued range is fine.
 *   requeue(a,b)   the holder gave the seeds back (lease expired, chunk aborted): the parts not
 *                  already done go back to pending. Only requeue the hand-out being revoked: a
 *                  stale range that was since handed out again would make those seeds pending
 *                  while someone else still holds them.
 *   recover(...)   rebuild from the chunk table at start-up, when nothing is in flight: every seed
 *                  below the highest recorded seed that no complete chunk covers becomes pending.
 *   snapshot() / restore(s)
 *                  undo everything since the snapshot (a store transaction was refused). The one
 *                  transition that may move the cursor back: to where the store still has it.
 */
export class LaneState {
  readonly baseSeed: number;
  cursor: number;
  allocNext: number;
  pending: Range[];
  doneAhead: Range[];

  constructor(baseSeed: number, cursor: number) {
    assert.ok(Number.isSafeInteger(baseSeed), `baseSeed must be an integer, got ${baseSeed}`);
    assert.ok(Number.isSafeInteger(cursor), `cursor must be an integer, got ${cursor}`);
    assert.ok(cursor >= baseSeed, `cursor ${cursor} is below baseSeed ${baseSeed}`);
    assert.ok(baseSeed <= LAST_SEED && cursor <= SEED_LIMIT, `baseSeed ${baseSeed} or cursor ${cursor} is past the seed limit ${SEED_LIMIT}`);
    this.baseSeed = baseSeed;
    this.cursor = cursor;
    this.allocNext = cursor;
    this.pending = [];
    this.doneAhead = [];
  }

  /** Whether take() has anything to hand out: a pending gap, or fresh ground below SEED_LIMIT. */
  hasWork(): boolean {
    return this.pending.length > 0 || this.allocNext < SEED_LIMIT;
  }

  /** Every seed up to LAST_SEED is covered: the lane has nothing left to sweep, ever. */
  exhausted(): boolean {
    return this.cursor >= SEED_LIMIT;
  }

  /**
   * Hands out up to `n` seeds: the front of the lowest pending gap if any (possibly fewer than n),
   * else n fresh seeds, or fewer where the lane reaches LAST_SEED.
   */
  take(n: number): Range {
    assert.ok(Number.isSafeInteger(n) && n >= 1, `take wants a positive integer count, got ${n}`);
    assert.ok(this.hasWork(), `take from a lane with nothing left below the seed limit ${SEED_LIMIT}`);
    const gap = this.pending[0];
    if (gap !== undefined) {
      const to = Math.min(gap[1], gap[0] + n - 1);
      if (to === gap[1]) this.pending.shift();
      else this.pending[0] = [to + 1, gap[1]];
      return [gap[0], to];
    }
    const from = this.allocNext;
    // Compared before it is added: allocNext + n may lie past 2^53, where sums are no longer exact.
    const to = n - 1 >= LAST_SEED - from ? LAST_SEED : from + n - 1;
    this.allocNext = to + 1;
    return [from, to];
  }

  /**
   * Records [from, to] as swept and advances the cursor as far as completed ranges are
   * contiguous. Returns how many of its seeds were not swept before (a late finisher of a
   * reissued chunk may overlap the chunk that re-swept its range).
   */
  complete(from: number, to: number): number {
    this.assertHandedOut("complete", from, to);
    const fresh = to < this.cursor ? 0 : totalSize(subtractRanges([Math.max(from, this.cursor), to], this.doneAhead));
    this.doneAhead = mergeRanges([...this.doneAhead, [from, to]]);
    this.pending = this.pending.flatMap((gap) => subtractRanges(gap, [[from, to]]));
    this.absorb();
    return fresh;
  }

  /** Returns [from, to] to the queue, minus whatever is already covered or completed. */
  requeue(from: number, to: number): void {
    this.assertHandedOut("requeue", from, to);
    if (to < this.cursor) return;
    const notDone = subtractRanges([Math.max(from, this.cursor), to], this.doneAhead);
    this.pending = mergeRanges([...this.pending, ...notDone]);
  }

  /** Moves completed ranges that touch the cursor into coverage; drops ranges wholly below it. */
  absorb(): void {
    const kept: Range[] = [];
    // doneAhead is sorted by start, so one pass sees every range that can reach the cursor in order.
    for (const [from, to] of mergeRanges(this.doneAhead)) {
      if (to < this.cursor) continue;
      if (from <= this.cursor) this.cursor = to + 1;
      else kept.push([from, to]);
    }
    this.doneAhead = kept;
  }

  snapshot(): LaneSnapshot {
    return { cursor: this.cursor, allocNext: this.allocNext, pending: [...this.pending], doneAhead: [...this.doneAhead] };
  }

  restore(s: LaneSnapshot): void {
    assert.ok(s.cursor >= this.baseSeed && s.cursor <= s.allocNext, `snapshot cursor ${s.cursor} outside [${this.baseSeed}, ${s.allocNext}]`);
    this.cursor = s.cursor;
    this.allocNext = s.allocNext;
    this.pending = [...s.pending];
    this.doneAhead = [...s.doneAhead];
  }

  /** Seeds completed beyond the cursor. Never part of coverage. */
  ahead(): number {
    return totalSize(this.doneAhead);
  }

  /** Seeds waiting to be handed out again before fresh ground. */
  queued(): number {
    return totalSize(this.pending);
  }

  /**
   * Rebuilds a lane from its persisted cursor and every chunk row it ever had (any session, any
   * status). Seeds below the highest recorded seed that no complete chunk covers — in-flight,
   * reissued or aborted chunks of a dead coordinator, and any gap — become pending.
   */
  static recover(baseSeed: number, cursor: number, chunks: readonly ChunkRow[]): LaneState {
    const state = new LaneState(baseSeed, cursor);
    if (chunks.length === 0) return state;
    let highest = cursor - 1;
    const done: Range[] = [];
    for (const chunk of chunks) {
      // The store repairs such rows before lanes are rebuilt (store/chunks.ts, repairChunkRanges).
      assert.ok(validSeedRange(chunk.seedFrom, chunk.seedTo), `chunk row has an invalid seed range [${chunk.seedFrom}, ${chunk.seedTo}]`);
      if (chunk.seedTo < cursor) continue;
      highest = Math.max(highest, chunk.seedTo);
      if (chunk.status === "complete") done.push([chunk.seedFrom, chunk.seedTo]);
    }
    state.allocNext = highest + 1;
    state.doneAhead = mergeRanges(done);
    state.absorb();
    state.pending = subtractRanges([state.cursor, state.allocNext - 1], state.doneAhead);
    return state;
  }

  /** Completing or requeueing seeds that were never handed out cannot happen. */
  private assertHandedOut(action: string, from: number, to: number): void {
    assert.ok(Number.isSafeInteger(from) && Number.isSafeInteger(to), `${action} wants integer seeds, got [${from}, ${to}]`);
    assert.ok(from <= to, `${action} got an empty range [${from}, ${to}]`);
    assert.ok(from >= this.baseSeed, `${action} [${from}, ${to}] starts below baseSeed ${this.baseSeed}`);
    assert.ok(to < this.allocNext, `${action} [${from}, ${to}] reaches past allocNext ${this.allocNext}, which was never handed out`);
  }
}

/** A range the engine could have handed out: exact integers, from <= to, 0 <= from, to <= LAST_SEED. */
export function validSeedRange(from: number, to: number): boolean {
  return Number.isSafeInteger(from) && Number.isSafeInteger(to) && from >= 0 && from <= to && to <= LAST_SEED;
}
