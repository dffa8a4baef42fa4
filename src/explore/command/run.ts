// `explore`: one master of an explore campaign, start to final statistics. A master is alone, the
// root of several (--masters N, rank 0), or a submaster (--join ROOT:PORT): one role object each
// (roles.ts). The steps below and the loop itself (rescans, heartbeats, local slots, dispatch;
// master-loop.ts) are the same for all three; the role says what differs: the token, the lock,
// the epoch, how it ends (fleet/endings.ts) and how the statistics come together (role.ts):
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
import { redactor, secretValues, type Redact } from "../../exec/secrets.ts";
import { DEFAULT_STOP_GRACE_SECONDS, removeNonce, writeNonce, type Nonce } from "../../net/worker-service.ts";
import { DEFAULT_BUDGETS, type Budgets } from "../defaults.ts";
import type { CampaignSetup } from "../fleet/peers.ts";
import { ExploreMaster } from "../master/master.ts";
import type { Ownership } from "../master/options.ts";
import { LeaseTable } from "../state/lease-table.ts";
import { removeIfEmpty, SHARD_COUNT, stateDir, workDir as workDirOf } from "../state/work-dir.ts";
import { clearPublishTemps, publishTempDir, setCorpusMode } from "../state/corpus.ts";
import { AflExport } from "./afl-export.ts";
import { checkInputDirs } from "./input-dirs.ts";
import { ADMIT_BATCH, MasterLoop } from "./master-loop.ts";
import { exhausted } from "./outcome.ts";
import type { ExploreOptions } from "./options.ts";
import type { Ended, EndRounds, Links, Place, StartedMaster } from "./role.ts";
import { roleOf } from "./roles.ts";
import { checkStatsJson, type ExploreStats } from "./stats.ts";
import { findStaleWork, staleWorkLines } from "../state/stale-work.ts";
import { banner, targetChangeLine } from "./banner.ts";
import { targetIdentity, type TargetIdentity } from "../state/target-identity.ts";
import { ExploreDashboardSource, type ExploreLive } from "../views/dashboard-source.ts";
import { HistoryWriter } from "../state/history.ts";
import type { ServedExploreDashboard } from "./serve-dashboard.ts";

export async function explore(o: ExploreOptions): Promise<number> {
  const out = o.write ?? ((line: string) => process.stdout.write(line + "\n"));
  // Once the terminal view is up, every line goes above it.
  let view: { line(text: string): void; close(): void } | null = null;
  const write = (line: string) => (view ? view.line(line) : out(line));
  let dashboard: ServedExploreDashboard | null = null;
  let history: HistoryWriter | null = null;
  const startMs = performance.now();
  const now = () => performance.now();
  const budgets = o.budgets ?? DEFAULT_BUDGETS;
  const corpusDir = resolve(o.corpusDir);
  const inputDirs = checkInputDirs(typeof o.inputDir === "string" ? [o.inputDir] : o.inputDir, corpusDir);
  // One directory is named as it always was; several as a list (every master must agree on it).
  const inputDir = inputDirs.length === 1 ? inputDirs[0]! : JSON.stringify(inputDirs);
  const ownership = o.ownership ?? "rendezvous";
  const role = roleOf(o);
  // The build every result of this campaign is recorded under; a target that cannot be read is
  // refused before anything is locked or created.
  const target = targetIdentity({ argv: o.target, cwd: process.cwd(), files: o.targetFiles ?? [], path: process.env.PATH, simulate: o.simulate });
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
    target_build: target.build,
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
  const early = await role.campaignToken({ flag: o.token, file: o.tokenFile, state, signal: o.signal, write });

  // One exporter per campaign: the root (or a lone master) exports what every master published.
  // Set up before anything else is, so that a sync directory it refuses leaves nothing behind.
  let isExternal: (hash: string) => boolean = () => true;
  const exporter =
    o.aflSync && role.ownsCampaign
      ? new AflExport({ syncDir: resolve(o.aflSync), corpusDir, isExternal: (h) => isExternal(h), maxBytes: budgets.maxInputBytes, log: (line) => write(line) })
      : null;
  const rounds: EndRounds = { inbox: [], lost: null };
  // The root and a single master own the campaign state; a submaster borrows the root's.
  const lock = role.ownsCampaign ? CampaignLock.acquire(state, { command: "explore", port: o.port }) : null;
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
    const serving = role.servingToken(state);
    // Only the state directory's own file is the campaign's to remove; a --token-file is the user's.
    if (serving !== null && o.tokenFile === undefined) tokenFile = serving.file;
    const found = serving ?? early;
    const place: Place = await role.place({ token: found, setup, state, joinWaitStart, now, links, write });
    const { epoch, rank, ranks } = place;
    const workDir = workDirOf(state, epoch);
    const tag = role.tag(rank);
    const log = (line: string) => write(`${tag} ${line}`);
    const { leases, master } = openMaster({ o, place, workDir, ownership, budgets, corpusDir, inputDirs, leaseTtlMs, log, target, redact: redactor([found?.token, ...secretValues(process.env)]) });
    banner(write, o, { place, role, ownership, corpusDir, inputDirs, target });
    const change = master.explored.targetChange;
    if (change) write(`  ${targetChangeLine(change)}`);
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
    const started: StartedMaster = { options: o, budgets, master, loop, found, nonce, setup, epoch, workDir, rank, ranks, graceMs, leaseTtlMs, now, log, write, rounds };
    const ending = await role.startEnding(started, links);
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
      peers: () => role.peers(links),
      maxIdleSeconds: o.maxIdleSeconds,
      wallTimeoutSeconds: o.wallTimeoutSeconds,
      leaseTtlMs,
      heartbeatSeconds: Math.max(0.5, Math.min(5, leaseTtlMs / 4000)),
      now,
      startMs,
    };
    history = new HistoryWriter({ state, epoch, rank, counters: () => ({ ...master.counters, corpus: master.corpusSeen.size }), log });
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

    // A broadcast submaster's table is its own (leases-r<rank>): records in it as it joins are left
    // by this rank's earlier session of a resumed campaign, and no other master finishes them.
    const rejoined = role.kind === "participant" && ownership === "broadcast" && leases.snapshot().length > 0;
    if (o.resumeEpoch || rejoined) {
      const replayed = master.replayCommitting();
      const reclaimed = master.recoverExpired(0);
      write(`  resumed: ${replayed} interrupted commit(s) redone, ${reclaimed} lease(s) taken over`);
    }
    master.admitInputs(ADMIT_BATCH);
    master.scanCorpus();
    // Files copied in just before the start are still settling: seen, but not admitted yet.
    const settling = master.inputSettlingCount;
    const listed = master.inputBacklogCount + master.external.size + settling;
    write(`  ${listed} initial input(s) seen${settling > 0 ? ` (${settling} still settling: admitted once unchanged)` : ""}, ${master.pendingCount} task(s) queued here so far`);

    const end = await loop.run(links.remote, ending);
    const stop = await loop.shutdown(links.remote, end);
    await history.close();
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
    return await role.finish(ended, links, () => {
      keepState = false;
      rmSync(workDir, { recursive: true, force: true });
      // The token file is part of the hidden state: a corpus that is copied or shared later
      // must not carry the secret along.
      if (tokenFile !== null) rmSync(tokenFile, { force: true });
    });
  } finally {
    await history?.close();
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
  target: TargetIdentity;
  redact: Redact;
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
    build: m.target.build,
    targetIdentity: m.target,
    leaseTtlMs: m.leaseTtlMs,
    wallNow: () => Date.now(),
    log: m.log,
    redact: m.redact,
  });
  return { leases, master };
}

export type { ExploreStats };
