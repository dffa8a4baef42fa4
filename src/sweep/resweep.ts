// `resweep`: re-check the seeds of open failures with the [generator] check command and close
// the ones that now pass. Nothing is shrunk and no artifact is written; the generator answers one
// JSON object per seed, {"seed": N, "bucket": "ok" | "<bucket>", "msg": "..."}, on stdout.
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { loadConfig } from "../config/load.ts";
import type { CampaignPaths } from "../config/paths.ts";
import { fillPlaceholders, placeholdersIn } from "../config/schema.ts";
import { fillTemplate } from "./command.ts";
import { RefusedError, UsageError } from "../errors.ts";
import { runChild } from "../exec/run-child.ts";
import { CampaignLock } from "../lock/campaign-lock.ts";
import { openStore } from "../store/db.ts";
import { failureSeeds, listFailures, markFailureFixed, touchFailure, type FailureListRow } from "../store/failures.ts";
import { currentGeneration } from "../store/generations.ts";
import { appBuildId, generationHash } from "./identity.ts";

/** Seeds re-checked per failure: they all reduce to the same minimized input, a sample suffices. */
export const SEEDS_PER_FAILURE = 64;
/** Keep each {seeds} argument well under the kernel's per-argument limit (128 KiB). */
const MAX_SEEDS_ARG_CHARS = 64 * 1024;
const CHECK_TIMEOUT_MS = 30 * 60 * 1000;

export function laneArgs(paramsJson: string): string[] {
  const parsed = JSON.parse(paramsJson) as { args?: unknown };
  return Array.isArray(parsed.args) ? parsed.args.filter((a): a is string => typeof a === "string") : [];
}

/** The check argv: the template with {seeds}/{jobs} filled, then the lane's args ({jobs} filled, others left as written). */
export function checkCommand(check: readonly string[], args: readonly string[], seeds: readonly number[], jobs: number): string[] {
  const lane = args.map((a) => (placeholdersIn(a).every((n) => n === "jobs") ? fillPlaceholders(a, { jobs }) : a));
  return [...fillTemplate(check, { seeds: seeds.join(","), jobs }), ...lane];
}

const verdictSchema = z.object({ seed: z.number().int(), bucket: z.string().min(1), msg: z.string().optional() });
type Verdict = z.infer<typeof verdictSchema>;

/** Verdicts from the check command's output; lines that are not verdicts are ignored. */
export function parseVerdicts(output: string): Map<number, Verdict> {
  const verdicts = new Map<number, Verdict>();
  for (const line of output.split("\n")) {
    const t = line.trim();
    if (!t.startsWith("{")) continue;
    let raw: unknown;
    try {
      raw = JSON.parse(t);
    } catch {
      continue;
    }
    const v = verdictSchema.safeParse(raw);
    if (v.success) verdicts.set(v.data.seed, v.data);
  }
  return verdicts;
}

export interface ResweepOptions {
  paths: CampaignPaths;
  id: number | null;
  jobs: number;
  forceUnlock: boolean;
  write?: (line: string) => void;
}

export async function resweepCommand(o: ResweepOptions): Promise<number> {
  const write = o.write ?? ((line: string) => process.stdout.write(line + "\n"));
  const config = loadConfig(o.paths.configPath);
  if (!config.generator.check) {
    throw new UsageError(`resweep needs [generator] check in ${config.path}: an argv template that re-checks {seeds} and prints JSON verdicts`);
  }
  const appBuild = appBuildId(config);
  const genHash = generationHash(config);
  const lock = CampaignLock.acquire(o.paths.outDir, { mode: "resweep", forceUnlock: o.forceUnlock });
  const controller = new AbortController();
  const onSignal = () => controller.abort();
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  const db = openStore(o.paths.dbPath);
  try {
    const gen = currentGeneration(db);
    if (!gen) {
      write("nothing recorded yet");
      return 0;
    }
    if (gen.gen_hash !== genHash) {
      throw new RefusedError(
        `the generator changed since generation ${gen.id} (${gen.gen_hash.slice(0, 12)} -> ${genHash.slice(0, 12)}): ` +
          "its seeds no longer mean the same tests. Run 'fuzzfleet run' to start a new generation.",
      );
    }
    const open = listFailures(db, { state: "open", generationId: gen.id, id: o.id }).filter(
      (f) => f.state === "open" && f.generation_id === gen.id,
    );
    if (open.length === 0) {
      write(o.id != null ? `failure #${o.id} is not an open failure of generation ${gen.id}` : "no open failures to re-sweep");
      return 0;
    }
    const groups = new Map<string, FailureListRow[]>();
    for (const f of open) groups.set(f.lane_params, [...(groups.get(f.lane_params) ?? []), f]);
    let fixed = 0;
    let still = 0;
    let n = 0;
    for (const [params, failures] of groups) {
      const seedsOf = new Map<number, number[]>();
      for (const f of failures) {
        const seeds = failureSeeds(db, f.id).slice(0, SEEDS_PER_FAILURE);
        seedsOf.set(f.id, seeds.length > 0 ? seeds : [f.first_seed]);
      }
      const all = [...new Set([...seedsOf.values()].flat())].sort((a, b) => a - b);
      const verdicts = new Map<number, Verdict>();
      let lastOutput = "";
      for (const batch of batches(all)) {
        const logPath = join(o.paths.outDir, "tmp", `resweep-${process.pid}-${n++}.log`);
        const r = await runChild({
          argv: checkCommand(config.generator.check, laneArgs(params), batch, o.jobs),
          cwd: config.dir,
          logPath,
          hardTimeoutMs: CHECK_TIMEOUT_MS,
          signal: controller.signal,
        });
        lastOutput = readLog(logPath);
        rmSync(logPath, { force: true });
        if (r.outcome === "interrupted") {
          write("interrupted — nothing of the unfinished group was changed");
          write(`\n${fixed} fixed, ${still + countRemaining(groups, params)} still open`);
          return 0;
        }
        for (const [seed, v] of parseVerdicts(lastOutput)) verdicts.set(seed, v);
      }
      if (verdicts.size === 0) {
        write(`  the check command produced no verdicts for lane args ${laneArgs(params).join(" ") || "(none)"}:`);
        write(lastOutput.slice(-800));
        still += failures.length;
        continue;
      }
      db.transaction(() => {
        for (const f of failures) {
          const seeds = seedsOf.get(f.id)!;
          const bad = seeds.filter((s) => verdicts.get(s)?.bucket !== "ok");
          if (bad.length > 0) {
            still++;
            touchFailure(db, f.id);
            const now = [...new Set(bad.map((s) => verdicts.get(s)?.bucket ?? "no verdict"))];
            const differs = now.length !== 1 || now[0] !== f.bucket ? `  (now: ${now.join(", ")})` : "";
            write(`  still failing  #${f.id} ${f.bucket} seeds ${bad.slice(0, 6).join(", ")}${bad.length > 6 ? " …" : ""}${differs}`);
          } else {
            fixed++;
            markFailureFixed(db, f.id, appBuild);
            write(`  FIXED          #${f.id} ${f.bucket} (${seeds.length} seed(s) now clean)`);
          }
        }
      })();
    }
    write(`\n${fixed} fixed, ${still} still open`);
    return 0;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    db.close();
    lock.release();
  }
}

function batches(seeds: number[]): number[][] {
  const out: number[][] = [];
  let cur: number[] = [];
  let chars = 0;
  for (const s of seeds) {
    const len = String(s).length + 1;
    if (cur.length > 0 && chars + len > MAX_SEEDS_ARG_CHARS) {
      out.push(cur);
      cur = [];
      chars = 0;
    }
    cur.push(s);
    chars += len;
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

function countRemaining(groups: Map<string, FailureListRow[]>, from: string): number {
  let seen = false;
  let n = 0;
  for (const [k, v] of groups) {
    if (k === from) seen = true;
    if (seen) n += v.length;
  }
  return n;
}

function readLog(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}
