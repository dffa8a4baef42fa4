// When to stop an explore campaign: the estimate of core/discovery-estimate.ts over one campaign
// (one epoch). The sampling units are the inputs the campaign executed (each unique content runs
// once fleet-wide, so an execution is an input); a signature's incidence is the number of its
// inputs this campaign found crashing or hanging, told by the commit fences a finding record
// keeps (a fence begins with the owner its epoch names). Findings of earlier campaigns on the
// same corpus are not this campaign's sample and are left out. Shared by the final statistics,
// the dashboard, `report --corpus` and /metrics, so every view says the same; docs/explore.md
// says what it means and docs/sweep.md gives the formulas and their assumptions.
import { estimateFromCounts, type DiscoveryEstimate } from "../../core/discovery-estimate.ts";

/** The fields of a finding record read here. */
export interface FindingIncidence {
  signature: string;
  fences: readonly string[];
}

/** The owner part of an epoch's fences: "<first 16 hex of the epoch>:<rank>:…" (state/lease-table.ts). */
function epochPrefix(epoch: string): string {
  return `${epoch.slice(0, 16)}:`;
}

/**
 * The estimate for the campaign `epoch` after `executions` inputs. An incidence is never more
 * than the executions: a count read a moment before the findings (a view reads them apart) is
 * taken up to it, so a view never fails on a race it cannot avoid.
 */
export function exploreDiscovery(records: readonly FindingIncidence[], epoch: string, executions: number): DiscoveryEstimate {
  const prefix = epochPrefix(epoch);
  const bySignature = new Map<string, number>();
  for (const r of records) {
    if (!r.fences.some((f) => f.startsWith(prefix))) continue;
    bySignature.set(r.signature, (bySignature.get(r.signature) ?? 0) + 1);
  }
  let units = Math.max(0, Math.floor(executions));
  for (const n of bySignature.values()) units = Math.max(units, n);
  let q1 = 0;
  let q2 = 0;
  for (const n of bySignature.values()) {
    if (n === 1) q1++;
    else if (n === 2) q2++;
  }
  return estimateFromCounts(units, bySignature.size, q1, q2);
}
