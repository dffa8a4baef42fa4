// `status`: what the store says about the current generation. statusData gathers it (the JSON
// form), renderStatus prints it; the coordinator serves the same two functions remotely. Names
// that come from the generator or the store (buckets, lanes, args, hosts) are shown through
// printable().
import { join } from "node:path";
import { printable } from "../../core/log-lines.ts";
import { formatDuration } from "../../config/duration.ts";
import { counted, formatInt, formatRate } from "../../config/format.ts";
import { isPlantedReason } from "../generator/quarantine-reasons.ts";
import { reasonList, type ChunkTotals, type FailureGroup, type MinimizeProgress, type PendingGroup, type QuarantineGroup, type SweepStore } from "../../store/port.ts";
import { LAST_SEED, SEED_LIMIT } from "../../core/ranges.ts";
import { failureTotals, NOTHING_RECORDED, pendingLines, totalsLine, type FailureTotals } from "./failures.ts";
import { nextNewText, sweepDiscovery, totalText, type SweepDiscovery } from "./discovery.ts";
import { buildLines, buildsNamed, lastSessionBuild, laneBuildsView, type LaneBuildsView } from "./builds.ts";

export interface LaneStatus {
  name: string;
  base_seed: number;
  /** Coverage is [base_seed, cursor): `covered` seeds, next seed = cursor. */
  covered: number;
  cursor: number;
  seeds_per_sec: number | null;
  /** Seeds in complete chunks above the cursor: NOT coverage. */
  done_ahead: number;
  args: string[];
  /** False for a configured lane with no row in this generation yet (after a reset, or a lane just added): it starts at base_seed. */
  started: boolean;
  /** Every seed up to the last exact seed is covered: nothing is left to sweep. */
  exhausted: boolean;
  /** Which seed ranges each app build swept, and the current build's part of the prefix; null for a lane not started. */
  builds: LaneBuildsView | null;
}

export interface StatusData {
  generation: { id: number; gen_hash: string; created_at: string; note: string | null } | null;
  /** The generator on disk when it differs from the generation's (null when equal or unknown). */
  generator_now: string | null;
  app_build: string | null;
  /**
   * The build `lanes[].builds` compares against: the config's app build when the config loads
   * (`app_build`), else that of the last session.
   */
  current_build: string | null;
  lanes: LaneStatus[];
  totals: ChunkTotals;
  /** Complete chunks per app build (null: chunks that named none), the generation's lanes together. */
  app_builds: { app_build: string | null; chunks: number; seeds: number; finds: number }[];
  /** When to stop: the chance that the next seed finds a new distinct failure, and how many exist (docs/sweep.md). */
  discovery: SweepDiscovery | null;
  /** Distinct failures per state and bucket. */
  failures: FailureGroup[];
  /** Finds pending minimization, per state, bucket and signature (this generation, open ones). */
  pending: PendingGroup[];
  /** distinct failures and their hits, pending finds and theirs: they add up to every failing seed. */
  failure_totals: FailureTotals;
  /** Where minimization stands (this generation's open finds; units complete and their time). */
  minimize: MinimizeProgress;
  /** Quarantined tests by reason; an inconclusive reason is not a generator bug. */
  quarantine_reasons: QuarantineGroup[];
  stale_failures: number;
  /** Where quarantined samples of this generation are kept. */
  quarantine_samples: string | null;
  sessions: {
    id: number;
    status: string;
    started_at: string;
    ended_at: string | null;
    requested_seconds: number | null;
    mode: string;
    coordinator_host: string | null;
  }[];
}

export interface StatusContext {
  /** Generation hash of the generator on disk, when the config could be read. */
  genHashNow: string | null;
  appBuildNow: string | null;
  outDir: string;
  /** Lane names in config order, when the config loads; lanes are listed in this order, others after in row order. */
  laneOrder?: readonly string[] | null;
  /** The configured lanes, when the config loads: those with no row in the generation yet are shown as not started. */
  configured?: readonly { name: string; baseSeed: number; args: readonly string[] }[] | null;
}

/** What status reports for a campaign that has recorded nothing (no store, or no generation yet). */
export function emptyStatus(ctx: StatusContext): StatusData {
  return {
    generation: null,
    generator_now: null,
    app_build: ctx.appBuildNow,
    current_build: ctx.appBuildNow,
    lanes: [],
    totals: { seeds: 0, seconds: 0, chunks: 0, aborted: 0, reissued: 0, quarantine: 0 },
    app_builds: [],
    discovery: null,
    failures: [],
    pending: [],
    failure_totals: failureTotals([], []),
    minimize: { pending: 0, running: 0, failed: 0, done: 0, units: 0, unit_seconds: 0 },
    quarantine_reasons: [],
    stale_failures: 0,
    quarantine_samples: null,
    sessions: [],
  };
}

export function statusData(store: SweepStore, ctx: StatusContext): StatusData {
  const gen = store.currentGeneration();
  if (!gen) return emptyStatus(ctx);
  const rows = store.activeLanes(gen.id);
  const started = new Set(rows.map((l) => l.name));
  const currentBuild = ctx.configured != null ? ctx.appBuildNow : lastSessionBuild(store);
  const lanes = inConfigOrder(
    [
      ...rows.map(
        (l): LaneStatus & { id: number } => ({
          id: l.id,
          name: l.name,
          base_seed: l.base_seed,
          covered: l.cursor - l.base_seed,
          cursor: l.cursor,
          seeds_per_sec: l.seeds_per_sec,
          done_ahead: store.doneAheadOfCursor(l.id, l.cursor),
          args: (JSON.parse(l.params_json) as { args?: string[] }).args ?? [],
          started: true,
          exhausted: l.cursor >= SEED_LIMIT,
          builds: laneBuildsView(store, l, currentBuild),
        }),
      ),
      ...(ctx.configured ?? [])
        .filter((c) => !started.has(c.name))
        .map((c): LaneStatus & { id: number } => ({
          id: Number.MAX_SAFE_INTEGER,
          name: c.name,
          base_seed: c.baseSeed,
          covered: 0,
          cursor: c.baseSeed,
          seeds_per_sec: null,
          done_ahead: 0,
          args: [...c.args],
          started: false,
          exhausted: false,
          builds: null,
        })),
    ],
    ctx.laneOrder ?? null,
  ).map(({ id: _id, ...lane }) => lane);
  const tallies = store.laneTallies(gen.id);
  const totals = store.chunkTotals(gen.id);
  const builds = new Map<string | null, StatusData["app_builds"][number]>();
  for (const t of tallies) {
    const b = builds.get(t.app_build) ?? { app_build: t.app_build, chunks: 0, seeds: 0, finds: 0 };
    b.chunks += t.chunks;
    b.seeds += t.seeds;
    b.finds += t.finds;
    builds.set(t.app_build, b);
  }
  const discovery = sweepDiscovery(
    store,
    gen.id,
    store.seedsSwept(gen.id),
    rows.map((l) => ({ id: l.id, name: l.name, seeds: store.laneSeedsSwept(l.id) })),
  );
  const failures = store.failureGroups(gen.id);
  const pending = store.pendingGroups({ state: "all", generationId: gen.id });
  return {
    generation: { id: gen.id, gen_hash: gen.gen_hash, created_at: gen.created_at, note: gen.note },
    generator_now: ctx.genHashNow && ctx.genHashNow !== gen.gen_hash ? ctx.genHashNow : null,
    app_build: ctx.appBuildNow,
    current_build: currentBuild,
    lanes,
    totals,
    app_builds: [...builds.values()].filter((b) => b.chunks > 0),
    discovery,
    failures,
    pending,
    failure_totals: failureTotals(failures, pending),
    minimize: store.minimizeProgress(gen.id),
    quarantine_reasons: store.quarantineGroups(gen.id),
    stale_failures: store.staleFailureCount(),
    quarantine_samples: join(ctx.outDir, "quarantine", gen.gen_hash.slice(0, 12)),
    sessions: store.recentSessions(3).map((s) => ({
      id: s.id,
      status: s.status,
      started_at: s.started_at,
      ended_at: s.ended_at,
      requested_seconds: s.requested_seconds,
      mode: s.mode,
      coordinator_host: s.coordinator_host,
    })),
  };
}

/** Config order first (the order users wrote and the tie-break order), then unconfigured lanes by row id. */
function inConfigOrder<T extends { name: string; id: number }>(rows: T[], order: readonly string[] | null): T[] {
  if (order === null) return rows;
  const rank = (name: string) => {
    const i = order.indexOf(name);
    return i === -1 ? order.length : i;
  };
  return [...rows].sort((a, b) => rank(a.name) - rank(b.name) || a.id - b.id);
}

/** `quarantineNote` replaces the quarantine warning where quarantine is expected (the demo's generator). */
export function renderStatus(d: StatusData, o: { quarantineNote?: string } = {}): string {
  if (!d.generation) return `${NOTHING_RECORDED}\n`;
  const g = d.generation;
  const out: string[] = [];
  out.push(`generation ${g.id}  ${g.gen_hash.slice(0, 12)}  (started ${g.created_at})`);
  if (d.generator_now) {
    out.push(`  !! the generator is now ${d.generator_now.slice(0, 12)} — the next run starts a new generation`);
  }
  if (d.app_build) out.push(`  app build ${d.app_build}`);
  out.push("");
  out.push(`${"lane".padEnd(16)} ${"covered".padStart(12)} ${"next seed".padStart(12)} ${"seeds/s".padStart(10)}  args`);
  for (const l of d.lanes) {
    let line = `${printable(l.name, { max: 64 }).padEnd(16)} ${formatInt(l.covered).padStart(12)} ${formatInt(l.cursor).padStart(12)} ${formatRate(
      l.seeds_per_sec,
    ).padStart(10)}  ${printable(l.args.join(" "), { max: 1000 }) || "-"}`;
    if (l.done_ahead > 0) line += `   +${formatInt(l.done_ahead)} done ahead of cursor (not coverage)`;
    if (!l.started) line += "   (not started in this generation yet)";
    if (l.exhausted) line += `   EXHAUSTED: every seed up to ${formatInt(LAST_SEED)}, the last exact one, is covered`;
    out.push(line);
  }
  if (buildsNamed(d.lanes, d.current_build)) out.push("", ...buildLines(d.lanes, d.current_build));
  out.push("");
  out.push(
    `${formatInt(d.totals.seeds)} seeds swept in ${formatDuration(d.totals.seconds)} of chunk time, ${formatInt(d.totals.chunks)} complete chunk(s)`,
  );
  if (d.totals.aborted > 0) out.push(`${d.totals.aborted} aborted chunk(s) — their ranges were not counted as covered`);
  if (d.totals.reissued > 0) out.push(`${d.totals.reissued} reissued chunk(s) — a worker's lease ended and the range went back on the queue`);
  if (d.app_builds.length > 1 || d.app_builds.some((b) => b.app_build !== null)) {
    for (const b of d.app_builds) {
      out.push(`  app build ${printable(b.app_build ?? "(none named)", { max: 80 })}: ${formatInt(b.seeds)} seeds in ${formatInt(b.chunks)} chunk(s), ${counted(b.finds, "find")}`);
    }
  }
  out.push(...quarantineLines(d, o.quarantineNote));
  out.push("");
  if (d.failures.length === 0 && d.pending.length === 0) {
    out.push("no failures recorded in this generation");
  } else {
    out.push("failures (this generation):");
    for (const f of d.failures) {
      out.push(`  ${f.state.padEnd(6)} ${printable(f.bucket, { max: 64 }).padEnd(18)} ${formatInt(f.distinct)} distinct, ${counted(f.hits, "hit")}`);
    }
    out.push(...pendingLines(d.pending).map((l) => (l === "" ? l : `  ${l}`)));
    out.push(`  ${totalsLine(d.failure_totals)}`);
    const m = d.minimize;
    if (m.done + m.failed + m.running + m.units > 0) {
      out.push(
        `  minimization: ${formatInt(m.done)} minimized, ${formatInt(m.running)} running, ${formatInt(m.pending)} waiting, ${formatInt(m.failed)} could not be minimized; ` +
          `${counted(m.units, "unit")} in ${formatDuration(m.unit_seconds)}`,
      );
    }
  }
  if (d.stale_failures > 0) out.push(`  (${d.stale_failures} failure(s) from earlier generations are stale)`);
  if (d.discovery) out.push("", ...discoveryLines(d.discovery));
  out.push("");
  out.push("recent sessions:");
  for (const s of d.sessions) {
    const requested = s.requested_seconds != null ? `  (${formatDuration(s.requested_seconds)} requested)` : "";
    const where = s.mode === "distributed" ? `  [distributed on ${printable(s.coordinator_host ?? "?", { max: 255 })}]` : "";
    const end = s.status === "crashed" ? "?  (the process died without closing the session)" : (s.ended_at ?? "…");
    out.push(`  #${s.id} ${s.status}  ${s.started_at} -> ${end}${requested}${where}`);
  }
  return out.join("\n") + "\n";
}

/** When to stop: the campaign's estimate, then each lane's. */
function discoveryLines(d: SweepDiscovery): string[] {
  const line = (name: string, e: SweepDiscovery["campaign"]) =>
    `  ${printable(name, { max: 64 }).padEnd(16)} new failure: ${nextNewText(e)}; distinct failures: ${totalText(e)}`;
  return [
    "when to stop (Good-Turing chance that the next seed finds a new distinct failure; Chao2 estimate of how many exist — docs/sweep.md):",
    line("all lanes", d.campaign),
    ...d.lanes.map((l) => line(l.lane, l)),
  ];
}

/**
 * Quarantined tests by reason. Only reasons that mean an invalid test (the generator's bug) carry
 * the warning; inconclusive ones (a reference that ran too long) and invalid tests emitted on
 * purpose ("planted:") are counted plainly.
 */
function quarantineLines(d: StatusData, note: string | undefined): string[] {
  if (d.totals.quarantine === 0) return [];
  const invalid = d.quarantine_reasons.filter((g) => !g.inconclusive && !isPlantedReason(g.reason));
  const planted = d.quarantine_reasons.filter((g) => !g.inconclusive && isPlantedReason(g.reason));
  const inconclusive = d.quarantine_reasons.filter((g) => g.inconclusive);
  const shown = (groups: readonly QuarantineGroup[]) => printable(reasonList(groups), { max: 2000 });
  const out: string[] = [];
  if (note) {
    out.push(`quarantine: ${formatInt(d.totals.quarantine)} — ${note} (${shown(d.quarantine_reasons)}). Samples: ${d.quarantine_samples}`);
    return out;
  }
  if (inconclusive.length > 0) {
    const n = inconclusive.reduce((k, g) => k + g.count, 0);
    out.push(`quarantine: ${formatInt(n)} inconclusive test(s), no verdict (not a generator bug): ${shown(inconclusive)}`);
  }
  if (planted.length > 0) {
    const n = planted.reduce((k, g) => k + g.count, 0);
    out.push(`quarantine: ${formatInt(n)} invalid test(s) the generator emitted on purpose: ${shown(planted)}`);
  }
  if (invalid.length > 0) {
    const n = invalid.reduce((k, g) => k + g.count, 0);
    out.push(`QUARANTINE: ${formatInt(n)} test(s) the generator emitted were invalid (${shown(invalid)}) — its`);
    out.push(`  verdicts are only trustworthy while this is 0. Samples: ${d.quarantine_samples}`);
  } else {
    out.push(`  samples: ${d.quarantine_samples}`);
  }
  return out;
}
