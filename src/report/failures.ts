// `failures`: the distinct findings, filtered. failuresData is the JSON form, renderFailures
// the text; the coordinator serves both remotely with the same filters. Buckets, messages,
// repro lines and report.txt were written by the generator: the text form shows them through
// printable(), so nothing a generator wrote reaches the terminal as a control sequence.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { printable } from "../core/log-lines.ts";
import type { Db } from "../store/db.ts";
import { currentGeneration } from "../store/generations.ts";
import { failureSeeds, listFailures, type FailureState } from "../store/failures.ts";
import { resolveStorePath } from "../generator/ingest.ts";

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
  message: string | null;
  repro: string | null;
  artifact_dir: string | null;
  first_seen: string;
  last_seen: string;
  first_app_build: string | null;
  resolved_at: string | null;
  /** Up to SEEDS_SHOWN seeds that hit it, ascending. */
  seeds: number[];
}

export interface FailuresData {
  generation: number | null;
  filters: FailureFilters;
  failures: FailureEntry[];
}

const SEEDS_SHOWN = 20;

export function failuresData(db: Db, outDir: string, requested: FailureFilters): FailuresData {
  const filters = effectiveFilters(requested);
  const gen = currentGeneration(db);
  const generationId = filters.allGenerations ? null : (gen?.id ?? -1);
  const rows = gen ? listFailures(db, { state: filters.state, bucket: filters.bucket, generationId }) : [];
  return {
    generation: gen?.id ?? null,
    filters,
    failures: rows.map((r) => ({
      id: r.id,
      generation_id: r.generation_id,
      state: r.state,
      bucket: r.bucket,
      lane: r.lane_name,
      first_seed: r.first_seed,
      hits: r.hits,
      shrunk: r.shrunk === 1,
      message: r.message,
      repro: r.repro,
      artifact_dir: r.artifact_dir === null ? null : resolveStorePath(outDir, r.artifact_dir),
      first_seen: r.first_seen,
      last_seen: r.last_seen,
      first_app_build: r.first_app_build,
      resolved_at: r.resolved_at,
      seeds: failureSeeds(db, r.id, SEEDS_SHOWN),
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
  if (d.failures.length === 0) {
    const state = d.filters.state === "all" ? "" : `${d.filters.state} `;
    const bucket = d.filters.bucket ? ` in bucket '${printable(d.filters.bucket, { max: 64 })}'` : "";
    const where = d.filters.allGenerations ? "in any generation" : `in generation ${d.generation}`;
    return `no ${state}failures${bucket} ${where}\n`;
  }
  const out: string[] = [];
  for (const f of d.failures) {
    out.push(
      `#${String(f.id).padEnd(4)} ${printable(f.bucket, { max: 64 }).padEnd(15)} ${printable(f.lane, { max: 64 }).padEnd(16)} seed ${String(
        f.first_seed,
      ).padEnd(10)} hits ${String(f.hits).padEnd(5)} ${f.state}`,
    );
    if (f.message) out.push(`      ${printable(oneLine(f.message), { max: 110 })}`);
    if (f.repro) out.push(`      repro: ${printable(f.repro, { max: 2000 })}`);
    if (!f.shrunk) out.push("      NOT MINIMIZED (shrink cap) — the minimized input is the full test; it dedupes by full source");
    if (f.artifact_dir) out.push(`      ${printable(f.artifact_dir, { max: 4096 })}`);
    if (opts.verbose && f.artifact_dir) out.push(...reportHead(f.artifact_dir, opts.lines));
    out.push("");
  }
  out.push(`${d.failures.length} failure(s)`);
  return out.join("\n") + "\n";
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
