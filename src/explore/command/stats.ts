// The final statistics of an explore campaign, computed from durable state where it exists: the
// lease table's `done` records are the commits (they survive a crash and a --resume), the public
// corpus is what was published, the findings store holds every crash and hang found on this corpus
// (by any master, in any campaign). Throughput is this session's: the work of this process (or,
// at the root of several masters, what every master reported) over this session's time. The
// corpus is what the master saw of it (every listing it made and every child it published), held
// in memory: the statistics never list a corpus of a million objects again at the end.
import type { DiscoveryEstimate } from "../../core/discovery-estimate.ts";
import { printable } from "../../core/log-lines.ts";
import { exploreDiscovery } from "../views/discovery.ts";
import { formatInt } from "../../config/format.ts";
import { checkOutputFile, writeOutputFile, type OutputRules } from "../../files/output-file.ts";
import { buildNote, type FindingKind } from "../state/findings.ts";
import type { HashedFile } from "../state/target-identity.ts";
import type { LeaseTable } from "../state/lease-table.ts";
import { stateDir } from "../state/work-dir.ts";
import type { ExploreMaster } from "../master/master.ts";

export interface ExploreStats {
  /** Committed executions: one per unique content executed (done records with a result). */
  observations: number;
  /** Sum of num_generated over those commits (duplicates included). */
  generated: number;
  /** Public corpus objects that came from the input directory. */
  external_inputs: number;
  /** Public corpus objects published by this campaign that did not: unique new children (never what the corpus held before). */
  interesting: number;
  /** Children that were not new (generated − interesting, not below 0): duplicates and content already known. */
  redundant: number;
  /** This session's work (after a --resume, the resumed session's only). */
  session: { observations: number; generated: number };
  /** session.generated / elapsed_seconds. */
  throughput: number;
  /** The target build the campaign ran (state/target-identity.ts) and what it was computed from. */
  target: { build: string; executable: HashedFile | null; files: HashedFile[]; argv: string[] | null };
  /** Content an earlier campaign on this corpus completed under the same build, skipped (run again with --fresh). */
  skipped_explored: number;
  /** Content earlier campaigns completed only under another build (or an unrecorded one), run again (this master's). */
  rerun_other_build: number;
  /** Input entries refused (symlinks, special files: each name once) and input directory replacements. */
  refused_inputs: number;
  /** Of those, the symbolic links (each name once): skipped, never followed. */
  symlinked_inputs: number;
  findings: FindingsStats;
  /** When to stop (docs/explore.md): this campaign's executions and the signatures of the findings it made. */
  discovery: DiscoveryEstimate;
  /** Master rank -> observations it committed. */
  by_master: Record<string, number>;
  elapsed_seconds: number;
  masters: number;
  /** Every executor of this master: local slots and remote workers (`total` = both). */
  executors: { local_slots: number; remote_workers: number; total: number };
  invalid_results: number;
  stale_results: number;
  recovered_leases: number;
  replayed_commits: number;
  budget_errors: number;
  integrity_errors: number;
  late_inputs: number;
}

export interface FindingsStats {
  crashes: number;
  hangs: number;
  /** Findings recorded by this session (this master, or with several masters this master's share). */
  recorded_this_session: number;
  /** One entry per signature, largest group first. */
  groups: { signature: string; kind: FindingKind; count: number; inputs: string[] }[];
  inputs: {
    input_hash: string;
    kind: FindingKind;
    signal: number | null;
    exit_code: number | null;
    signature: string;
    first_seen: string;
    times_seen: number;
    stderr_tail: string;
    first_build: string | null;
    last_build: string | null;
    not_reproduced_by: string | null;
  }[];
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
  const { leases, master, elapsedSeconds, executors, masters = 1, exchanged = null } = s;
  let observations = 0;
  let generated = 0;
  let byMaster: Record<string, number> = {};
  const c = master.counters;
  let session = { observations: c.observations, generated: c.generated };
  if (exchanged) {
    ({ observations, generated, byMaster } = exchanged);
    session = { observations, generated };
  } else {
    for (const r of leases.snapshot()) {
      if (r.status !== "done" || !r.commit || r.commit.worker === "budget") continue;
      observations++;
      generated += r.commit.num_generated;
      const rank = r.owner.slice(r.owner.lastIndexOf(":") + 1);
      byMaster[rank] = (byMaster[rank] ?? 0) + 1;
    }
  }
  const corpus = master.corpusSeen;
  let external = 0;
  for (const h of master.external) if (corpus.has(h)) external++;
  let interesting = 0;
  for (const h of corpus) if (!master.external.has(h) && !master.baseline.has(h)) interesting++;
  const records = master.findings.list();
  const id = master.target.identity;
  return {
    observations,
    generated,
    external_inputs: external,
    interesting,
    redundant: Math.max(0, generated - interesting),
    session,
    throughput: elapsedSeconds > 0 ? session.generated / elapsedSeconds : 0,
    target: { build: master.target.build, executable: id?.executable ?? null, files: id?.files ?? [], argv: id?.argv ?? null },
    skipped_explored: master.explored.skippedCount,
    rerun_other_build: master.explored.rerunCount,
    refused_inputs: c.refusedInputs,
    // Admission adds the field with the first symbolic link it refuses (master/admission.ts).
    symlinked_inputs: c.symlinkedInputs,
    findings: {
      crashes: records.filter((r) => r.kind === "crash").length,
      hangs: records.filter((r) => r.kind === "hang").length,
      recorded_this_session: master.found.recorded,
      groups: master.findings.groups(records).map((g) => ({ signature: g.signature, kind: g.kind, count: g.inputs.length, inputs: g.inputs })),
      inputs: records.map((r) => ({
        input_hash: r.input_hash,
        kind: r.kind,
        signal: r.signal,
        exit_code: r.exit_code,
        signature: r.signature,
        first_seen: r.first_seen,
        times_seen: r.times_seen,
        stderr_tail: r.stderr_tail,
        first_build: r.first_build,
        last_build: r.last_build,
        not_reproduced_by: r.not_reproduced_by,
      })),
    },
    discovery: exploreDiscovery(records, master.epoch, observations),
    by_master: byMaster,
    elapsed_seconds: elapsedSeconds,
    masters,
    executors: { local_slots: executors.local, remote_workers: executors.remote, total: executors.local + executors.remote },
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
    `  redundant children:      ${String(s.redundant).padStart(8)}${s.generated > 0 ? ` (${((100 * s.redundant) / s.generated).toFixed(1)}% of generated)` : ""}`,
    `  target build:            ${s.target.build.padStart(8)}${s.target.executable ? ` (executable ${s.target.executable.path}${s.target.files.length > 0 ? `, ${s.target.files.length} --target-file file(s)` : ""})` : ""}`,
    `  already explored:        ${String(s.skipped_explored).padStart(8)} skipped (earlier campaigns, same build; --fresh runs them again)`,
    ...(s.rerun_other_build > 0 ? [`  run again, other build:  ${String(s.rerun_other_build).padStart(8)} (earlier campaigns explored them with another build of the target)`] : []),
    `  throughput:              ${s.throughput.toFixed(1).padStart(8)} generated/s (this session: ${s.session.generated} in ${s.elapsed_seconds.toFixed(1)} s)`,
    `  elapsed:                 ${s.elapsed_seconds.toFixed(3).padStart(8)} s`,
    `  masters used:            ${String(s.masters).padStart(8)}`,
    `  executors:               ${String(s.executors.total).padStart(8)} (${s.executors.local_slots} local slot(s), ${s.executors.remote_workers} remote worker(s))`,
    `  analysis by master:      ${(by || "-").padStart(8)}`,
    `  findings:                ${String(s.findings.crashes).padStart(8)} crash(es), ${s.findings.hangs} hang(s) under ${s.findings.groups.length} signature(s)`,
    ...renderFindings(s.findings),
    // When to stop (docs/explore.md): the chance that the next execution finds a new signature, and how many exist.
    `  new signature chance:    ${newSignatureChance(s.discovery)}`,
    `  signatures in all:       ${signaturesInAll(s.discovery)}`,
  ];
  const diag = [
    ["invalid results", s.invalid_results],
    ["stale results", s.stale_results],
    ["recovered leases", s.recovered_leases],
    ["replayed commits", s.replayed_commits],
    ["budget errors", s.budget_errors],
    ["integrity errors", s.integrity_errors],
    ["refused inputs (symlinks or special files)", s.refused_inputs],
  ].filter(([, n]) => (n as number) > 0);
  if (diag.length) lines.push(`  diagnostics:             ${diag.map(([k, n]) => `${k} ${n}`).join(", ")}`);
  return lines.join("\n");
}

/** One line per signature (bounded, escaped), with one example input and the tail's last line. */
function renderFindings(f: FindingsStats): string[] {
  const lines: string[] = [];
  for (const g of f.groups.slice(0, 20)) {
    const first = f.inputs.find((i) => i.input_hash === g.inputs[0]);
    const last = first?.stderr_tail.split("\n").filter((l) => l.trim() !== "").at(-1) ?? "";
    lines.push(`    ${g.kind} x${g.count}: ${printable(g.signature, { max: 160 })}`);
    lines.push(`      e.g. ${g.inputs[0]}${last ? `: ${printable(last, { max: 160 })}` : ""}`);
    const builds = first ? buildNote(first) : "";
    if (builds) lines.push(`      ${builds}`);
  }
  if (f.groups.length > 20) lines.push(`    … ${f.groups.length - 20} more signature(s)`);
  return lines;
}

function statsJsonRules(corpusDir: string): OutputRules {
  return {
    flag: "--stats-json",
    what: "the statistics file",
    keepOut: [
      { dir: corpusDir, what: "the corpus" },
      { dir: stateDir(corpusDir), what: "the campaign state" },
    ],
  };
}

/** Refuses a --stats-json path that could not be written, before the campaign runs rather than at its end. */
export function checkStatsJson(path: string, corpusDir: string): void {
  checkOutputFile(path, statsJsonRules(corpusDir));
}

/** Writes --stats-json as a new file renamed in (a symlink or hard link there is replaced, never written through). */
export function writeStatsJson(path: string, corpusDir: string, stats: ExploreStats, extra: Record<string, unknown>): void {
  writeOutputFile(path, JSON.stringify({ ...stats, ...extra }, null, 2) + "\n", statsJsonRules(corpusDir));
}

/** "    0.20 per execution (one in ~5 executions)": the value right-aligned in the table's column. */
function newSignatureChance(e: DiscoveryEstimate): string {
  if (e.nextNewProbability === null) return `${"-".padStart(8)} (nothing executed yet)`;
  if (e.unitsToNextNew === null) return `${"0".padStart(8)} per execution (none expected: no signature was found by one input only)`;
  return `${e.nextNewProbability.toPrecision(2).padStart(8)} per execution (one in ~${formatInt(e.unitsToNextNew)} executions)`;
}

/** "     ~47 estimated (42 seen, 95 %: 43–61)". */
function signaturesInAll(e: DiscoveryEstimate): string {
  const est = `~${Math.round(e.estimatedTotal * 10) / 10}`;
  return `${est.padStart(8)} estimated (${formatInt(e.observed)} seen, 95 %: ${formatInt(e.interval[0])}–${formatInt(e.interval[1])})`;
}
