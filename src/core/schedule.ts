// Scheduling arithmetic shared by the single-host and distributed sweeps: which lane runs next,
// how many seeds a chunk gets, how the seeds-per-second estimate moves, and the time limits.
// All durations are in seconds.

export interface LaneWeight {
  readonly name: string;
  readonly weight: number;
}

/** Weights at or below this still get a score, so a weight-0 lane runs once before it starves. */
const MIN_WEIGHT = 0.0001;
const TIE = 1e-9;

/**
 * Weighted round-robin: the eligible lane with the fewest chunks per unit of weight runs next,
 * so weights 3/2/1 run chunks in the ratio 3:2:1. A tie goes to the lane listed first.
 * `chunksRun` counts every chunk of the session, aborted ones included; a missing name counts 0.
 * Returns undefined when every lane is excluded.
 */
export function pickLane(
  lanes: readonly LaneWeight[],
  chunksRun: ReadonlyMap<string, number>,
  excluded: ReadonlySet<string>,
): string | undefined {
  let best: string | undefined;
  let bestScore = Infinity;
  for (const lane of lanes) {
    if (excluded.has(lane.name)) continue;
    const score = (chunksRun.get(lane.name) ?? 0) / Math.max(lane.weight, MIN_WEIGHT);
    if (best === undefined || score < bestScore - TIE) {
      best = lane.name;
      bestScore = score;
    }
  }
  return best;
}

/** How much one chunk may grow over the previous one, and the rate estimate over the last estimate. */
export const GROWTH_CAP = 3;

/**
 * Seeds for the next chunk: enough to fill `targetSeconds` at `rate`, at most GROWTH_CAP times the
 * previous chunk of the lane (or, without one, GROWTH_CAP times `bootstrap`: a rate carried over
 * from an earlier session or another worker is not trusted with an unbounded first chunk), at
 * least 10, and never past the largest exact integer. Without a measured rate the configured
 * `bootstrap` is used as is, not clamped.
 */
export function sizeChunk(rate: number | null, prevCount: number | null, targetSeconds: number, bootstrap: number): number {
  if (rate === null || rate === 0) return bootstrap;
  const cap = GROWTH_CAP * (prevCount || bootstrap);
  const n = Math.min(Math.floor(rate * targetSeconds), cap);
  return Math.min(Number.MAX_SAFE_INTEGER, Math.max(10, n));
}

/**
 * Exponential moving average of seeds per second, weighting the newest chunk 0.6, and at most
 * GROWTH_CAP times the old estimate: a generator that exits at once measures an absurd rate
 * (count / 1 ms), and the estimate must not follow it in one step. Falls freely; the first
 * measurement (or one after an estimate of 0) is taken as is.
 */
export function updateRate(old: number | null, count: number, seconds: number): number {
  const measured = count / Math.max(seconds, 0.001);
  if (old === null || old === 0) return measured;
  return Math.min(0.6 * measured + 0.4 * old, GROWTH_CAP * old);
}

/**
 * The rate after a chunk timed out: half the estimate, or half of what the aborted chunk
 * managed when there is no usable estimate (none, or 0).
 */
export function halveRate(rate: number | null, count: number, seconds: number): number {
  return (rate || count / Math.max(seconds, 1)) / 2;
}

/** The shortest chunk worth starting: below this, a chunk would be mostly its own start-up. */
export const SHORTEST_CHUNK_SECONDS = 5;

/**
 * Below this much remaining time no new chunk starts (single host) or the drain begins
 * (distributed): the shortest chunk worth starting, or the configured chunk length when that is
 * shorter still. Chunks are sized to the time left (chunkTarget), so a session fills its budget up
 * to this last sliver, whatever its length.
 */
export function deadlineFloor(chunkSeconds: number): number {
  return Math.min(SHORTEST_CHUNK_SECONDS, chunkSeconds);
}

/** Seconds after which a running chunk is killed and counted as a timeout. */
export function hardTimeout(targetSeconds: number, floorSeconds = 180): number {
  return Math.max(floorSeconds, 3 * targetSeconds);
}

/**
 * The kill time of a chunk started with `remainingSeconds` of the session left: its own hard
 * timeout, unless that lies past the session's end plus `graceSeconds` (the drain grace); then the
 * session's end plus the grace, at least 1. `cutBySessionEnd` says the session's end set it: a
 * chunk killed then was cut short by the budget and says nothing of the generator (no strike, no
 * halved rate), so the budget is never overrun by more than the grace.
 */
export function chunkKillTime(ownSeconds: number, remainingSeconds: number, graceSeconds: number): { seconds: number; cutBySessionEnd: boolean } {
  const sessionEnd = Math.max(1, Math.floor(remainingSeconds + graceSeconds));
  return ownSeconds > sessionEnd ? { seconds: sessionEnd, cutBySessionEnd: true } : { seconds: ownSeconds, cutBySessionEnd: false };
}

/**
 * Seconds the next chunk should take: the configured chunk length, cut to the time left so the
 * last chunk ends near the deadline (and a short budget gets short chunks), at least 1.
 */
export function chunkTarget(chunkSeconds: number, remainingSeconds: number): number {
  return Math.max(1, Math.min(chunkSeconds, Math.floor(remainingSeconds)));
}
