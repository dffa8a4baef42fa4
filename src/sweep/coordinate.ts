// `coordinate`: one distributed sweep session. The same SweepEngine as `run`, driven by remote
// workers instead of the local executor; this process sweeps nothing itself.
import { hostname } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { formatInt } from "../config/format.ts";
import type { CampaignPaths } from "../config/paths.ts";
import { EXIT } from "../exit-codes.ts";
import { SweepWorkerProtocol } from "../engine/worker-protocol.ts";
import type { ReadService } from "../net/worker-server.ts";
import { SweepEngine } from "../engine/sweep-engine.ts";
import { serverToken, tokenPath, type FoundToken } from "../net/token.ts";
import { joinBanner, listenForWorkers, removeNonce, stopOutcomeWords, writeNonce, type AddressFlags, type Listening, type Nonce } from "../net/worker-service.ts";
import { failuresData, renderFailures } from "../report/failures.ts";
import { liveViewLines, renderLive, type LiveData } from "../report/live.ts";
import { saveSessionSummary, sessionSummary } from "../report/session-summary.ts";
import { renderStatus, statusData } from "../report/status.ts";
import { clock, SweepConsole } from "../report/sweep-console.ts";
import { setSessionPort } from "../store/sessions.ts";
import type { Confirm } from "./campaign.ts";
import { closeSweepSession, openSweepSession, sessionBudgetLines, sessionHeadLines, type SweepSession } from "./session.ts";
import type { UiAddress } from "../ui/address.ts";
import type { Dashboard } from "../ui/server.ts";

export interface CoordinateOptions {
  paths: CampaignPaths;
  seconds: number;
  laneNames: string[];
  allowStaleApp: boolean;
  forceUnlock: boolean;
  confirm: Confirm;
  port: number | null;
  bind: string | null;
  token: string | undefined;
  /** --token-file: the token is read from this file (never created). */
  tokenFile?: string;
  write?: (line: string) => void;
  /** Seconds between live reports on the console (without a terminal view). */
  liveReportSeconds?: number;
  /** Redraw a live view of the workers and chunks in flight (stdout is a terminal). */
  live?: boolean;
  /** Without a terminal: one status line this often (seconds); 0 or absent = none. */
  statusEverySeconds?: number;
  /** Aborted by Ctrl-C or SIGTERM (cli/stop-signals.ts): the session drains, then stops its workers. */
  signal: AbortSignal;
  /** Serve the live dashboard here (`--ui`); null = no dashboard. */
  ui?: UiAddress | null;
}

/** How a coordinator's user changes where it listens. */
const ADDRESS_FLAGS: AddressFlags = { port: "--port (or [distributed] port in the config)", bind: "--bind (or [distributed] bind in the config)" };

export async function coordinate(o: CoordinateOptions): Promise<number> {
  const write = o.write ?? ((line: string) => process.stdout.write(line + "\n"));
  const s = await openSweepSession({
    paths: o.paths,
    command: "coordinate",
    requestedSeconds: o.seconds,
    laneNames: o.laneNames,
    allowStaleApp: o.allowStaleApp,
    forceUnlock: o.forceUnlock,
    confirm: o.confirm,
    log: (line) => process.stderr.write(line + "\n"),
    port: o.port ?? undefined,
  });
  const d = s.config.distributed;
  const port = o.port ?? d.port;
  const bind = o.bind ?? (d.bind || hostname());
  const startMs = performance.now();
  const deadlineMs = startMs + o.seconds * 1000;
  const signal = o.signal;
  let status: "done" | "interrupted" = "interrupted";
  let nonce: Nonce | null = null;
  let liveTimer: NodeJS.Timeout | null = null;
  let shown: SweepConsole | null = null;
  let dashboard: { server: Dashboard; banner: string[] } | null = null;
  // Closed in `finally` too: a coordinator that fails midway must not keep listening.
  let closeRemote: (() => void) | null = null;
  try {
    const found = serverToken({ flag: o.token, file: o.tokenFile, outDir: s.outDir });
    nonce = writeNonce(join(s.outDir, "tmp", `nonce-${s.sessionId}`));
    // log-update is only loaded when there is a terminal to redraw on.
    const redraw = o.live ? (await import("log-update")).default : null;
    // The view reads the engine and the worker service, which exist only below.
    let view: () => string[] = () => [];
    let glance = () => "";
    const out = new SweepConsole({
      live: redraw,
      write,
      remaining: () => (deadlineMs - performance.now()) / 1000,
      showWorker: true,
      view: redraw ? () => view() : undefined,
      glance: () => glance(),
      statusEverySeconds: redraw ? 0 : (o.statusEverySeconds ?? 0),
    });
    shown = out;
    const engine = new SweepEngine({
      db: s.db,
      config: s.config,
      outDir: s.outDir,
      generationId: s.generationId,
      genHash: s.genHash,
      sessionId: s.sessionId,
      appBuild: s.appBuild,
      lanes: s.lanes,
      transport: "distributed",
      now: () => performance.now(),
      deadlineMs,
      events: out,
    });
    let where = "";
    const live = (): LiveData => ({
      coordinator: where,
      session: s.sessionId,
      elapsed_seconds: (performance.now() - startMs) / 1000,
      budget_seconds: o.seconds,
      draining: engine.draining,
      workers: [...remote.workers.values()].map((w) => ({
        label: w.label,
        jobs: w.jobs,
        chunks: w.chunks,
        seeds: w.seeds,
        rates: Object.fromEntries(w.rates),
        not_taking: [...w.disabled],
      })),
      in_flight: engine.inFlightChunks().map((f) => ({
        chunk_id: f.chunkId,
        lane: f.lane,
        seed_from: f.seedFrom,
        seed_to: f.seedTo,
        running_seconds: (performance.now() - f.startedMs) / 1000,
        worker: f.worker.label,
      })),
      queued: engine
        .engineLanes()
        .filter((l) => l.state.queued() > 0)
        .map((l) => ({ lane: l.config.name, seeds: l.state.queued() })),
    });
    const read: ReadService = {
      status(json) {
        const data = statusData(s.db, {
          genHashNow: s.genHash,
          appBuildNow: s.appBuild,
          outDir: s.outDir,
          laneOrder: s.config.lanes.map((l) => l.name),
          configured: s.config.lanes,
        });
        return json ? { type: "json", data: { ...data, live: live() } } : { type: "text", text: renderStatus(data) + "\n" + renderLive(live()) };
      },
      failures(req) {
        const data = failuresData(s.db, s.outDir, { state: req.state, bucket: req.bucket, allGenerations: req.all_generations });
        return req.json ? { type: "json", data } : { type: "text", text: renderFailures(data, { verbose: req.verbose, lines: req.lines }) };
      },
    };
    const remote = new SweepWorkerProtocol({
      session: s,
      engine,
      token: found.token,
      leaseSeconds: d.leaseSeconds,
      heartbeatSeconds: Math.min(5, d.leaseSeconds / 4),
      drainGraceSeconds: d.drainGraceMinutes * 60,
      stopGraceSeconds: d.stopGraceSeconds,
      nonce,
      now: () => performance.now(),
      read,
      log: (line) => out.line(`[${clock()}] ${line}`),
      storePath: o.paths.dbPath,
    });
    closeRemote = () => remote.close();
    const at = await listenForWorkers(remote, bind, port, ADDRESS_FLAGS);
    where = `${at.shown}:${at.port}`;
    s.lock.setPort(at.port);
    setSessionPort(s.db, s.sessionId, at.port);
    banner(write, s, o.seconds, at, found);
    if (o.ui) {
      const { serveSweepDashboard } = await import("./dashboard.ts");
      dashboard = await serveSweepDashboard({
        address: o.ui,
        session: s,
        engine,
        budgetSeconds: o.seconds,
        startMs,
        log: (line) => out.line(`[${clock()}] ${line}`),
      });
      for (const line of dashboard.banner) write(`         ${line}`);
    }
    glance = () => `${remote.workers.size} worker(s), ${engine.inFlightChunks().length} chunk(s) in flight`;
    if (redraw) {
      view = () => liveViewLines(live(), Math.max(4, (process.stdout.rows || 24) - 6));
    } else {
      liveTimer = setInterval(() => out.lines("\n" + renderLive(live())), (o.liveReportSeconds ?? 300) * 1000);
      liveTimer.unref();
    }

    const report = await remote.run(signal);
    if (liveTimer) clearInterval(liveTimer);
    // The summary is printed on a clean screen.
    out.close();
    status = signal.aborted ? "interrupted" : "done";
    const exhausted = engine.draining === "every lane exhausted" && !signal.aborted;
    if (exhausted) write("every lane is exhausted — nothing left to sweep; the session ended");
    const extra: string[] = [];
    if (report.scratchRemoved > 0) extra.push(`  scratch:       ${report.scratchRemoved} leftover chunk director(ies) removed`);
    const workers = remote.everyone;
    extra.push(workers.length === 0 ? "  workers:       none attached" : "  workers:");
    for (const w of workers) {
      extra.push(`    ${w.label.padEnd(20)} -j ${String(w.jobs).padEnd(3)} ${formatInt(w.chunks)} chunk(s), ${formatInt(w.seeds)} seeds`);
    }
    const { summary: stopped, problems } = stopOutcomeWords(report.outcome, d.stopGraceSeconds);
    if (stopped !== null) extra.push(problems.length === 0 ? `  shutdown:      ${stopped}` : `  SHUTDOWN INCOMPLETE: ${stopped}`);
    for (const p of problems) extra.push(`    ${p}`);
    const summary = sessionSummary(s.db, {
      sessionId: s.sessionId,
      generationId: s.generationId,
      status,
      elapsedSeconds: (performance.now() - startMs) / 1000,
      budgetSeconds: o.seconds,
      floorSeconds: engine.floorSeconds,
      counts: engine.counts,
      maxShrinks: s.config.defaults.maxShrinks,
      exhausted,
      extra,
      outDir: s.outDir,
    });
    write(summary.replace(/\n$/, ""));
    write(`(saved as ${saveSessionSummary(s.outDir, s.sessionId, summary)})`);
    if (problems.length > 0) return EXIT.lifecycle;
    return engine.counts.newDistinct + engine.counts.newSignatures + engine.counts.reopened > 0 ? EXIT.newFailures : EXIT.ok;
  } finally {
    shown?.close();
    await dashboard?.server.close();
    closeRemote?.();
    if (liveTimer) clearInterval(liveTimer);
    removeNonce(nonce);
    await closeSweepSession(s, status);
  }
}

/** The session's head, the worker service's join banner (net/worker-service.ts) and the budget, aligned under the head. */
function banner(write: (l: string) => void, s: SweepSession, seconds: number, at: Listening, token: FoundToken): void {
  for (const line of sessionHeadLines(s, "coordinate")) write(line);
  const b = joinBanner(at, { token, tokenFileIsWorkersDefault: token.file === tokenPath(s.outDir), workerNote: "-j: that host's cores by default", answersStatus: true, flags: ADDRESS_FLAGS });
  for (const line of b.listening) write(`         ${line}`);
  for (const line of sessionBudgetLines(s, seconds)) write(line);
  for (const line of b.commands) write(`         ${line}`);
}
