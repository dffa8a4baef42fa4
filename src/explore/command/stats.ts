// The final statistics of an explore campaign, computed from durable state where it exists: the
// lease table's `done` records are the commits (they survive a crash and a --resume), the public
// corpus is what was published.
import { listCorpus } from "../state/corpus.ts";
import type { LeaseTable } from "../state/lease-table.ts";
import type { ExploreMaster } from "../master/master.ts";

export interface ExploreStats {
  /** Committed executions: one per unique content executed (done records with a result). */
  observations: number;
  /** Sum of num_generated over those commits (duplicates included). */
  generated: number;
  /** Public corpus objects that came from the input directory. */
  external_inputs: number;
  /** Public corpus objects that did not: unique published children. */
  interesting: number;
  /** generated / elapsed_seconds. */
  throughput: number;
  /** Master rank -> observations it committed. */
  by_master: Record<string, number>;
  elapsed_seconds: number;
  masters: number;
  executors: { local_slots: number; remote_workers: number };
  invalid_results: number;
  stale_results: number;
  recovered_leases: number;
  replayed_commits: number;
  budget_errors: number;
  integrity_errors: number;
  late_inputs: number;
}

/** The counts every master reported in the statistics exchange (several masters). */
export interface ExchangedCounts {
  observations: number;
  generated: number;
  late: number;
  byMaster: Record<string, number>;
}

export interface StatsSources {
  leases: LeaseTable;
  master: ExploreMaster;
  corpusDir: string;
  elapsedSeconds: number;
  executors: { local: number; remote: number };
  /** Default 1. */
  masters?: number;
  /** The root of several masters: the counts every master reported in the exchange. */
  exchanged?: ExchangedCounts | null;
}

/**
 * With `exchanged` (the root of several masters) the counts come from the exchange, each master
 * reporting its own; otherwise from the lease table's `done` records.
 */
export function computeStats(s: StatsSources): ExploreStats {
  const { leases, master, corpusDir, elapsedSeconds, executors, masters = 1, exchanged = null } = s;
  let observations = 0;
  let generated = 0;
  let byMaster: Record<string, number> = {};
  if (exchanged) {
    ({ observations, generated, byMaster } = exchanged);
  } else {
    for (const r of leases.snapshot()) {
      if (r.status !== "done" || !r.commit || r.commit.worker === "budget") continue;
      observations++;
      generated += r.commit.num_generated;
      const rank = r.owner.slice(r.owner.lastIndexOf(":") + 1);
      byMaster[rank] = (byMaster[rank] ?? 0) + 1;
    }
  }
  const corpus = listCorpus(corpusDir);
  const external = corpus.filter((h) => master.external.has(h)).length;
  const c = master.counters;
  return {
    observations,
    generated,
    external_inputs: external,
    interesting: corpus.length - external,
    throughput: elapsedSeconds > 0 ? generated / elapsedSeconds : 0,
    by_master: byMaster,
    elapsed_seconds: elapsedSeconds,
    masters,
    executors: { local_slots: executors.local, remote_workers: executors.remote },
    invalid_results: c.invalidResults,
    stale_results: c.staleResults,
    recovered_leases: c.recovered,
    replayed_commits: c.replayedCommits,
    budget_errors: c.budgetErrors,
    integrity_errors: c.integrityErrors,
    late_inputs: exchanged ? exchanged.late : c.lateInputs,
  };
}

export function renderStats(s: ExploreStats): string {
  const by = Object.keys(s.by_master)
    .sort((a, b) => Number(a) - Number(b))
    .map((r) => `${r}=${s.by_master[r]}`)
    .join(", ");
  const lines = [
    "=== Final statistics ===",
    `  analysis observations:   ${String(s.observations).padStart(8)}`,
    `  test cases generated:    ${String(s.generated).padStart(8)}`,
    `  external input objects:  ${String(s.external_inputs).padStart(8)}`,
    `  new interesting inputs:  ${String(s.interesting).padStart(8)}`,
    `  throughput:              ${s.throughput.toFixed(1).padStart(8)} generated/s`,
    `  elapsed:                 ${s.elapsed_seconds.toFixed(3).padStart(8)} s`,
    `  masters used:            ${String(s.masters).padStart(8)}`,
    `  executors:               ${s.executors.local_slots} local slot(s), ${s.executors.remote_workers} remote worker(s)`,
    `  Analysis by master:      ${by || "-"}`,
  ];
  const diag = [
    ["invalid results", s.invalid_results],
    ["stale results", s.stale_results],
    ["recovered leases", s.recovered_leases],
    ["replayed commits", s.replayed_commits],
    ["budget errors", s.budget_errors],
    ["integrity errors", s.integrity_errors],
  ].filter(([, n]) => (n as number) > 0);
  if (diag.length) lines.push(`  diagnostics:             ${diag.map(([k, n]) => `${k} ${n}`).join(", ")}`);
  return lines.join("\n");
}
