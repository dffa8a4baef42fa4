// `run`: one single-host sweep session, start to summary.
import { hostname } from "node:os";
import { performance } from "node:perf_hooks";
import type { CampaignPaths } from "../config/paths.ts";
import { localWorker, SweepEngine, type EngineMark } from "../engine/sweep-engine.ts";
import { runLocal } from "../engine/local.ts";
import { CommitQueue } from "../engine/commit-queue.ts";
import { saveSessionSummary, sessionSummary } from "../report/session-summary.ts";
import { SweepConsole } from "../report/sweep-console.ts";
import { findsSoFar } from "../report/chunk-progress.ts";
import { resultsDir } from "../generator/command.ts";
import { EXIT } from "../exit-codes.ts";
import type { Confirm } from "./campaign.ts";
import { closeSweepSession, openSweepSession, sessionBudgetLines, sessionHeadLines } from "./session.ts";
import type { SessionEnd } from "../store/sessions.ts";
import type { UiAddress } from "../ui/address.ts";
import type { Dashboard } from "../ui/server.ts";

export interface RunSweepOptions {
  paths: CampaignPaths;
  seconds: number;
  laneNames: string[];
  allowStaleApp: boolean;
  forceUnlock: boolean;
  confirm: Confirm;
  /** Draw the live status line (stdout is a terminal). */
  live: boolean;
  /** What a quarantine count means in this campaign, when not the usual warning. */
  quarantineNote?: string;
  /** Where plain lines go (default stdout). */
  write?: (line: string) => void;
  /** Without a terminal: one status line this often (seconds); 0 = none. */
  statusEverySeconds?: number;
  /** Serve the live dashboard here (`--ui`); null = no dashboard. */
  ui?: UiAddress | null;
  /** The command's stop: aborted by the first SIGINT/SIGTERM; every signal is also heard here (cli/stop-signals.ts). */
  stop: { signal: AbortSignal; onSignal(listener: (sig: NodeJS.Signals, again: boolean) => void): void };
}

/**
 * Returns the exit code: 1 when the session recorded a newly distinct (or reopened) failure;
 * else 4 when every lane got disabled, so an unattended job notices a sweep that stopped
 * sweeping; else 0 (a session that ended because every lane is exhausted included).
 */
export async function runSweep(o: RunSweepOptions): Promise<number> {
  const write = o.write ?? ((line: string) => process.stdout.write(line + "\n"));
  const s = await openSweepSession({
    paths: o.paths,
    command: "run",
    requestedSeconds: o.seconds,
    laneNames: o.laneNames,
    allowStaleApp: o.allowStaleApp,
    forceUnlock: o.forceUnlock,
    confirm: o.confirm,
    log: (line) => process.stderr.write(line + "\n"),
  });
  const startMs = performance.now();
  const deadlineMs = startMs + o.seconds * 1000;
  const signal = o.stop.signal;
  let books: CommitQueue<EngineMark> | null = null;
  // log-update is only loaded when there is a terminal to redraw on.
  const live = o.live ? (await import("log-update")).default : null;
  const out = new SweepConsole({
    live,
    write,
    remaining: () => (deadlineMs - performance.now()) / 1000,
    quarantineExpected: o.quarantineNote !== undefined,
    chunkFinds: (a) => findsSoFar(s.outDir, resultsDir(s.config, a.scratchDir)),
    statusEverySeconds: o.statusEverySeconds ?? 0,
  });
  const label = (sig: NodeJS.Signals) => (sig === "SIGINT" ? "Ctrl-C" : sig);
  o.stop.onSignal((sig, again) => {
    if (books?.blocked) {
      // Nothing waits on the store but this session's own bookkeeping: end now, consistently (the first signal aborts `signal` right after).
      books.abandon(`${label(sig)} while the store refused writes: the session ends; what was waiting is swept again next session`);
      return;
    }
    if (!again) out.lines(`\n${label(sig)}: stopping — the running chunk is being shut down and its range will be re-swept`);
    else out.line(`${sig}: already stopping; waiting for the chunk's processes to exit`);
  });
  // Stays "interrupted" unless the loop ends normally, so an exception never records "done".
  let status: SessionEnd = "interrupted";
  let dashboard: { server: Dashboard; banner: string[] } | null = null;
  try {
    const engine = new SweepEngine({
      db: s.db,
      config: s.config,
      outDir: s.outDir,
      generationId: s.generationId,
      genHash: s.genHash,
      sessionId: s.sessionId,
      appBuild: s.appBuild,
      lanes: s.lanes,
      transport: "local",
      now: () => performance.now(),
      deadlineMs,
      events: out,
    });
    books = new CommitQueue(s.db, engine, {
      giveUpMs: s.config.store.giveUpSeconds * 1000,
      now: () => performance.now(),
      log: (line) => out.line(`fuzzfleet: ${line}`),
      path: o.paths.dbPath,
      durability: s.walSync,
    });
    for (const line of [...sessionHeadLines(s, "run", ` on ${hostname()}`), ...sessionBudgetLines(s, o.seconds)]) write(line);
    if (o.ui) {
      const { serveSweepDashboard } = await import("./dashboard.ts");
      dashboard = await serveSweepDashboard({
        address: o.ui,
        session: s,
        engine,
        budgetSeconds: o.seconds,
        startMs,
        log: (line) => out.line(`fuzzfleet: ${line}`),
      });
      for (const line of dashboard.banner) write(line);
    }
    await runLocal(engine, books, localWorker(s.lanes, s.lastCounts), signal);
    const allDisabled = engine.draining === "all lanes disabled" && !signal.aborted;
    const exhausted = engine.draining === "every lane exhausted" && !signal.aborted;
    if (allDisabled) out.line("all lanes disabled — stopping early");
    if (exhausted) out.line("every lane is exhausted — nothing left to sweep; the session ends");
    status = signal.aborted ? "interrupted" : allDisabled ? "disabled" : "done";
    out.close();
    const summary = sessionSummary(s.db, {
      sessionId: s.sessionId,
      generationId: s.generationId,
      status,
      elapsedSeconds: (performance.now() - startMs) / 1000,
      budgetSeconds: o.seconds,
      floorSeconds: engine.floorSeconds,
      counts: engine.counts,
      maxShrinks: s.config.defaults.maxShrinks,
      quarantineNote: o.quarantineNote,
      exhausted,
      extra: allDisabled ? ["  LANES DISABLED: every lane was disabled for this session; see the lines above"] : [],
      outDir: s.outDir,
    });
    write(summary.replace(/\n$/, ""));
    const path = saveSessionSummary(s.outDir, s.sessionId, summary);
    write(`(saved as ${path})`);
    const alarming = engine.counts.newDistinct + engine.counts.newSignatures + engine.counts.reopened > 0;
    if (allDisabled) {
      process.stderr.write(
        "fuzzfleet: every lane was disabled (timeouts or unexpected generator exits, see above), so the session stopped early" +
          (alarming ? "; exiting 1 for the newly distinct (or reopened) failures it found\n" : "; exiting 4\n"),
      );
    }
    if (alarming) return EXIT.newFailures;
    return allDisabled ? EXIT.runtime : EXIT.ok;
  } finally {
    await dashboard?.server.close();
    books?.close();
    out.close();
    await closeSweepSession(s, status);
  }
}
