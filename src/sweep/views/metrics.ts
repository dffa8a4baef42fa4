// A sweep's Prometheus families (docs/metrics.md lists every one), derived from the same
// snapshot the dashboard shows, so a scrape and the page never disagree.
import type { MetricFamily, Sample } from "../../ui/metrics.ts";
import type { DashboardSnapshot } from "../../ui/source.ts";
import { RANGES_SHOWN } from "./builds.ts";

export function sweepMetrics(s: DashboardSnapshot): MetricFamily[] {
  const v = s.sweep;
  const lanes = v?.lanes ?? [];
  const perLane = (value: (l: (typeof lanes)[number]) => number | null): Sample[] =>
    lanes.flatMap((l) => {
      const x = value(l);
      return x === null ? [] : [{ labels: { lane: l.name }, value: x }];
    });
  const flights = new Map<string, { lane: string; worker: string; n: number; oldest: number }>();
  for (const l of lanes) {
    for (const f of l.inFlight) {
      const key = `${l.name}\0${f.worker}`;
      const e = flights.get(key) ?? { lane: l.name, worker: f.worker, n: 0, oldest: 0 };
      e.n++;
      e.oldest = Math.max(e.oldest, f.runningSeconds);
      flights.set(key, e);
    }
  }
  const families: MetricFamily[] = [
    { name: "fuzzfleet_up", help: "1 while a campaign runs; 0 for a store browsed while nothing runs.", type: "gauge", samples: [{ value: s.live ? 1 : 0 }] },
    { name: "fuzzfleet_generation", help: "The current generation's id.", type: "gauge", samples: v ? [{ value: v.generation }] : [] },
    { name: "fuzzfleet_lane_base_seed", help: "The lane's base_seed: where its coverage starts.", type: "gauge", samples: perLane((l) => l.baseSeed) },
    { name: "fuzzfleet_lane_cursor", help: "The lane's cursor: coverage is [base_seed, cursor).", type: "gauge", samples: perLane((l) => l.cursor) },
    { name: "fuzzfleet_lane_covered_seeds_total", help: "Seeds in the lane's covered prefix (cursor - base_seed); resets when the lane restarts.", type: "counter", samples: perLane((l) => l.cursor - l.baseSeed) },
    { name: "fuzzfleet_lane_done_ahead_seeds", help: "Seeds swept at or above the cursor, not yet coverage.", type: "gauge", samples: perLane((l) => l.doneAhead) },
    { name: "fuzzfleet_lane_queued_seeds", help: "Seeds handed back to be swept again (aborted or reissued chunks); only while a campaign runs.", type: "gauge", samples: perLane((l) => l.queued) },
    { name: "fuzzfleet_lane_rate_seeds_per_second", help: "The lane's seeds/s estimate (EWMA of complete chunks).", type: "gauge", samples: perLane((l) => l.seedsPerSecond) },
    { name: "fuzzfleet_lane_finds_total", help: "Failing seeds found by the lane's complete chunks.", type: "counter", samples: perLane((l) => l.finds) },
    ...rangeFamilies(lanes),
    {
      name: "fuzzfleet_lane_current_build_covered_seeds",
      help: "Seeds of the lane's covered prefix swept under the current app build (the running or last session's).",
      type: "gauge",
      samples: lanes.map((l) => ({ labels: { lane: l.name, app_build: v?.currentBuild ?? "" }, value: l.builds.currentBuildCovered })),
    },
    { name: "fuzzfleet_seeds_swept_total", help: "Distinct seeds swept by complete chunks of the generation.", type: "counter", samples: v ? [{ value: v.totals.seedsSwept }] : [] },
    { name: "fuzzfleet_chunks_completed_total", help: "Complete chunks of the generation.", type: "counter", samples: v ? [{ value: v.totals.chunksComplete }] : [] },
    { name: "fuzzfleet_finds_total", help: "Failing seeds found by complete chunks of the generation.", type: "counter", samples: v ? [{ value: v.totals.finds }] : [] },
    { name: "fuzzfleet_failures", help: "Distinct failures of the generation, by state.", type: "gauge", samples: v ? Object.entries(v.totals.byState).map(([state, n]) => ({ labels: { state }, value: n })) : [] },
    { name: "fuzzfleet_pending_finds", help: "Finds of the generation still pending minimization (a pending find is not yet a distinct failure).", type: "gauge", samples: v ? [{ value: v.totals.pending.finds }] : [] },
    { name: "fuzzfleet_failure_hits_total", help: "Seeds that hit the generation's distinct failures (finds pending minimization not included).", type: "counter", samples: v ? [{ value: v.totals.hits }] : [] },
    { name: "fuzzfleet_chunks_in_flight", help: "Chunks running now, by lane and worker.", type: "gauge", samples: [...flights.values()].map((f) => ({ labels: { lane: f.lane, worker: f.worker }, value: f.n })) },
    { name: "fuzzfleet_chunk_oldest_running_seconds", help: "How long the oldest chunk in flight has run, by lane and worker.", type: "gauge", samples: [...flights.values()].map((f) => ({ labels: { lane: f.lane, worker: f.worker }, value: Math.round(f.oldest * 1000) / 1000 })) },
    { name: "fuzzfleet_session_elapsed_seconds", help: "Time since the running session started.", type: "gauge", samples: s.status.elapsedSeconds === null ? [] : [{ value: Math.round(s.status.elapsedSeconds * 1000) / 1000 }] },
    { name: "fuzzfleet_session_budget_seconds", help: "The running session's --for budget.", type: "gauge", samples: s.status.budgetSeconds === null ? [] : [{ value: s.status.budgetSeconds }] },
    { name: "fuzzfleet_workers", help: "The session's workers by liveness (alive, slow, lost, left).", type: "gauge", samples: countBy(s.workers ?? [], (w) => w.liveness).map(([liveness, n]) => ({ labels: { liveness }, value: n })) },
    { name: "fuzzfleet_worker_last_heartbeat_seconds", help: "Seconds since each attached worker was last heard from (as the store recorded it).", type: "gauge", samples: (s.workers ?? []).filter((w) => w.liveness !== "left" && w.lastHeartbeatSeconds !== null).map((w) => ({ labels: { worker: w.label }, value: w.lastHeartbeatSeconds! })) },
    { name: "fuzzfleet_worker_files", help: "Each attached worker by how its files reach the campaign: shared (the shared directory) or transfer (over the connection).", type: "gauge", samples: (s.workers ?? []).filter((w) => w.liveness !== "left" && w.files !== undefined).map((w) => ({ labels: { worker: w.label, files: w.files! }, value: 1 })) },
    { name: "fuzzfleet_worker_chunks_held", help: "Chunks each attached worker holds now (as the store recorded it).", type: "gauge", samples: (s.workers ?? []).filter((w) => w.liveness !== "left").map((w) => ({ labels: { worker: w.label }, value: w.holding.length })) },
    ...discoveryFamilies(v?.discovery ?? null),
  ];
  return families;
}

/**
 * The lane's latest seed ranges per app build: a range's labels are its lane, its build and its
 * place in seed order (1 for the lowest), so a range that grows as chunks land stays one series.
 */
function rangeFamilies(lanes: NonNullable<DashboardSnapshot["sweep"]>["lanes"]): MetricFamily[] {
  const bound = (name: string, help: string, value: (r: (typeof lanes)[number]["builds"]["ranges"][number]) => number): MetricFamily => ({
    name,
    help,
    type: "gauge",
    samples: lanes.flatMap((l) =>
      l.builds.ranges.map((r, i) => ({ labels: { lane: l.name, app_build: r.build ?? "", range: String(l.builds.earlierRanges + i + 1) }, value: value(r) })),
    ),
  });
  const what = `of one range of the lane's seeds swept under one app build (app_build empty: none named; range: its place in seed order, 1 for the lowest; the latest ${RANGES_SHOWN} ranges)`;
  return [
    bound("fuzzfleet_lane_build_range_first_seed", `The first seed ${what}.`, (r) => r.seedFrom),
    bound("fuzzfleet_lane_build_range_last_seed", `The last seed (inclusive) ${what}.`, (r) => r.seedTo),
  ];
}

type Discovery = NonNullable<DashboardSnapshot["sweep"]>["discovery"];

/** When to stop (docs/sweep.md): one gauge each for the campaign, and the same per lane. */
function discoveryFamilies(d: Discovery | null): MetricFamily[] {
  const gauges: [suffix: string, help: string, value: (e: Discovery["campaign"]) => number | null][] = [
    ["next_new_probability", "Good-Turing estimate that the next seed finds a distinct failure never seen (singletons / seeds swept).", (e) => e.nextNewProbability],
    ["seeds_to_next_new", "Expected seeds until the next new distinct failure (seeds swept / singletons); absent when none is expected.", (e) => e.unitsToNextNew],
    ["estimated_failures", "Chao2 estimate of how many distinct failures exist in all, found or not.", (e) => Math.round(e.estimatedTotal * 1000) / 1000],
    ["estimated_failures_low", "Lower end of the 95 % interval of the Chao2 estimate.", (e) => e.interval[0]],
    ["estimated_failures_high", "Upper end of the 95 % interval of the Chao2 estimate.", (e) => e.interval[1]],
  ];
  const one = (e: Discovery["campaign"], value: (e: Discovery["campaign"]) => number | null, labels?: Record<string, string>): Sample[] => {
    const x = value(e);
    return x === null ? [] : [{ ...(labels ? { labels } : {}), value: x }];
  };
  return gauges.flatMap(([suffix, help, value]) => [
    { name: `fuzzfleet_discovery_${suffix}`, help: `${help} All lanes together.`, type: "gauge" as const, samples: d ? one(d.campaign, value) : [] },
    { name: `fuzzfleet_lane_discovery_${suffix}`, help: `${help} Per lane, from its own seeds.`, type: "gauge" as const, samples: d ? d.lanes.flatMap((l) => one(l, value, { lane: l.lane })) : [] },
  ]);
}

function countBy<T>(items: readonly T[], key: (t: T) => string): [string, number][] {
  const m = new Map<string, number>();
  for (const t of items) m.set(key(t), (m.get(key(t)) ?? 0) + 1);
  return [...m];
}
