// A sweep's history as plotted series, from the store alone (the chunk and failure rows of one
// generation), shared by the live dashboard and the static report. Seeds/s: each complete
// chunk's seeds are spread evenly over the time it ran, so a ten-minute chunk draws a plateau
// rather than a spike at its end. Finds: cumulative, counted when their chunk was recorded.
// Distinct failures: cumulative, counted at each failure's first_seen.
import type { SweepStore } from "../store/port.ts";
import type { SweepSeries } from "../ui/source.ts";

/** Most points on a plot; buckets widen to keep to it. */
const MAX_POINTS = 240;

/**
 * The series from the generation's first chunk to `untilMs` (now, for a running campaign; the
 * last chunk's end otherwise). Lanes are named in `laneNames` order, then any others found.
 */
export function sweepSeries(store: SweepStore, generationId: number, laneNames: readonly string[], untilMs: number | null): SweepSeries {
  const chunks = store.completeTimedChunks(generationId).map((c) => ({ ...c, from: Date.parse(c.started_at) / 1000, to: Date.parse(c.ended_at) / 1000 }));
  const firsts = store.failureFirstSeen(generationId).map((t) => Date.parse(t) / 1000);
  const names = [...laneNames];
  for (const c of chunks) if (!names.includes(c.lane)) names.push(c.lane);
  const empty: SweepSeries = { t: [], lanes: Object.fromEntries(names.map((n) => [n, []])), total: [], finds: [], distinct: [] };
  if (chunks.length === 0) return empty;
  // A fold, not Math.min(...spread): a long campaign's chunks are more arguments than a call takes.
  const start = Math.floor(chunks.reduce((m, c) => Math.min(m, c.from), Infinity));
  const end = Math.ceil(chunks.reduce((m, c) => Math.max(m, c.to), untilMs === null ? 0 : untilMs / 1000));
  const width = Math.max(1, Math.ceil((end - start) / MAX_POINTS));
  const n = Math.max(1, Math.ceil((end - start) / width));
  const perLane = new Map(names.map((name) => [name, new Array<number>(n).fill(0)]));
  const findsAt = new Array<number>(n).fill(0);
  for (const c of chunks) {
    const span = Math.max(c.to - c.from, 0.001);
    const density = c.seeds / span;
    const row = perLane.get(c.lane)!;
    for (let b = Math.max(0, Math.floor((c.from - start) / width)); b < n && start + b * width < c.to; b++) {
      const overlap = Math.min(c.to, start + (b + 1) * width) - Math.max(c.from, start + b * width);
      if (overlap > 0) row[b]! += (density * overlap) / width;
    }
    // A chunk ending in the last bucket's upper edge still belongs to it.
    findsAt[Math.min(n - 1, Math.max(0, Math.floor((c.to - start) / width)))]! += c.finds;
  }
  const series: SweepSeries = { ...empty, lanes: {} };
  let finds = 0;
  let fi = 0;
  for (let b = 0; b < n; b++) {
    const t = start + (b + 1) * width;
    series.t.push(t);
    finds += findsAt[b]!;
    series.finds.push(finds);
    while (fi < firsts.length && firsts[fi]! <= t) fi++;
    series.distinct.push(fi);
  }
  let total = new Array<number>(n).fill(0);
  for (const [name, row] of perLane) {
    const rounded = row.map((r) => Math.round(r * 10) / 10);
    series.lanes[name] = rounded;
    total = total.map((x, i) => x + row[i]!);
  }
  series.total = total.map((r) => Math.round(r * 10) / 10);
  return series;
}
