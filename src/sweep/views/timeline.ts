// A sweep's history as plotted series, from the store's bounded history (store/history.ts: seeds
// and finds per lane and time slot, distinct failures first seen per slot), shared by the live
// dashboard and the static report. Seeds/s: each complete chunk's seeds were spread evenly over
// the time it ran, so a ten-minute chunk draws a plateau rather than a spike at its end. Finds:
// cumulative, counted when their chunk was recorded. Distinct failures: cumulative, counted when
// each was first seen. What this reads is bounded by lanes × slots, whatever the campaign's age.
import type { SweepStore } from "../../store/port.ts";
import type { SweepSeries } from "../../ui/source.ts";

/** Most points on a plot; neighbouring slots merge to keep to it. */
const MAX_POINTS = 240;

/**
 * The series from the generation's first chunk to `untilMs` (now, for a running campaign; the
 * last chunk's end otherwise). Lanes are named in `laneNames` order, then any others found.
 */
export function sweepSeries(store: SweepStore, generationId: number, laneNames: readonly string[], untilMs: number | null): SweepSeries {
  const h = store.sweepHistory(generationId);
  const names = [...laneNames];
  for (const r of h?.lanes ?? []) if (!names.includes(r.lane)) names.push(r.lane);
  const empty: SweepSeries = { t: [], lanes: Object.fromEntries(names.map((n) => [n, []])), total: [], finds: [], distinct: [] };
  if (!h || h.lanes.length === 0) return empty;
  const first = h.lanes.reduce((m, r) => Math.min(m, r.slot), Infinity);
  const end = Math.max(h.lastEnd, untilMs === null ? 0 : untilMs / 1000);
  const slots = Math.max(1, Math.ceil((end - h.origin) / h.width) - first);
  const merge = Math.ceil(slots / MAX_POINTS);
  const n = Math.ceil(slots / merge);
  const width = merge * h.width;
  const point = (slot: number) => Math.min(n - 1, Math.max(0, Math.floor((slot - first) / merge)));
  const perLane = new Map(names.map((name) => [name, new Array<number>(n).fill(0)]));
  const findsAt = new Array<number>(n).fill(0);
  for (const r of h.lanes) {
    perLane.get(r.lane)![point(r.slot)]! += r.seeds / width;
    findsAt[point(r.slot)]! += r.finds;
  }
  const distinctAt = new Array<number>(n).fill(0);
  for (const d of h.distinct) distinctAt[point(d.slot)]! += d.n;
  const series: SweepSeries = { ...empty, lanes: {} };
  let finds = 0;
  let distinct = 0;
  for (let p = 0; p < n; p++) {
    series.t.push(h.origin + (first + (p + 1) * merge) * h.width);
    finds += findsAt[p]!;
    distinct += distinctAt[p]!;
    series.finds.push(finds);
    series.distinct.push(distinct);
  }
  let total = new Array<number>(n).fill(0);
  for (const [name, row] of perLane) {
    series.lanes[name] = row.map((r) => Math.round(r * 10) / 10);
    total = total.map((x, i) => x + row[i]!);
  }
  series.total = total.map((r) => Math.round(r * 10) / 10);
  return series;
}
