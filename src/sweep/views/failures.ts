// `failures`: the distinct failures, filtered, and the finds still pending minimization grouped by
// signature, so that every find is counted once and the counts add up: hits of the distinct
// failures plus hits pending = every seed that failed. failuresData is the JSON form,
// renderFailures the text (one line per distinct failure; -v a block each); the coordinator
// serves both remotely with the same filters. Buckets, messages,
// repro lines and report.txt were written by the generator: the text form shows them through
// printable(), so nothing a generator wrote reaches the terminal as a control sequence.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { printable } from "../../core/log-lines.ts";
import { formatInt } from "../../config/format.ts";
import type { FailureState, PendingGroup, SweepStore } from "../../store/port.ts";
import { resolveStorePath } from "../generator/ingest.ts";
import { buildName } from "./builds.ts";

export interface FailureFilters {
  state: FailureState | "all";
  bucket: string | null;
  /** Implied by state 'stale': stale failures always belong to earlier generations. */
  allGenerations: boolean;
}

/** The filters as applied: --state stale reads every generation, since only earlier ones have stale failures. */
export function effectiveFilters(filters: FailureFilters): FailureFilters {
  return filters.state === "stale" ? { ...filters, allGenerations: true } : filters;
}

export const NOTHING_RECORDED = "no sweeps recorded yet — fuzzfleet run --for 30m";

export interface FailureEntry {
  id: number;
  generation_id: number;
  state: FailureState;
  bucket: string;
  lane: string;
  first_seed: number;
  hits: number;
  shrunk: boolean;
  /** The first level of identity: bucket and normalised message, or what the generator wrote. */
  signature: string;
  message: string | null;
  repro: string | null;
  artifact_dir: string | null;
  first_seen: string;
  last_seen: string;
  /** The app builds it was first and last seen under, and the one `resweep` found it fixed in (null: none named, or not fixed). */
  first_app_build: string | null;
  last_app_build: string | null;
  fixed_app_build: string | null;
  resolved_at: string | null;
  /** Up to SEEDS_SHOWN seeds that hit it, ascending. */
  seeds: number[];
}

/** Which slice of the distinct failures to show: `limit` a page, pages counted from 1. */
export interface FailurePaging {
  limit: number;
  page: number;
}

/** What `failures` shows when no page is asked for. */
export const DEFAULT_PAGING: FailurePaging = { limit: 100, page: 1 };

export interface FailuresData {
  generation: number | null;
  filters: FailureFilters;
  /** The page shown, and how many distinct failures and pages there are in all. */
  page: FailurePaging & { total: number; pages: number };
  /** Distinct failures: one per minimized-input key; only the page asked for. */
  failures: FailureEntry[];
  /** Finds not minimized yet, grouped by signature: not distinct failures. */
  pending: PendingGroup[];
  totals: FailureTotals;
}

export interface FailureTotals {
  distinct: number;
  distinct_hits: number;
  pending_finds: number;
  pending_hits: number;
  /** distinct_hits + pending_hits: every seed that failed, once. */
  hits: number;
}

/** The totals of distinct failures (rows, or groups carrying `distinct`) and pending groups. */
export function failureTotals(failures: readonly { hits: number; distinct?: number }[], pending: readonly PendingGroup[]): FailureTotals {
  const distinctHits = failures.reduce((n, f) => n + f.hits, 0);
  const pendingHits = pending.reduce((n, g) => n + g.hits, 0);
  return {
    distinct: failures.reduce((n, f) => n + (f.distinct ?? 1), 0),
    distinct_hits: distinctHits,
    pending_finds: pending.reduce((n, g) => n + g.finds, 0),
    pending_hits: pendingHits,
    hits: distinctHits + pendingHits,
  };
}

const SEEDS_SHOWN = 20;

/**
 * Reads the page asked for and the counts of all: its cost follows the rows shown and the distinct
 * failures, never the hits.
 */
export function failuresData(store: SweepStore, outDir: string, requested: FailureFilters, paging: FailurePaging = DEFAULT_PAGING): FailuresData {
  const filters = effectiveFilters(requested);
  const gen = store.currentGeneration();
  const generationId = filters.allGenerations ? null : (gen?.id ?? -1);
  const filter = { state: filters.state, bucket: filters.bucket, generationId };
  const rows = gen ? store.failurePage(filter, paging.limit, (paging.page - 1) * paging.limit) : [];
  const counted = gen ? store.countFailures(filter) : { distinct: 0, hits: 0 };
  const pending = gen ? store.pendingGroups(filter) : [];
  return {
    generation: gen?.id ?? null,
    filters,
    page: { ...paging, total: counted.distinct, pages: Math.ceil(counted.distinct / paging.limit) },
    totals: failureTotals([{ hits: counted.hits, distinct: counted.distinct }], pending),
    pending,
    failures: rows.map((r) => ({
      id: r.id,
      generation_id: r.generation_id,
      state: r.state,
      bucket: r.bucket,
      lane: r.lane_name,
      first_seed: r.first_seed,
      hits: r.hits,
      shrunk: r.shrunk === 1,
      signature: r.signature ?? r.bucket,
      message: r.message,
      repro: r.repro,
      artifact_dir: r.artifact_dir === null ? null : resolveStorePath(outDir, r.artifact_dir),
      first_seen: r.first_seen,
      last_seen: r.last_seen,
      first_app_build: r.first_app_build,
      last_app_build: r.last_app_build,
      fixed_app_build: r.resolved_app_build,
      resolved_at: r.resolved_at,
      seeds: store.failureSeeds(r.id, SEEDS_SHOWN),
    })),
  };
}

export interface RenderFailureOptions {
  verbose: boolean;
  /** report.txt lines shown with verbose. */
  lines: number;
}

export function renderFailures(d: FailuresData, opts: RenderFailureOptions): string {
  if (d.generation === null) return `${NOTHING_RECORDED}\n`;
  if (d.failures.length === 0 && d.page.total > 0) {
    return `page ${d.page.page} is past the last: ${counted(d.page.total, "distinct failure")} make ${counted(d.page.pages, "page")} of ${d.page.limit} (--page 1 to --page ${d.page.pages})\n`;
  }
  if (d.failures.length === 0 && d.pending.length === 0) {
    const state = d.filters.state === "all" ? "" : `${d.filters.state} `;
    const bucket = d.filters.bucket ? ` in bucket '${printable(d.filters.bucket, { max: 64 })}'` : "";
    const where = d.filters.allGenerations ? "in any generation" : `in generation ${d.generation}`;
    return `no ${state}failures${bucket} ${where}\n`;
  }
  const out: string[] = opts.verbose ? verboseEntries(d, opts) : d.failures.map(failureLine);
  if (d.page.total > d.failures.length && d.failures.length > 0) {
    const first = (d.page.page - 1) * d.page.limit + 1;
    const next = d.page.page < d.page.pages ? `; --page ${d.page.page + 1} for the next` : "";
    out.push(`(distinct failures ${formatInt(first)}–${formatInt(first + d.failures.length - 1)} of ${formatInt(d.page.total)}: page ${d.page.page} of ${d.page.pages}${next}, --limit N for more a page)`);
  }
  if (d.failures.length > 0 && !opts.verbose) out.push("");
  out.push(...pendingLines(d.pending));
  out.push(totalsLine(d.totals));
  return out.join("\n") + "\n";
}

/** One line: id, state, bucket, hits, the lowest seeds, the signature, and its builds when it has any. */
function failureLine(f: FailureEntry): string {
  const seeds = f.seeds.slice(0, 3).join(", ") + (f.hits > 3 ? " …" : "");
  const builds = hasBuilds(f) ? `  [${buildsText(f)}]` : "";
  return `#${String(f.id).padEnd(4)} ${f.state.padEnd(5)} ${printable(f.bucket, { max: 64 }).padEnd(15)} hits ${String(f.hits).padEnd(6)} seeds ${seeds.padEnd(
    22,
  )} ${printable(signatureText(f.bucket, f.signature), { max: 90 })}${builds}`;
}

function hasBuilds(f: FailureEntry): boolean {
  return f.first_app_build !== null || f.last_app_build !== null || f.fixed_app_build !== null;
}

/** "first seen 3f2a91c0d4e5, last seen 9b1c22aa0f13, fixed in 77aa01be3c90" (fixed only when it is). */
function buildsText(f: FailureEntry): string {
  const fixed = f.state === "fixed" ? `, fixed in ${buildName(f.fixed_app_build)}` : "";
  return `first seen ${buildName(f.first_app_build)}, last seen ${buildName(f.last_app_build)}${fixed}`;
}

/** The signature without the bucket it starts with (the line shows the bucket already). */
function signatureText(bucket: string, signature: string): string {
  return signature.startsWith(`${bucket}: `) ? signature.slice(bucket.length + 2) || "(no message)" : signature;
}

export function pendingLines(pending: readonly PendingGroup[]): string[] {
  if (pending.length === 0) return [];
  const finds = pending.reduce((n, g) => n + g.finds, 0);
  const out = [`pending minimization — not distinct failures yet (${counted(finds, "find")} in ${counted(pending.length, "signature")}):`];
  for (const g of pending) {
    const extra = [
      g.running > 0 ? `${formatInt(g.running)} minimizing` : "",
      g.failed > 0 ? `${formatInt(g.failed)} could not be minimized` : "",
      g.distinct > 0 ? `${counted(g.distinct, "distinct failure")} known` : "",
    ].filter((x) => x !== "");
    out.push(
      `  ${g.state.padEnd(5)} ${printable(g.bucket, { max: 64 }).padEnd(15)} ${counted(g.finds, "find").padEnd(10)} hits ${formatInt(g.hits).padEnd(6)} seed ${String(
        g.first_seed,
      ).padEnd(10)} ${printable(signatureText(g.bucket, g.signature), { max: 90 })}${extra.length ? `  (${extra.join(", ")})` : ""}`,
    );
  }
  out.push("");
  return out;
}

export function totalsLine(t: FailureTotals): string {
  return `${counted(t.distinct, "distinct failure")} (${counted(t.distinct_hits, "hit")}) + ${counted(t.pending_finds, "find")} pending minimization (${counted(
    t.pending_hits,
    "hit",
  )}) = ${counted(t.hits, "hit")}`;
}

function counted(n: number, what: string): string {
  return `${formatInt(n)} ${what}${n === 1 ? "" : "s"}`;
}

function verboseEntries(d: FailuresData, opts: RenderFailureOptions): string[] {
  const out: string[] = [];
  for (const f of d.failures) {
    out.push(
      `#${String(f.id).padEnd(4)} ${printable(f.bucket, { max: 64 }).padEnd(15)} ${printable(f.lane, { max: 64 }).padEnd(16)} seed ${String(
        f.first_seed,
      ).padEnd(10)} hits ${String(f.hits).padEnd(5)} ${f.state}`,
    );
    out.push(`      signature: ${printable(f.signature, { max: 200 })}`);
    if (hasBuilds(f)) out.push(`      app build: ${buildsText(f)}`);
    out.push(`      seeds: ${f.seeds.join(", ")}${f.hits > f.seeds.length ? " …" : ""}`);
    if (f.message) out.push(`      ${printable(oneLine(f.message), { max: 110 })}`);
    if (f.repro) out.push(`      repro: ${printable(f.repro, { max: 2000 })}`);
    if (f.artifact_dir) out.push(`      ${printable(f.artifact_dir, { max: 4096 })}`);
    if (opts.verbose && f.artifact_dir) out.push(...reportHead(f.artifact_dir, opts.lines));
    out.push("");
  }
  return out;
}

export function oneLine(s: string): string {
  return s.replace(/\s+/g, " ").trim();
}

/** A report.txt line longer than this is cut where `failures -v` shows it (export shows it whole). */
const REPORT_LINE_MAX_CHARS = 1000;

function reportHead(dir: string, lines: number): string[] {
  let text: string;
  try {
    text = readFileSync(join(dir, "report.txt"), "utf8");
  } catch {
    return ["      | (no report.txt in the artifact directory)"];
  }
  const all = text.replace(/\n$/, "").split("\n");
  const shown = all.slice(0, lines).map((l) => `      | ${printable(l, { max: REPORT_LINE_MAX_CHARS, tabs: true })}`);
  if (all.length > lines) shown.push(`      | … ${all.length - lines} more lines in report.txt (raise --lines)`);
  return shown;
}
