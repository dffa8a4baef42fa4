// Inclusive seed ranges. A range [from, to] holds every integer seed from `from` to `to`;
// `from > to` is the empty range. Functions here never mutate their inputs.

export type Range = readonly [from: number, to: number];

/**
 * Seeds are JavaScript numbers, exact up to Number.MAX_SAFE_INTEGER (2^53 - 1). A lane's cursor is
 * one past its last covered seed, so the last seed anything may hand out is one below that:
 * every seed, cursor, range end and count the engine holds or stores stays an exact integer.
 */
export const SEED_LIMIT = Number.MAX_SAFE_INTEGER;
/** The largest seed a chunk may hold (SEED_LIMIT - 1). */
export const LAST_SEED = SEED_LIMIT - 1;

/** Number of seeds in `r`; 0 when it is empty. */
export function rangeSize(r: Range): number {
  return r[0] > r[1] ? 0 : r[1] - r[0] + 1;
}

/** Sum of the sizes; overlapping ranges are counted twice, so merge first if that matters. */
export function totalSize(ranges: readonly Range[]): number {
  let total = 0;
  for (const r of ranges) total += rangeSize(r);
  return total;
}

/**
 * Sorted, non-empty ranges such that no two overlap or touch: ranges that overlap or are
 * adjacent (`from <= previous.to + 1`) become one. Empty input ranges are dropped.
 */
export function mergeRanges(ranges: readonly Range[]): Range[] {
  const sorted = ranges.filter((r) => r[0] <= r[1]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const merged: Range[] = [];
  for (const [from, to] of sorted) {
    const last = merged[merged.length - 1];
    if (last !== undefined && from <= last[1] + 1) {
      if (to > last[1]) merged[merged.length - 1] = [last[0], to];
    } else {
      merged.push([from, to]);
    }
  }
  return merged;
}

/** The parts of `span` that no range in `covered` touches, sorted and merged; [] for an empty span. */
export function subtractRanges(span: Range, covered: readonly Range[]): Range[] {
  const [spanFrom, spanTo] = span;
  if (spanFrom > spanTo) return [];
  const gaps: Range[] = [];
  let next = spanFrom; // lowest seed of the span not yet known to be covered
  for (const [from, to] of mergeRanges(covered)) {
    if (to < next) continue;
    if (from > spanTo) break;
    if (from > next) gaps.push([next, from - 1]);
    next = to + 1;
    if (next > spanTo) return gaps;
  }
  gaps.push([next, spanTo]);
  return gaps;
}
