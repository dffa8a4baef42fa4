// `explore`: one master of an explore campaign, start to final statistics. A master is alone, the
// root of several (--masters N, rank 0), or a submaster (--join ROOT:PORT) (roles.ts). The loop
// itself (rescans, heartbeats, local slots, dispatch) is the same for all three (master-loop.ts);
// what differs is how it ends (fleet/endings.ts) and how the statistics come together
// (fleet/stats-round.ts):
//
//   check flags and directories -> (submaster: the root's token) -> lock (not a submaster)
//   -> epoch: new, resumed, or the root's -> master + loop -> the role's ending
//   -> (--resume: redo commits, take over leases) -> first admission -> loop -> shutdown
//   -> statistics: a submaster reports to the root; the root or a lone master prints them, and
//      removes the hidden state after a clean end; the root then releases the submasters
import { mkdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { formatDuration } from "../../config/duration.ts";
import { UsageError } from "../../errors.ts";
import { CampaignLock } from "../../lock/campaign-lock.ts";
import { serverToken } from "../../net/token.ts";
import { DEFAULT_STOP_GRACE_SECONDS, removeNonce, writeNonce, type Nonce } from "../../net/worker-service.ts";
import { DEFAULT_BUDGETS, DEFAULT_FINALIZE_SECONDS, type Budgets } from "../defaults.ts";
import type { EndReason } from "../fleet/endings.ts";
import type { CampaignSetup } from "../fleet/peers.ts";
import { ExploreMaster, type Ownership } from "../master/master.ts";
import { LeaseTable } from "../state/lease-table.ts";
import { openEpoch, removeIfEmpty, SHARD_COUNT, stateDir, workDir as workDirOf } from "../state/work-dir.ts";
import { clearPublishTemps, publishTempDir, setCorpusMode } from "../state/corpus.ts";
import { AflExport } from "./afl-export.ts";
import { checkInputDirs } from "./input-dirs.ts";
import { ADMIT_BATCH, MasterLoop } from "./master-loop.ts";
import { ENDED, exhausted, exitCodeOf } from "./outcome.ts";
import { JOIN_WAIT_SECONDS, joinRootEpoch, roleOf, rootToken, startEnding, type EndRounds, type Links, type Role, type StartedMaster } from "./roles.ts";
import { checkStatsJson, computeStats, renderStats, writeStatsJson, type ExploreStats } from "./stats.ts";
import { findStaleWork, staleWorkLines } from "../state/stale-work.ts";
import { banner, report, type Place } from "./banner.ts";
import type { UiAddress } from "../../ui/address.ts";
import type { DashboardSnapshot } from "../../ui/source.ts";
import { ExploreDashboardSource, type ExploreLive } from "./dashboard.ts";
import type { ServedExploreDashboard } from "./serve-dashboard.ts";
import type { Problem } from "../../core/problems.ts";

export interface ExploreOptions {
  /** One input directory, or several (`-i a -i b`): all admitted. */
  inputDir: string | readonly string[];
  corpusDir: string;
  target: string[];
  slots: number;
  timeoutSeconds: number;
  maxIdleSeconds: number;
  wallTimeoutSeconds: number;
  simulate: boolean;
  port: number | null;
  bind: string | null;
  token: string | undefined;
  statsJson: string | null;
  resumeEpoch: string | null;
  leaseTtlSeconds: number | null;
  budgets?: Budgets;
  ownership?: Ownership;
  /** Several masters: the root's total (--masters N, with --port). */
  masters?: number;
  /** A submaster: the root's address (--join). */
  join?: { host: string; port: number } | null;
  /** Lost-master and shutdown grace (seconds); default max(120, 4 x timeout). */
  graceSeconds?: number | null;
  /** How long remote workers have to acknowledge the stop (seconds); default DEFAULT_STOP_GRACE_SECONDS. */
  stopGraceSeconds?: number;
  /** Run content that earlier campaigns on this corpus already explored again (their ledgers are ignored). */
  fresh?: boolean;
  /** How long the root waits for every master to join, and a submaster for the roster. */
  joinTimeoutSeconds?: number;
  /** Bound of the final rendezvous (seconds). */
  finalizeSeconds?: number;
  /** Which lease-record writes are fsynced (see LeaseTable): default "fence". */
  durability?: "fence" | "all";
  /** Keep following the inputs: an idle frontier never ends the campaign (--follow). */
  follow?: boolean;
  /** The mode of corpus files this process creates (--corpus-mode); default 0600. */
  corpusMode?: number | null;
  /** Export new inputs into this AFL++ sync directory (--afl-sync). */
  aflSync?: string | null;
  /** New crashes or hangs make the exit code 1 (--fail-on-findings). */
  failOnFindings?: boolean;
  write?: (line: string) => void;
  /** --ui: serve the live dashboard and /metrics there. */
  ui?: UiAddress | null;
  /** The terminal view: given the campaign's snapshot, it takes every line written from then on until it is closed. */
  view?: ((snapshot: () => DashboardSnapshot) => { line(text: string): void; close(): void }) | null;
  signal: AbortSignal;
}


export async function explore(o: ExploreOptions): Promise<number> {
  const out = o.write ?? ((line: string) => process.stdout.write(line + "\n"));
  // Once the terminal view is up, every line goes above it.
  let view: { line(text: string): void; close(): void } | null = null;
  const write = (line: string) => (view ? view.line(line) : out(line));
  let dashboard: ServedExploreDashboard | null = null;
  const startMs = performance.now();
  const now = () => performance.now();
  const budgets = o.budgets ?? DEFAULT_BUDGETS;
  const corpusDir = resolve(o.corpusDir);
  const inputDirs = checkInputDirs(typeof o.inputDir === "string" ? [o.inputDir] : o.inputDir, corpusDir);
  // One directory is named as it always was; several as a list (every master must agree on it).
  const inputDir = inputDirs.length === 1 ? inputDirs[0]! : JSON.stringify(inputDirs);
  const ownership = o.ownership ?? "rendezvous";
  const role = roleOf(o);
  if (o.wallTimeoutSeconds > 0 && o.timeoutSeconds >= o.wallTimeoutSeconds) {
    // No run starts unless it could finish inside the budget: such a campaign would run nothing.
    throw new UsageError(
      `-t ${formatDuration(o.timeoutSeconds)} is not shorter than --wall-timeout ${formatDuration(o.wallTimeoutSeconds)}: no run could start and finish inside the budget, ` +
        `so nothing would be explored; ask for a shorter -t (below ${formatDuration(o.wallTimeoutSeconds)}) or a longer --wall-timeout`,
    );
  }
  // Written at the end: a path that cannot take it is refused before anything runs.
  if (o.statsJson) checkStatsJson(o.statsJson, corpusDir);
  mkdirSync(corpusDir, { recursive: true });
  if (o.corpusMode != null) setCorpusMode(o.corpusMode);
  const state = stateDir(corpusDir);
  const leaseTtlSeconds = o.leaseTtlSeconds ?? Math.max(120, 4 * o.timeoutSeconds);
  const leaseTtlMs = leaseTtlSeconds * 1000;
  const graceMs = (o.graceSeconds ?? Math.max(120, 4 * o.timeoutSeconds)) * 1000;
  // What every master of the campaign must agree on (a submaster with another setup is refused).
  const setup: CampaignSetup = {
    corpus_dir: corpusDir,
    input_dir: inputDir,
    target: o.target,
    timeout_seconds: o.timeoutSeconds,
    max_idle_seconds: o.maxIdleSeconds,
    simulate: o.simulate,
    max_children: budgets.maxChildren,
    max_result_bytes: budgets.maxResultBytes,
    max_input_bytes: budgets.maxInputBytes,
    lease_ttl_seconds: leaseTtlSeconds,
    ownership,
  };
  const joinWaitStart = now();
  let found = role.kind === "participant" ? await rootToken(role, { flag: o.token, state, signal: o.signal, write }) : null;

  // One exporter per campaign: the root (or a lone master) exports what every master published.
  // Set up before anything else is, so that a sync directory it refuses leaves nothing behind.
  let isExternal: (hash: string) => boolean = () => true;
  const exporter =
    o.aflSync && role.kind !== "participant"
      ? new AflExport({ syncDir: resolve(o.aflSync), corpusDir, isExternal: (h) => isExternal(h), maxBytes: budgets.maxInputBytes, log: (line) => write(line) })
      : null;
  const rounds: EndRounds = { inbox: [], lost: null };
  // The root and a single master own the campaign state; a submaster borrows the root's.
  const lock = role.kind === "participant" ? null : CampaignLock.acquire(state, { command: "explore", port: o.port });
  // The lock holder starts before any master of its campaign publishes: temp files left there
  // belong to a publication that was killed.
  if (lock !== null) clearPublishTemps(corpusDir);
  // Work directories of earlier campaigns that did not end cleanly: said, with how to resume or remove them.
  if (lock !== null) for (const line of staleWorkLines(findStaleWork(state).filter((w) => w.epoch !== o.resumeEpoch))) write(line);
  let tokenFile: string | null = null;
  let nonce: Nonce | null = null;
  let keepState = true;
  // Closed in `finally` too: a campaign that fails early must not keep listening (nor the process alive).
  const links: Links = { hub: null, remote: null, rootLink: null };
  try {
    // A master that serves keeps the token in the state directory (created 0600 if absent); the
    // banner names the file, never the secret.
    if (role.kind !== "participant" && (o.port !== null || role.kind === "root")) {
      found = serverToken({ flag: o.token, outDir: state });
      tokenFile = found.file;
    }
    let place: Place;
    if (role.kind === "participant") {
      const joined = await joinRootEpoch(role, { token: found!.token, setup, state, waitSeconds: JOIN_WAIT_SECONDS - (now() - joinWaitStart) / 1000, options: o, write });
      links.rootLink = joined.conn;
      place = joined;
    } else {
      place = { epoch: openEpoch(state, o.resumeEpoch), rank: 0, ranks: role.kind === "root" ? Array.from({ length: role.masters }, (_, i) => i) : [0] };
    }
    const { epoch, rank, ranks } = place;
    const workDir = workDirOf(state, epoch);
    const tag = role.kind === "single" ? "[explore]" : `[explore r${rank}]`;
    const log = (line: string) => write(`${tag} ${line}`);
    const { leases, master } = openMaster({ o, place, workDir, ownership, budgets, corpusDir, inputDirs, leaseTtlMs, log });
    banner(write, o, { place, role, ownership, corpusDir, inputDirs });
    // Findings already recorded on this corpus (by any campaign, any master): what is not among
    // them at the end is new.
    const knownFindings = new Set(master.findings.list().map((f) => f.input_hash));
    isExternal = (h) => master.external.has(h);

    const loop = new MasterLoop({
      master,
      local: { slots: o.slots, corpusDir, target: o.target, targetCwd: process.cwd(), simulate: o.simulate, budgets, scratchDir: join(workDir, "scratch", `r${rank}`) },
      signal: o.signal,
      timeoutSeconds: o.timeoutSeconds,
      wallTimeoutSeconds: o.wallTimeoutSeconds,
      leaseTtlMs,
      stopGraceSeconds: o.stopGraceSeconds ?? DEFAULT_STOP_GRACE_SECONDS,
      multiMaster: ranks.length > 1,
      now,
      log,
      exporter,
    });
    nonce = writeNonce(join(workDir, `nonce-r${rank}`));
    const started: StartedMaster = { options: o, budgets, master, loop, found, nonce, setup, epoch, rank, graceMs, leaseTtlMs, now, log, write, rounds };
    const ending = await startEnding(role, started, links);
    const live: ExploreLive = {
      master,
      leases,
      corpusDir,
      target: o.target,
      epoch,
      rank,
      ranks,
      role: role.kind,
      ending: () => ending,
      slots: o.slots,
      remote: () => (links.remote ? { workers: links.remote.server.workers.values(), everyone: links.remote.server.everyone } : null),
      peers: () =>
        links.hub
          ? links.hub.peers.map((p) => ({ rank: p.rank, host: p.host, lost: p.conn.closed }))
          : links.rootLink
            ? [{ rank: 0, host: role.kind === "participant" ? role.join.host : null, lost: links.rootLink.closed }]
            : [],
      maxIdleSeconds: o.maxIdleSeconds,
      wallTimeoutSeconds: o.wallTimeoutSeconds,
      leaseTtlMs,
      heartbeatSeconds: Math.max(0.5, Math.min(5, leaseTtlMs / 4000)),
      now,
      startMs,
    };
    // The HTTP server and the page load only for --ui, not for every campaign's start.
    if (o.ui) {
      const { serveExploreDashboard } = await import("./serve-dashboard.ts");
      dashboard = await serveExploreDashboard({ address: o.ui, live, found, stateDir: state, log });
      tokenFile ??= dashboard.tokenFile;
      for (const line of dashboard.banner) write(`  ${line}`);
    }
    if (o.view) {
      const source = new ExploreDashboardSource({ title: corpusDir, live, files: null });
      view = o.view(() => source.snapshot());
    }

    if (o.resumeEpoch) {
      const replayed = master.replayCommitting();
      const reclaimed = master.recoverExpired(0);
      write(`  resumed: ${replayed} interrupted commit(s) redone, ${reclaimed} lease(s) taken over`);
    }
    master.admitInputs(ADMIT_BATCH);
    master.scanCorpus();
    const listed = master.inputBacklogCount + master.external.size;
    write(`  ${listed} initial input(s) seen, ${master.pendingCount} task(s) queued here so far`);

    const end = await loop.run(links.remote, ending);
    const stop = await loop.shutdown(links.remote, end);
    // The final statistics are printed on a clean screen.
    view?.close();
    view = null;
    master.close(); // the explored ledger is made durable before the statistics say what was explored
    const elapsed = (now() - startMs) / 1000;
    const problems = [...ending.problems, ...master.problems, ...stop];
    const late = exhausted(end) ? master.countLateInputs() : 0;
    if (exporter) {
      exporter.flush();
      write(`  ${exporter.summary()}`);
    }
    const newFindings = master.findings.list().filter((f) => !knownFindings.has(f.input_hash)).length;
    const ended: Ended = { started, end, elapsed, problems, late, workDir, corpusDir, newFindings, exported: exporter?.count ?? null, leases, masters: ranks.length };
    if (role.kind === "participant") return await finishParticipant(ended, links);
    await finalStatistics(ended, links);
    const clean = problems.length === 0 && exhausted(end);
    if (clean) {
      keepState = false;
      rmSync(workDir, { recursive: true, force: true });
      // The token file is part of the hidden state: a corpus that is copied or shared later
      // must not carry the secret along.
      if (tokenFile !== null) rmSync(tokenFile, { force: true });
    }
    links.hub?.broadcast({ type: "release", token: epoch });
    if (problems.length > 0) report(write, problems, workDir, epoch);
    else if (!clean) write(`the frontier is not exhausted (${end}); continue with: --resume ${epoch}`);
    return exitCodeOf({ end, problems: problems.length, newFindings, failOnFindings: o.failOnFindings ?? false });
  } finally {
    view?.close();
    view = null;
    await dashboard?.close();
    links.hub?.close();
    links.remote?.server.close();
    links.rootLink?.destroy();
    removeNonce(nonce);
    lock?.release();
    if (!keepState) {
      removeIfEmpty(publishTempDir(corpusDir));
      removeIfEmpty(state);
    }
  }
}

/** The lease table and the master of this rank. */
function openMaster(m: {
  o: ExploreOptions;
  place: Place;
  workDir: string;
  ownership: Ownership;
  budgets: Budgets;
  corpusDir: string;
  inputDirs: string[];
  leaseTtlMs: number;
  log: (line: string) => void;
}): { leases: LeaseTable; master: ExploreMaster } {
  const { rank, epoch, ranks } = m.place;
  // Under broadcast ownership every master keeps its own table: nothing is shared, every master
  // runs everything (the behaviour rendezvous ownership replaces, kept for the benchmark).
  const leases = new LeaseTable({
    root: join(m.workDir, m.ownership === "broadcast" ? `leases-r${rank}` : "leases"),
    shardCount: SHARD_COUNT,
    lockTimeoutMs: 30_000,
    durability: m.o.durability ?? "fence",
  });
  const master = new ExploreMaster({
    corpusDir: m.corpusDir,
    // The master hands its input directories to admission (master/admission.ts), which reads
    // every one of them; MasterOptions still names the field as for a single directory.
    inputDir: m.inputDirs.length === 1 ? m.inputDirs[0]! : m.inputDirs,
    stagingRoot: join(m.workDir, "staging", `r${rank}`),
    leases,
    epoch,
    rank,
    ranks,
    ownership: m.ownership,
    budgets: m.budgets,
    timeoutSeconds: m.o.timeoutSeconds,
    fresh: m.o.fresh ?? false,
    leaseTtlMs: m.leaseTtlMs,
    wallNow: () => Date.now(),
    log: m.log,
  });
  return { leases, master };
}

/** How the loop ended, and what it left to report. */
interface Ended {
  started: StartedMaster;
  end: EndReason;
  elapsed: number;
  problems: Problem[];
  late: number;
  workDir: string;
  corpusDir: string;
  /** Findings recorded (fleet-wide) during this session on inputs never recorded before. */
  newFindings: number;
  /** Inputs exported to the AFL++ sync directory (null: no --afl-sync). */
  exported: number | null;
  leases: LeaseTable;
  /** Masters of the campaign. */
  masters: number;
}

/** A submaster reports its counts to the root and waits for the release. */
async function finishParticipant(e: Ended, links: Links): Promise<number> {
  const { master, rank, graceMs, log, write, rounds, options: o } = e.started;
  const { participantStats } = await import("../fleet/stats-round.ts");
  const r = await participantStats({
    executors: { local_slots: o.slots, remote_workers: links.remote?.server.everyone.length ?? 0 },
    conn: links.rootLink!,
    rank,
    master,
    late: e.late,
    graceMs,
    finalizeMs: (o.finalizeSeconds ?? DEFAULT_FINALIZE_SECONDS) * 1000,
    inbox: rounds.inbox,
    lost: () => rounds.lost,
    log,
  });
  e.problems.push(...r.problems);
  const stale = master.counters.staleResults;
  write(
    `rank ${rank}: ${master.counters.observations} observation(s), ${master.counters.generated} generated` +
      `${stale ? `, ${stale} stale result(s) discarded (their tasks were taken over)` : ""}` +
      `${e.late ? `, ${e.late} late input file(s) left for the next campaign` : ""}`,
  );
  if (o.statsJson) {
    // A submaster's own view: its share of the work, its executors (the root's file has the fleet's).
    const c = master.counters;
    const stats = computeStats({
      leases: e.leases,
      master,
      corpusDir: e.corpusDir,
      elapsedSeconds: e.elapsed,
      executors: { local: o.slots, remote: links.remote?.server.everyone.length ?? 0 },
      masters: e.masters,
      exchanged: { observations: c.observations, generated: c.generated, late: e.late, byMaster: { [rank]: c.observations } },
    });
    writeStatsJson(o.statsJson, e.corpusDir, stats, { ended: ENDED[e.end], role: "submaster", rank, new_findings: e.newFindings, afl_exported: null });
  }
  if (e.problems.length > 0) report(write, e.problems, e.workDir, e.started.epoch);
  return exitCodeOf({ end: e.end, problems: e.problems.length, newFindings: e.newFindings, failOnFindings: o.failOnFindings ?? false, rendezvousTimedOut: r.timedOut });
}

/** The root (after the statistics exchange, whose problems join the campaign's) or a lone master prints the final statistics. */
async function finalStatistics(e: Ended, links: Links): Promise<void> {
  const { leases, masters } = e;
  const { master, graceMs, now, log, write, rounds, options: o } = e.started;
  const executors = { local: o.slots, remote: links.remote?.server.everyone.length ?? 0 };
  const common = { leases, master, corpusDir: e.corpusDir, elapsedSeconds: e.elapsed, executors };
  let stats: ExploreStats;
  if (links.hub) {
    const { rootStats } = await import("../fleet/stats-round.ts");
    const own = { local_slots: executors.local, remote_workers: executors.remote };
    const r = await rootStats({ hub: links.hub, master, late: e.late, graceMs, inbox: rounds.inbox, now, log, executors: own });
    e.problems.push(...r.problems);
    // The fleet's executors: every slot and worker of every master that reported.
    const fleet = { local: r.executors.local_slots, remote: r.executors.remote_workers };
    stats = computeStats({ ...common, executors: fleet, masters, exchanged: { ...r.totals, byMaster: r.byMaster } });
  } else {
    stats = computeStats(common);
  }
  const ended = ENDED[e.end];
  write(renderStats(stats));
  write(`ended: ${ended}`);
  if (stats.symlinked_inputs > 0) write(`${stats.symlinked_inputs} symlinked input(s) skipped (never followed: put the files themselves into the input directory)`);
  if (e.newFindings > 0) write(`${e.newFindings} new crash(es) or hang(s) recorded in this session${o.failOnFindings ? " (--fail-on-findings: exit 1)" : ""}`);
  if (stats.observations > 0 && stats.generated === 0) {
    write(
      "warning: no run produced a child input — check that the target writes its children where fuzzfleet reads them " +
        "(every file it writes into $SYMCC_OUTPUT_DIR, docs/explore.md) and that its backend generates any (SymCC's simple backend may not)",
    );
  }
  if (o.statsJson) writeStatsJson(o.statsJson, e.corpusDir, stats, { ended, role: links.hub ? "root" : "single", rank: 0, new_findings: e.newFindings, afl_exported: e.exported });
  if (stats.late_inputs > 0) write(`${stats.late_inputs} input file(s) arrived after the frontier was declared exhausted: left for the next campaign`);
}

export type { ExploreStats };
