// `coordinate`: a distributed sweep session. The session runner (session-runner.ts) with remote
// workers as its executor: the worker port (sweep/fleet/worker-protocol.ts) serves the engine's chunks
// to whoever joins; this process sweeps nothing itself.
import { hostname } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { formatInt } from "../../config/format.ts";
import type { SweepEngine } from "../engine/sweep-engine.ts";
import { SweepWorkerProtocol } from "../fleet/worker-protocol.ts";
import { serverToken, tokenPath, type FoundToken } from "../../net/token.ts";
import type { ReadService } from "../../net/worker-server.ts";
import { joinBanner, listenForWorkers, removeNonce, stopOutcomeWords, writeNonce, type AddressFlags, type Listening, type Nonce } from "../../net/worker-service.ts";
import { failuresData, renderFailures } from "../views/failures.ts";
import { liveViewLines, renderLive, type LiveData } from "../views/live.ts";
import { renderStatus, statusData } from "../views/status.ts";
import { clock } from "../../config/format.ts";
import { runSweepSession, type SessionRequest, type SweepExecutor } from "./session-runner.ts";
import { sessionBudgetLines, sessionHeadLines, type SweepSession } from "./session.ts";

/** `coordinate`'s session: the runner's request, with where to listen and how workers prove the token. */
export interface CoordinateOptions extends Pick<SessionRequest, "paths" | "seconds" | "laneNames" | "allowStaleApp" | "forceUnlock" | "confirm" | "write" | "ui" | "signal"> {
  port: number | null;
  bind: string | null;
  token: string | undefined;
  /** --token-file: the token is read from this file (never created). */
  tokenFile?: string;
  /** Seconds between live reports on the console (without a terminal view). */
  liveReportSeconds?: number;
  /** Redraw a live view of the workers and chunks in flight (stdout is a terminal). */
  live?: boolean;
  /** Without a terminal: one status line this often (seconds); 0 or absent = none. */
  statusEverySeconds?: number;
}

/** How a coordinator's user changes where it listens. */
const ADDRESS_FLAGS: AddressFlags = { port: "--port (or [distributed] port in the config)", bind: "--bind (or [distributed] bind in the config)" };

export function coordinate(o: CoordinateOptions): Promise<number> {
  return runSweepSession({ ...o, live: o.live ?? false }, remoteWorkers(o));
}

/** The remote workers: a worker port that serves the engine's chunks, its banner, its live view and the shutdown's summary. */
function remoteWorkers(o: CoordinateOptions): SweepExecutor {
  let remote: SweepWorkerProtocol | null = null;
  let nonce: Nonce | null = null;
  let liveTimer: NodeJS.Timeout | null = null;
  // The views read the engine and the worker service, which exist only once start() ran.
  let view: () => string[] = () => [];
  let glance = () => "";
  let stopGraceSeconds = 0;
  const log = (line: string) => `[${clock()}] ${line}`;
  return {
    command: "coordinate",
    transport: "distributed",
    port: o.port ?? undefined,
    bannerIndent: "         ",
    mark: log,
    console: (_s, redraw) => ({
      showWorker: true,
      view: redraw ? () => view() : undefined,
      glance: () => glance(),
      statusEverySeconds: redraw ? 0 : (o.statusEverySeconds ?? 0),
    }),
    async start({ session: s, engine, books, console: out, startMs, write }) {
      const d = s.config.distributed;
      stopGraceSeconds = d.stopGraceSeconds;
      const found = serverToken({ flag: o.token, file: o.tokenFile, outDir: s.outDir });
      nonce = writeNonce(join(s.outDir, "tmp", `nonce-${s.sessionId}`));
      let where = "";
      const live = (): LiveData => liveData(s, engine, remote!, { where, startMs, budgetSeconds: o.seconds });
      remote = new SweepWorkerProtocol({
        session: s,
        engine,
        books,
        token: found.token,
        leaseSeconds: d.leaseSeconds,
        heartbeatSeconds: Math.min(5, d.leaseSeconds / 4),
        drainGraceSeconds: d.drainGraceMinutes * 60,
        stopGraceSeconds: d.stopGraceSeconds,
        nonce,
        now: () => performance.now(),
        read: readService(s, live),
        log: (line) => out.line(log(line)),
      });
      const at = await listenForWorkers(remote, o.bind ?? (d.bind || hostname()), o.port ?? d.port, ADDRESS_FLAGS);
      where = `${at.shown}:${at.port}`;
      s.lock.setPort(at.port);
      s.store.setSessionPort(s.sessionId, at.port);
      const workers = remote;
      glance = () => `${workers.workers.size} worker(s), ${engine.inFlightChunks().length} chunk(s) in flight`;
      if (o.live) {
        view = () => liveViewLines(live(), Math.max(4, (process.stdout.rows || 24) - 6));
      } else {
        liveTimer = setInterval(() => out.lines("\n" + renderLive(live())), (o.liveReportSeconds ?? 300) * 1000);
        liveTimer.unref();
      }
      return bannerLines(s, o.seconds, at, found);
    },
    async run(signal) {
      const report = await remote!.run(signal);
      if (liveTimer) clearInterval(liveTimer);
      const summary: string[] = [];
      if (report.scratchRemoved > 0) summary.push(`  scratch:       ${report.scratchRemoved} leftover chunk director(ies) removed`);
      const workers = remote!.everyone;
      summary.push(workers.length === 0 ? "  workers:       none attached" : "  workers:");
      for (const w of workers) {
        summary.push(`    ${w.label.padEnd(20)} -j ${String(w.jobs).padEnd(3)} ${formatInt(w.chunks)} chunk(s), ${formatInt(w.seeds)} seeds${w.files === "transfer" ? ", files over the connection" : ""}`);
      }
      const { summary: stopped, problems } = stopOutcomeWords(report.outcome, stopGraceSeconds);
      if (stopped !== null) summary.push(problems.length === 0 ? `  shutdown:      ${stopped}` : `  SHUTDOWN INCOMPLETE: ${stopped}`);
      for (const p of problems) summary.push(`    ${p}`);
      return { summary, shutdownIncomplete: problems.length > 0 };
    },
    storeFailed: () => remote?.storeFailed(),
    close() {
      // A coordinator that fails midway must not keep listening.
      remote?.close();
      if (liveTimer) clearInterval(liveTimer);
      removeNonce(nonce);
    },
  };
}

/** What `status --master` and the live view show of the running session. */
function liveData(s: SweepSession, engine: SweepEngine, remote: SweepWorkerProtocol, at: { where: string; startMs: number; budgetSeconds: number }): LiveData {
  return {
    coordinator: at.where,
    session: s.sessionId,
    elapsed_seconds: (performance.now() - at.startMs) / 1000,
    budget_seconds: at.budgetSeconds,
    draining: engine.draining,
    workers: [...remote.workers.values()].map((w) => ({
      label: w.label,
      jobs: w.jobs,
      chunks: w.chunks,
      seeds: w.seeds,
      rates: Object.fromEntries(w.rates),
      not_taking: [...w.disabled],
      files: w.files,
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
  };
}

/** The read-only questions a coordinator answers (`status --master`, `failures --master`). */
function readService(s: SweepSession, live: () => LiveData): ReadService {
  return {
    status(json) {
      const data = statusData(s.store, {
        genHashNow: s.genHash,
        appBuildNow: s.appBuild,
        outDir: s.outDir,
        laneOrder: s.config.lanes.map((l) => l.name),
        configured: s.config.lanes,
      });
      return json ? { type: "json", data: { ...data, live: live() } } : { type: "text", text: renderStatus(data) + "\n" + renderLive(live()) };
    },
    failures(req) {
      const data = failuresData(s.store, s.outDir, { state: req.state, bucket: req.bucket, allGenerations: req.all_generations });
      return req.json ? { type: "json", data } : { type: "text", text: renderFailures(data, { verbose: req.verbose, lines: req.lines }) };
    },
  };
}

/** The session's head, the worker service's join banner (net/worker-service.ts) and the budget, aligned under the head. */
function bannerLines(s: SweepSession, seconds: number, at: Listening, token: FoundToken): string[] {
  const b = joinBanner(at, { token, tokenFileIsWorkersDefault: token.file === tokenPath(s.outDir), workerNote: "-j: that host's cores by default", answersStatus: true, flags: ADDRESS_FLAGS });
  return [...sessionHeadLines(s, "coordinate"), ...b.listening.map((l) => `         ${l}`), ...sessionBudgetLines(s, seconds), ...b.commands.map((l) => `         ${l}`)];
}
