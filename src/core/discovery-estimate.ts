// When to stop: how much a campaign can still expect to find, from the counts it already keeps.
// The model is incidence sampling (Chao 1987; Böhme, "Software Testing as Species Discovery",
// TOSEM 2018): every sampling unit (a seed of a sweep, an executed input of an explore campaign)
// independently finds each of an unknown number of distinct failures with its own fixed
// probability. A failure's incidence is the number of units that found it (a sweep's hits:
// distinct (failure, seed) pairs). From `units` and the incidences alone:
//
//   singletons Q1, doubletons Q2   failures found by exactly one, exactly two units
//   P(new)  ≈ Q1 / T               Good-Turing: the chance that the next unit finds a failure
//                                  never seen (precisely: the expected number it finds)
//   units to the next new one ≈ T / Q1
//   Chao2:  S ≈ S_obs + ((T-1)/T) Q1² / (2 Q2)      (Q2 = 0: ((T-1)/T) Q1 (Q1-1) / 2)
//   95 % interval: log-normal around the unseen part (Chao 1987), never below S_obs
//
// Assumptions, to be said wherever the numbers are shown: units are independent and
// alike (a lane's seeds under one generator and build; mixing lanes with very different
// settings makes the estimate a lower bound), the campaign has not changed what it looks for,
// and failures nobody can find at all are not counted. Chao2 is a lower-bound estimator: when
// many failures are very rare, the truth can lie above the interval.
// Pure: plain numbers in, plain numbers out.
import assert from "node:assert/strict";

export interface DiscoveryEstimate {
  /** Sampling units so far (seeds swept, inputs executed). */
  readonly units: number;
  /** Distinct failures seen. */
  readonly observed: number;
  readonly singletons: number;
  readonly doubletons: number;
  /** Good-Turing estimate that the next unit finds a new distinct failure; null before any unit. */
  readonly nextNewProbability: number | null;
  /** Expected units until the next new distinct failure; null when none is expected (no singleton) or before any unit. */
  readonly unitsToNextNew: number | null;
  /** Chao2 estimate of how many distinct failures exist in all, with a 95 % interval. */
  readonly estimatedTotal: number;
  readonly interval: readonly [low: number, high: number];
}

/** z for a two-sided 95 % interval. */
const Z95 = 1.959964;

/**
 * The estimate from `units` and each distinct failure's incidence (how many units found it, each
 * at least 1 and at most `units`).
 */
export function estimateDiscovery(units: number, incidences: Iterable<number>): DiscoveryEstimate {
  assert.ok(Number.isSafeInteger(units) && units >= 0, `units must be a count (got ${units})`);
  let observed = 0;
  let q1 = 0;
  let q2 = 0;
  for (const n of incidences) {
    assert.ok(Number.isSafeInteger(n) && n >= 1 && n <= units, `an incidence lies in 1..units (got ${n} of ${units})`);
    observed++;
    if (n === 1) q1++;
    else if (n === 2) q2++;
  }
  return estimateFromCounts(units, observed, q1, q2);
}

/** The same from the counts alone (what a store's aggregates hold). */
export function estimateFromCounts(units: number, observed: number, singletons: number, doubletons: number): DiscoveryEstimate {
  assert.ok(singletons + doubletons <= observed, "singletons and doubletons are among the observed");
  const t = units;
  const q1 = singletons;
  const q2 = doubletons;
  if (t === 0) {
    return { units, observed, singletons, doubletons, nextNewProbability: null, unitsToNextNew: null, estimatedTotal: observed, interval: [observed, observed] };
  }
  const k = (t - 1) / t;
  const unseen = q2 > 0 ? (k * q1 * q1) / (2 * q2) : (k * q1 * (q1 - 1)) / 2;
  const total = observed + unseen;
  return {
    units,
    observed,
    singletons,
    doubletons,
    nextNewProbability: Math.min(1, q1 / t),
    unitsToNextNew: q1 > 0 ? t / q1 : null,
    estimatedTotal: total,
    interval: chaoInterval(observed, unseen, q1, q2, k),
  };
}

/**
 * Chao's log-normal 95 % interval for the total: the unseen part f0 = total − observed is taken as
 * log-normal, so the interval is [observed + f0/C, observed + f0·C] with
 * C = exp(z · sqrt(ln(1 + var/f0²))), widened to whole failures (a count is an integer, and near
 * saturation the unrounded lower bound lies above the observed count although nothing is left).
 * With no singleton nothing is estimated unseen and the interval is the observed count; with one
 * singleton and no doubleton, up to one more.
 */
function chaoInterval(observed: number, unseen: number, q1: number, q2: number, k: number): readonly [number, number] {
  let variance: number;
  if (q2 > 0) {
    const r = q1 / q2;
    variance = q2 * (0.5 * k * r * r + k * k * r ** 3 + 0.25 * k * k * r ** 4);
  } else {
    const total = observed + unseen;
    variance = (k * q1 * (q1 - 1)) / 2 + (k * k * q1 * (2 * q1 - 1) ** 2) / 4 - (k * k * q1 ** 4) / (4 * Math.max(total, 1));
  }
  if (unseen <= 0 || variance <= 0) return [observed, Math.ceil(observed + Math.max(unseen, Math.sqrt(Math.max(variance, 0)) * Z95, q1 > 0 ? 1 : 0))];
  const c = Math.exp(Z95 * Math.sqrt(Math.log(1 + variance / (unseen * unseen))));
  return [Math.floor(observed + unseen / c), Math.ceil(observed + unseen * c)];
}
