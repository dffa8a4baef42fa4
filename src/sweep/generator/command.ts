// Building a generator invocation from the [generator] command template.
import { resolve } from "node:path";
import { fillPlaceholders, placeholdersIn } from "../../config/placeholders.ts";
import type { Config } from "../../config/schema.ts";

export interface ChunkVars {
  seedFrom: number;
  seedTo: number;
  jobs: number;
  out: string;
  maxShrinks: number;
}

/** Replaces {name} placeholders inside every argument. Unknown names were rejected when the config loaded. */
export function fillTemplate(template: readonly string[], vars: Readonly<Record<string, string | number>>): string[] {
  return template.map((arg) => fillPlaceholders(arg, vars));
}

export function chunkVars(v: ChunkVars): Record<string, string | number> {
  return {
    seed_from: v.seedFrom,
    seed_to: v.seedTo,
    count: v.seedTo - v.seedFrom + 1,
    jobs: v.jobs,
    out: v.out,
    max_shrinks: v.maxShrinks,
  };
}

/** The generator argv for one chunk: the command template, then the lane's args, both filled in. */
export function chunkCommand(command: readonly string[], laneArgs: readonly string[], v: ChunkVars): string[] {
  const vars = chunkVars(v);
  return [...fillTemplate(command, vars), ...fillTemplate(laneArgs, vars)];
}

/** Where failures/ and quarantine/ appear for a chunk whose scratch directory is `out`. */
export function resultsDir(config: Config, out: string): string {
  return resolve(config.dir, fillTemplate([config.generator.results], { out })[0]!);
}

/** A lane's args from its stored identity (`params_json`). */
export function laneArgs(paramsJson: string): string[] {
  const parsed = JSON.parse(paramsJson) as { args?: unknown };
  return Array.isArray(parsed.args) ? parsed.args.filter((a): a is string => typeof a === "string") : [];
}

/** The check argv: the template with {seeds}/{jobs} filled, then the lane's args ({jobs} filled, others left as written). */
export function checkCommand(check: readonly string[], args: readonly string[], seeds: readonly number[], jobs: number): string[] {
  const lane = args.map((a) => (placeholdersIn(a).every((n) => n === "jobs") ? fillPlaceholders(a, { jobs }) : a));
  return [...fillTemplate(check, { seeds: seeds.join(","), jobs }), ...lane];
}

/**
 * The minimize argv for a few finds of one lane: the template with {seeds} (or {seed}), {out}
 * and {jobs} filled, then the lane's args ({jobs} filled, others left as written, as for check).
 */
export function minimizeCommand(template: readonly string[], args: readonly string[], seeds: readonly number[], out: string, jobs: number): string[] {
  const lane = args.map((a) => (placeholdersIn(a).every((n) => n === "jobs") ? fillPlaceholders(a, { jobs }) : a));
  return [...fillTemplate(template, { seeds: seeds.join(","), seed: seeds[0] ?? "", out, jobs }), ...lane];
}
