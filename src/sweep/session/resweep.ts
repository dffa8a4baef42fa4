// `resweep`: re-check the seeds of open failures with the [generator] check command and close
// the ones that now pass. Nothing is shrunk and no artifact is written; the generator answers one
// JSON object per seed, {"seed": N, "bucket": "ok" | "<bucket>", "msg": "..."}, on stdout.
// Each seed is checked with the args of the lane that swept it; a failure is fixed only when
// every sampled seed, whatever its lane, passes.
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { counted, formatInt } from "../../config/format.ts";
import { printable } from "../../core/log-lines.ts";
import { loadConfig } from "../../config/load.ts";
import type { CampaignPaths } from "../../config/paths.ts";
import { checkCommand, laneArgs } from "../generator/command.ts";
import { RefusedError, UsageError } from "../../errors.ts";
import { runChild } from "../../exec/run-child.ts";
import { CampaignLock } from "../../lock/campaign-lock.ts";
import type { FailureListRow, SeedLane, SweepStore } from "../../store/port.ts";
import { openSweepStore } from "../../store/sqlite/index.ts";
import { appBuildId, generationHash } from "../../config/identity.ts";

/** Seeds re-checked per failure: they all reduce to the same minimized input, a sample suffices. */
export const SEEDS_PER_FAILURE = 64;
/** Keep each {seeds} argument well under the kernel's per-argument limit (128 KiB). */
const MAX_SEEDS_ARG_CHARS = 64 * 1024;
const CHECK_TIMEOUT_MS = 30 * 60 * 1000;

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
  /** One line per failure after the summary. */
  verbose?: boolean;
  write?: (line: string) => void;
  /** Aborted by Ctrl-C or SIGTERM (cli/stop-signals.ts): the check in flight is stopped, what was not checked stays open. */
  signal?: AbortSignal;
}

export async function resweepCommand(o: ResweepOptions): Promise<number> {
  const write = o.write ?? ((line: string) => process.stdout.write(line + "\n"));
  const config = loadConfig(o.paths.configPath);
  if (!config.generator.check) {
    throw new UsageError(`resweep needs [generator] check in ${config.path}: an argv template that re-checks {seeds} and prints JSON verdicts`);
  }
  const appBuild = appBuildId(config);
  const genHash = generationHash(config);
  const lock = CampaignLock.acquire(o.paths.outDir, { command: "resweep", forceUnlock: o.forceUnlock });
  const signal = o.signal ?? new AbortController().signal;
  const store = openSweepStore(o.paths.dbPath, { journal: config.store.journal });
  try {
    const gen = store.currentGeneration();
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
    const open = store.listFailures({ state: "open", generationId: gen.id, id: o.id }).filter(
      (f) => f.state === "open" && f.generation_id === gen.id,
    );
    if (open.length === 0) {
      write(o.id != null ? `failure #${o.id} is not an open failure of generation ${gen.id}` : "no open failures to re-sweep");
      return 0;
    }
    const plan = planChecks(store, open);
    const verdicts = new Map<string, Map<number, Verdict>>();
    const outcomes = new Map<number, Outcome>();
    let n = 0;
    // Decides (in one transaction) every failure whose lane groups have all been checked.
    const decideReady = () =>
      store.transaction(() => {
        for (const f of open) {
          if (outcomes.has(f.id)) continue;
          const seeds = plan.seedsOf.get(f.id)!;
          if (!seeds.every((s) => verdicts.has(s.lane_params))) continue;
          const bad = seeds.filter((s) => verdicts.get(s.lane_params)!.get(s.seed)?.bucket !== "ok");
          if (bad.length > 0) {
            store.touchFailure(f.id, appBuild);
            const now = [...new Set(bad.map((s) => verdicts.get(s.lane_params)!.get(s.seed)?.bucket ?? "no verdict"))].sort();
            outcomes.set(f.id, { failure: f, fixed: false, seeds: bad.map((s) => s.seed), now: now.length === 1 && now[0] === f.bucket ? null : now });
          } else {
            store.markFailureFixed(f.id, appBuild);
            outcomes.set(f.id, { failure: f, fixed: true, seeds: seeds.map((s) => s.seed), now: null });
          }
        }
      });
    write(`re-checking ${counted(open.length, "open failure")} of generation ${gen.id}: ${counted(plan.groups.size, "lane group")} to check`);
    let interrupted = false;
    for (const [params, seeds] of plan.groups) {
      const got = new Map<number, Verdict>();
      let lastOutput = "";
      const args = laneArgs(params).join(" ") || "(no lane args)";
      write(`  checking ${counted(seeds.length, "seed")} with ${args} …`);
      for (const batch of batches(seeds)) {
        const logPath = join(o.paths.outDir, "tmp", `resweep-${process.pid}-${n++}.log`);
        const r = await runChild({
          argv: checkCommand(config.generator.check, laneArgs(params), batch, o.jobs),
          cwd: config.dir,
          logPath,
          hardTimeoutMs: CHECK_TIMEOUT_MS,
          signal: signal,
        });
        lastOutput = readLog(logPath);
        rmSync(logPath, { force: true });
        if (r.outcome === "interrupted") {
          interrupted = true;
          break;
        }
        for (const [seed, v] of parseVerdicts(lastOutput)) got.set(seed, v);
      }
      if (interrupted) break;
      if (got.size === 0) {
        write(`  the check command produced no verdicts for ${args}:`);
        write(lastOutput.slice(-800));
      }
      verdicts.set(params, got);
      decideReady();
    }
    for (const line of resweepReport([...outcomes.values()], open.length, o.verbose ?? false)) write(line);
    if (interrupted) write("interrupted — failures with seeds not yet checked were left unchanged");
    return 0;
  } finally {
    store.close();
    lock.release();
  }
}

interface Outcome {
  failure: FailureListRow;
  fixed: boolean;
  /** The seeds re-checked (fixed) or still failing. */
  seeds: number[];
  /** The buckets its seeds fail with now, when they differ from the failure's own. */
  now: string[] | null;
}

/**
 * The summary first — how many fixed and still failing, overall and per bucket — then, with
 * verbose, one line per failure, in bucket then id order; a failure whose seeds now fail
 * differently stays filed under its own bucket, with the new one named.
 */
export function resweepReport(outcomes: readonly Outcome[], checked: number, verbose: boolean): string[] {
  const fixed = outcomes.filter((x) => x.fixed).length;
  const still = outcomes.length - fixed;
  const out = [`${formatInt(fixed)} fixed, ${formatInt(still)} still open${outcomes.length < checked ? `, ${formatInt(checked - outcomes.length)} not checked` : ""}`];
  const buckets = [...new Set(outcomes.map((x) => x.failure.bucket))].sort();
  for (const bucket of buckets) {
    const mine = outcomes.filter((x) => x.failure.bucket === bucket);
    const f = mine.filter((x) => x.fixed).length;
    const changed = mine.filter((x) => x.now !== null).length;
    out.push(`  ${printable(bucket, { max: 64 }).padEnd(18)} ${formatInt(f)} fixed, ${formatInt(mine.length - f)} still open${changed ? ` (${formatInt(changed)} now failing differently)` : ""}`);
  }
  if (!verbose) {
    if (outcomes.length > 0) out.push("  (one line per failure: resweep -v)");
    return out;
  }
  const ordered = [...outcomes].sort((a, b) => (a.failure.bucket < b.failure.bucket ? -1 : a.failure.bucket > b.failure.bucket ? 1 : a.failure.id - b.failure.id));
  for (const x of ordered) {
    const label = `#${x.failure.id} ${printable(x.failure.bucket, { max: 64 })}`;
    if (x.fixed) out.push(`  FIXED          ${label} (${counted(x.seeds.length, "seed")} now clean)`);
    else {
      const shown = x.seeds.slice(0, 6).join(", ") + (x.seeds.length > 6 ? " …" : "");
      out.push(`  still failing  ${label} seeds ${shown}${x.now ? `  (now: ${x.now.map((b) => printable(b, { max: 64 })).join(", ")})` : ""}`);
    }
  }
  return out;
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

interface CheckPlan {
  /** Per failure: its sampled seeds, each with the lane that swept it. */
  seedsOf: Map<number, SeedLane[]>;
  /** Per lane identity: the seeds to check with that lane's args, deduplicated and sorted. */
  groups: Map<string, number[]>;
}

/**
 * A seed only means the same test under the args of the lane that swept it, and one failure
 * collects seeds from every lane that hit its minimized input: seeds are grouped by the lane of
 * the chunk that recorded them, not by the lane of the first find.
 */
function planChecks(store: SweepStore, failures: readonly FailureListRow[]): CheckPlan {
  const seedsOf = new Map<number, SeedLane[]>();
  const grouped = new Map<string, Set<number>>();
  for (const f of failures) {
    const sampled = store.failureSeedLanes(f.id, SEEDS_PER_FAILURE);
    const seeds = sampled.length > 0 ? sampled : [{ seed: f.first_seed, lane_params: f.lane_params }];
    seedsOf.set(f.id, seeds);
    for (const s of seeds) {
      const set = grouped.get(s.lane_params) ?? new Set<number>();
      set.add(s.seed);
      grouped.set(s.lane_params, set);
    }
  }
  const groups = new Map([...grouped].map(([params, set]) => [params, [...set].sort((a, b) => a - b)]));
  return { seedsOf, groups };
}

function readLog(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}
