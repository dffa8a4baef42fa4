// When to stop a sweep: the when-to-stop estimate (core/discovery-estimate.ts) per lane and for
// the whole generation, from the store's aggregates: the seeds each lane swept are the sampling
// units, a distinct failure's hits (distinct seeds that found it) its incidence, and the store
// counts how many distinct failures were hit by exactly one and exactly two seeds. Shared by
// `status`, the dashboard, `report` and `/metrics`, so every view says the same. docs/sweep.md
// gives the formulas and their assumptions.
import { estimateFromCounts, type DiscoveryEstimate } from "../../core/discovery-estimate.ts";
import { formatInt } from "../../config/format.ts";
import type { IncidenceCounts, SweepStore } from "../../store/port.ts";

/** The estimate as every view carries it (plain JSON). */
export type DiscoveryView = DiscoveryEstimate;

export interface SweepDiscovery {
  /** Every lane of the generation together: units are all seeds swept, incidences all hits. */
  campaign: DiscoveryView;
  /** Per active lane, in the order given: units are the lane's seeds, incidences the hits from them. */
  lanes: (DiscoveryView & { lane: string })[];
}

const NONE: IncidenceCounts = { observed: 0, singletons: 0, doubletons: 0 };

/** `lanes`: the active lanes to show, each with its id and the seeds it swept. */
export function sweepDiscovery(store: SweepStore, generationId: number, seedsSwept: number, lanes: readonly { id: number; name: string; seeds: number }[]): SweepDiscovery {
  const counts = store.incidenceCounts(generationId);
  const estimate = (units: number, c: IncidenceCounts) => estimateFromCounts(Math.max(0, units), c.observed, c.singletons, c.doubletons);
  return {
    campaign: estimate(seedsSwept, counts.campaign),
    lanes: lanes.map((l) => ({ lane: l.name, ...estimate(l.seeds, counts.lanes.get(l.id) ?? NONE) })),
  };
}

/** "1 in ~83,000 seeds", "-" before any seed, "none expected" without a singleton. */
export function nextNewText(e: DiscoveryView): string {
  if (e.nextNewProbability === null) return "-";
  if (e.unitsToNextNew === null) return "none expected (no failure was found by one seed only)";
  return `${e.nextNewProbability.toPrecision(2)} per seed (one in ~${formatInt(e.unitsToNextNew)} seeds)`;
}

/** "42 seen, ~47 in all (95 %: 43–61)". */
export function totalText(e: DiscoveryView): string {
  const est = Math.round(e.estimatedTotal * 10) / 10;
  return `${formatInt(e.observed)} seen, ~${est} in all (95 %: ${formatInt(e.interval[0])}–${formatInt(e.interval[1])})`;
}
