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

/**
 * Seeds for the next chunk: enough to fill `targetSeconds` at `rate`, at most three times the
 * previous chunk of the lane when there is one, and at least 10.
 * Without a measured rate the configured `bootstrap` is used as is, not clamped.
 */
export function sizeChunk(rate: number | null, prevCount: number | null, targetSeconds: number, bootstrap: number): number {
  if (rate === null || rate === 0) return bootstrap;
  let n = Math.floor(rate * targetSeconds);
  if (prevCount) n = Math.min(n, 3 * prevCount);
  return Math.max(10, n);
}

/** Exponential moving average of seeds per second, weighting the newest chunk 0.6. */
export function updateRate(old: number | null, count: number, seconds: number): number {
  const measured = count / Math.max(seconds, 0.001);
  return old === null ? measured : 0.6 * measured + 0.4 * old;
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
 * Seconds the next chunk should take: the configured chunk length, cut to the time left so the
 * last chunk ends near the deadline (and a short budget gets short chunks), at least 1.
 */
export function chunkTarget(chunkSeconds: number, remainingSeconds: number): number {
  return Math.max(1, Math.min(chunkSeconds, Math.floor(remainingSeconds)));
}
