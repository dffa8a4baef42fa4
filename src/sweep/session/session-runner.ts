// The one runner of a sweep session, `run` and `coordinate` alike: it opens the session, builds
// the engine with its commit queue, the console and the dashboard, hands the engine to an
// executor, and turns how the session ended into its status, summary and exit code. The executor
// (run.ts: the local slots; coordinate.ts: remote workers) decides only where chunks run and what
// it adds to the console, the banner and the summary.
//
// One rule for how a session ends, whatever the executor:
//   interrupted (Ctrl-C, SIGTERM)                    -> status "interrupted"
//   every lane disabled on every executor slot       -> status "disabled": the sweep stopped
//     (the engine's or the drain's "all lanes disabled")  sweeping; exit 4 unless something new
//   otherwise (deadline, every lane exhausted)       -> status "done"
// Exit code, first that applies: 70 a worker did not acknowledge the stop; 1 a newly distinct or
// reopened failure, or a find under a signature never seen; 4 every lane disabled; else 0.
import { performance } from "node:perf_hooks";
import type { CampaignPaths } from "../../config/paths.ts";
import { CommitQueue } from "../engine/commit-queue.ts";
import { SweepEngine, type EngineMark } from "../engine/sweep-engine.ts";
import { EXIT } from "../../exit-codes.ts";
import { saveSessionSummary, sessionSummary } from "../views/session-summary.ts";
import { SweepConsole, type ConsoleOptions } from "../views/console.ts";
import type { LiveRedraw } from "../../ui/live-redraw.ts";
import type { SessionEnd, Transport } from "../../store/port.ts";
import type { UiAddress } from "../../ui/address.ts";
import type { Dashboard } from "../../ui/server.ts";
import type { Confirm } from "./campaign.ts";
import { closeSweepSession, openSweepSession, type SweepSession } from "./session.ts";

/** What every sweep session is asked for, whatever runs its chunks. */
export interface SessionRequest {
  paths: CampaignPaths;
  seconds: number;
  laneNames: string[];
  allowStaleApp: boolean;
  forceUnlock: boolean;
  confirm: Confirm;
  /** Redraw a live view (stdout is a terminal). */
  live: boolean;
  /** Where plain lines go (default stdout). */
  write?: (line: string) => void;
  /** Serve the live dashboard here (`--ui`); null = no dashboard. */
  ui?: UiAddress | null;
  /** What a quarantine count means in this campaign, when not the usual warning. */
  quarantineNote?: string;
  /** Aborted by the first Ctrl-C or SIGTERM. */
  signal: AbortSignal;
}

/** The session's parts, built by the runner, that an executor works with. */
export interface SessionParts {
  session: SweepSession;
  engine: SweepEngine;
  books: CommitQueue<EngineMark>;
  console: SweepConsole;
  startMs: number;
  write: (line: string) => void;
}

/** How the executor's part of the session ended. */
export interface ExecutorEnd {
  /** Summary lines of its own (workers, shutdown), already indented. */
  summary: string[];
  /** A worker did not acknowledge the stop: every count is still true, but the exit says so. */
  shutdownIncomplete: boolean;
}

/** Where a session's chunks run: the local slots (run.ts) or remote workers (coordinate.ts). */
export interface SweepExecutor {
  readonly command: "run" | "coordinate";
  readonly transport: Transport;
  /** The port asked for, recorded with the lock and the session (coordinate). */
  readonly port?: number;
  /** Marks a line of the session's own (the store's, the dashboard's) for the console. */
  mark(line: string): string;
  /** Indents the dashboard's banner lines under the executor's banner. */
  readonly bannerIndent: string;
  /** The console options of its own, once the session is open (late-bound views may read parts built later). */
  console(s: SweepSession, redraw: LiveRedraw | null): Partial<ConsoleOptions>;
  /** The engine and its books exist: get ready (listen, say), and return the banner's lines. */
  start(parts: SessionParts): Promise<string[]>;
  /** Runs the engine's units until the session drains. */
  run(signal: AbortSignal): Promise<ExecutorEnd>;
  /** The commit queue gave up on the store: a sleeping run() must end now. */
  storeFailed(): void;
  /** Lets go of whatever it opened; called once, also after a failure. */
  close(): void;
}

export async function runSweepSession(o: SessionRequest, executor: SweepExecutor): Promise<number> {
  const write = o.write ?? ((line: string) => process.stdout.write(line + "\n"));
  const s = await openSweepSession({
    paths: o.paths,
    command: executor.command,
    requestedSeconds: o.seconds,
    laneNames: o.laneNames,
    allowStaleApp: o.allowStaleApp,
    forceUnlock: o.forceUnlock,
    confirm: o.confirm,
    log: (line) => process.stderr.write(line + "\n"),
    port: executor.port,
  });
  const startMs = performance.now();
  const deadlineMs = startMs + o.seconds * 1000;
  const signal = o.signal;
  // Stays "interrupted" unless the session ends normally, so an exception never records "done".
  let status: SessionEnd = "interrupted";
  let out: SweepConsole | null = null;
  let books: CommitQueue<EngineMark> | null = null;
  let dashboard: { server: Dashboard; banner: string[] } | null = null;
  try {
    // log-update is only loaded when there is a terminal to redraw on.
    const redraw = o.live ? (await import("log-update")).default : null;
    const consoleOptions = executor.console(s, redraw);
    out = new SweepConsole({ live: redraw, write, remaining: () => (deadlineMs - performance.now()) / 1000, ...consoleOptions });
    const shown = out;
    const engine = new SweepEngine({
      store: s.store,
      config: s.config,
      outDir: s.outDir,
      generationId: s.generationId,
      genHash: s.genHash,
      sessionId: s.sessionId,
      appBuild: s.appBuild,
      lanes: s.lanes,
      transport: executor.transport,
      now: () => performance.now(),
      deadlineMs,
      events: shown,
    });
    books = new CommitQueue(s.store, engine, {
      giveUpMs: s.config.store.giveUpSeconds * 1000,
      now: () => performance.now(),
      log: (line) => shown.line(executor.mark(line)),
      path: o.paths.dbPath,
      onFail: () => executor.storeFailed(),
      durability: s.durability,
    });
    for (const line of await executor.start({ session: s, engine, books, console: shown, startMs, write })) write(line);
    if (o.ui) {
      const { serveSweepDashboard } = await import("./dashboard.ts");
      dashboard = await serveSweepDashboard({ address: o.ui, session: s, engine, budgetSeconds: o.seconds, startMs, chunkFinds: consoleOptions.chunkFinds, log: (line) => shown.line(executor.mark(line)) });
      for (const line of dashboard.banner) write(executor.bannerIndent + line);
    }
    const end = await executor.run(signal);
    const reason = signal.aborted ? null : engine.draining;
    const allDisabled = reason === "all lanes disabled";
    const exhausted = reason === "every lane exhausted";
    if (allDisabled) shown.line("all lanes disabled — stopping early");
    if (exhausted) shown.line("every lane is exhausted — nothing left to sweep; the session ends");
    // The summary is printed on a clean screen.
    shown.close();
    status = signal.aborted ? "interrupted" : allDisabled ? "disabled" : "done";
    const summary = sessionSummary(s.store, {
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
      extra: [...(allDisabled ? ["  LANES DISABLED: every lane was disabled for this session; see the lines above"] : []), ...end.summary],
      outDir: s.outDir,
    });
    write(summary.replace(/\n$/, ""));
    write(`(saved as ${saveSessionSummary(s.outDir, s.sessionId, summary)})`);
    const c = engine.counts;
    const code = end.shutdownIncomplete ? EXIT.lifecycle : c.newDistinct + c.newSignatures + c.reopened > 0 ? EXIT.newFailures : allDisabled ? EXIT.runtime : EXIT.ok;
    if (allDisabled) process.stderr.write(`fuzzfleet: every lane was disabled (timeouts or unexpected generator exits, see above), so the session stopped early; ${EXIT_WORDS[code]}\n`);
    return code;
  } finally {
    out?.close();
    await dashboard?.server.close();
    executor.close();
    books?.close();
    await closeSweepSession(s, status);
  }
}

/** How the line about disabled lanes ends, by the exit code the session ends with. */
const EXIT_WORDS: Record<number, string> = {
  [EXIT.lifecycle]: `exiting ${EXIT.lifecycle}: a worker did not acknowledge the stop (see the summary)`,
  [EXIT.newFailures]: `exiting ${EXIT.newFailures} for the newly distinct (or reopened) failures it found`,
  [EXIT.runtime]: `exiting ${EXIT.runtime}`,
};
