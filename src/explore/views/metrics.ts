// An explore campaign's Prometheus families (docs/metrics.md lists every one), derived from the
// same snapshot the dashboard shows, so a scrape and the page never disagree. The master's rank
// is the `master` label; a phase is reduced to its first word ("idle window: ends in 3s" is
// `idle window`), so the label takes few values. When to stop (explore/views/discovery.ts) is one
// gauge per figure, absent before the campaign's first execution.
import type { MetricFamily, Sample } from "../../ui/metrics.ts";
import type { DiscoveryEstimate } from "../../core/discovery-estimate.ts";
import type { DashboardSnapshot } from "../../ui/source.ts";

/** The coarse phase of a master, as a label value. */
export function phaseLabel(phase: string): string {
  return phase.split(/[:(]/)[0]!.trim();
}

export function exploreMetrics(s: DashboardSnapshot): MetricFamily[] {
  const v = s.explore;
  const self = v?.masters.find((m) => m.self) ?? null;
  const master = { master: String(self?.rank ?? 0) };
  const one = (value: number | null | undefined, labels?: Record<string, string>): Sample[] => (value === null || value === undefined ? [] : [{ labels, value }]);
  const f = v?.frontier;
  const frontier: Sample[] = f
    ? (
        [
          ["pending", f.pending],
          ["running", f.running],
          ["leased", f.leased],
          ["committing", f.committing],
          ["expired", f.expired],
          ["done", f.done],
        ] as const
      ).flatMap(([state, n]) => one(n, { state }))
    : [];
  const workers = s.workers ?? [];
  const byLiveness = new Map<string, number>();
  for (const w of workers) byLiveness.set(w.liveness, (byLiveness.get(w.liveness) ?? 0) + 1);
  const attached = workers.filter((w) => w.liveness !== "left");
  return [
    { name: "fuzzfleet_up", help: "1 while a campaign runs; 0 for a campaign read from its files while nothing runs.", type: "gauge", samples: [{ value: s.live ? 1 : 0 }] },
    { name: "fuzzfleet_explore_frontier_tasks", help: "Tasks by state: pending and running (this master), leased, committing, expired and done (lease records, fleet-wide).", type: "gauge", samples: frontier },
    { name: "fuzzfleet_explore_input_backlog_files", help: "Input files listed and not yet admitted by this master.", type: "gauge", samples: one(f?.inputBacklog) },
    { name: "fuzzfleet_explore_executions_total", help: "Executions whose result this master committed (from the files: every done record).", type: "counter", samples: one(v?.totals.executions, master) },
    { name: "fuzzfleet_explore_generated_inputs_total", help: "Children the committed executions produced, duplicates included.", type: "counter", samples: one(v?.totals.generated, master) },
    { name: "fuzzfleet_explore_unique_inputs_total", help: "New unique children (new to the campaign's corpus).", type: "counter", samples: one(v?.totals.unique, master) },
    { name: "fuzzfleet_explore_redundant_inputs_total", help: "Children that were not new (generated minus unique).", type: "counter", samples: one(v?.totals.redundant, master) },
    { name: "fuzzfleet_explore_corpus_inputs", help: "Objects in the public corpus.", type: "gauge", samples: one(v?.totals.corpus) },
    { name: "fuzzfleet_explore_executions_per_second", help: "Committed executions per second over the last few seconds (this master).", type: "gauge", samples: one(v?.rates.executionsPerSecond, master) },
    { name: "fuzzfleet_explore_findings", help: "Inputs that crashed or hung the target, by kind (every campaign on this corpus).", type: "gauge", samples: v ? [{ labels: { kind: "crash" }, value: v.findingsTotal.crashes }, { labels: { kind: "hang" }, value: v.findingsTotal.hangs }] : [] },
    { name: "fuzzfleet_explore_finding_signatures", help: "Distinct finding signatures.", type: "gauge", samples: one(v?.findingsTotal.signatures) },
    ...discoveryFamilies(v?.discovery ?? null),
    { name: "fuzzfleet_explore_master_phase", help: "1 for each master and its quiescence phase (coarse: working, idle, idle window, frozen, lost…).", type: "gauge", samples: (v?.masters ?? []).map((m) => ({ labels: { master: String(m.rank), phase: phaseLabel(m.phase) }, value: 1 })) },
    { name: "fuzzfleet_explore_idle_window_remaining_seconds", help: "A lone master counting down its idle window: the seconds left before it ends.", type: "gauge", samples: one(v?.idle?.remainingSeconds === undefined ? null : v.idle.remainingSeconds === null ? null : round3(v.idle.remainingSeconds)) },
    { name: "fuzzfleet_explore_wall_remaining_seconds", help: "Seconds left of the --wall-timeout budget.", type: "gauge", samples: one(v?.wall?.remainingSeconds === undefined || v.wall.remainingSeconds === null ? null : round3(v.wall.remainingSeconds)) },
    { name: "fuzzfleet_explore_workers", help: "Executors by liveness (local slots and remote workers).", type: "gauge", samples: [...byLiveness].map(([liveness, n]) => ({ labels: { liveness }, value: n })) },
    { name: "fuzzfleet_explore_worker_tasks_held", help: "Tasks each attached executor holds now.", type: "gauge", samples: attached.map((w) => ({ labels: { worker: w.label }, value: w.holding.length })) },
    { name: "fuzzfleet_worker_files", help: "Each attached worker by how its files reach the campaign: shared (the shared directory) or transfer (over the connection).", type: "gauge", samples: attached.filter((w) => w.files !== undefined).map((w) => ({ labels: { worker: w.label, files: w.files! }, value: 1 })) },
    { name: "fuzzfleet_explore_worker_last_heard_seconds", help: "Seconds since each attached executor was last heard from.", type: "gauge", samples: attached.flatMap((w) => one(w.lastHeartbeatSeconds, { worker: w.label })) },
    { name: "fuzzfleet_session_elapsed_seconds", help: "Time since the running campaign started.", type: "gauge", samples: one(s.status.elapsedSeconds === null ? null : round3(s.status.elapsedSeconds)) },
    { name: "fuzzfleet_session_budget_seconds", help: "The running campaign's budget (explore: --wall-timeout).", type: "gauge", samples: one(s.status.budgetSeconds) },
  ];
}

/** The campaign's when-to-stop estimate (docs/explore.md), one gauge per figure. */
function discoveryFamilies(d: DiscoveryEstimate | null): MetricFamily[] {
  const gauges: [suffix: string, help: string, value: (e: DiscoveryEstimate) => number | null][] = [
    ["next_new_probability", "Good-Turing estimate that the next execution finds a signature never seen in this campaign (singletons / executions).", (e) => e.nextNewProbability],
    ["executions_to_next_new", "Expected executions until the next new signature (executions / singletons); absent when none is expected.", (e) => e.unitsToNextNew],
    ["estimated_signatures", "Chao2 estimate of how many distinct signatures the campaign's target has in all, found or not.", (e) => Math.round(e.estimatedTotal * 1000) / 1000],
    ["estimated_signatures_low", "Lower end of the 95 % interval of the Chao2 estimate.", (e) => e.interval[0]],
    ["estimated_signatures_high", "Upper end of the 95 % interval of the Chao2 estimate.", (e) => e.interval[1]],
  ];
  return gauges.map(([suffix, help, value]) => {
    const x = d ? value(d) : null;
    return { name: `fuzzfleet_explore_discovery_${suffix}`, help, type: "gauge" as const, samples: x === null ? [] : [{ value: x }] };
  });
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
