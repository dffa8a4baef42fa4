// `run`: a sweep session on this host. The session runner (session-runner.ts) with the local
// slots (sweep/engine/local.ts) as its executor: chunks run in this process, one at a time.
import { hostname } from "node:os";
import { runLocal } from "../engine/local.ts";
import { localWorker } from "../engine/sweep-engine.ts";
import { resultsDir } from "../generator/command.ts";
import { findsSoFar } from "../views/chunk-progress.ts";
import { runSweepSession, type SessionParts, type SessionRequest, type SweepExecutor } from "./session-runner.ts";
import { sessionBudgetLines, sessionHeadLines } from "./session.ts";

/** `run`'s session: the runner's request, with the local console's status lines and the command's stop. */
export interface RunSweepOptions extends Pick<SessionRequest, "paths" | "seconds" | "laneNames" | "allowStaleApp" | "forceUnlock" | "confirm" | "live" | "write" | "ui" | "quarantineNote"> {
  /** Without a terminal: one status line this often (seconds); 0 = none. */
  statusEverySeconds?: number;
  /** The command's stop: aborted by the first SIGINT/SIGTERM; every signal is also heard here (cli/stop-signals.ts). */
  stop: { signal: AbortSignal; onSignal(listener: (sig: NodeJS.Signals, again: boolean) => void): void };
}

/** Returns the exit code (session-runner.ts says which). */
export function runSweep(o: RunSweepOptions): Promise<number> {
  return runSweepSession({ ...o, signal: o.stop.signal }, localSlots(o));
}

function localSlots(o: RunSweepOptions): SweepExecutor {
  let parts: SessionParts | null = null;
  const label = (sig: NodeJS.Signals) => (sig === "SIGINT" ? "Ctrl-C" : sig);
  return {
    command: "run",
    transport: "local",
    bannerIndent: "",
    mark: (line) => `fuzzfleet: ${line}`,
    console: (s) => ({
      quarantineExpected: o.quarantineNote !== undefined,
      chunkFinds: (a) => findsSoFar(s.outDir, resultsDir(s.config, a.scratchDir)),
      statusEverySeconds: o.statusEverySeconds ?? 0,
    }),
    async start(p) {
      parts = p;
      const { books, console: out } = p;
      o.stop.onSignal((sig, again) => {
        if (books.blocked) {
          // Nothing waits on the store but this session's own bookkeeping: end now, consistently (the first signal aborts `signal` right after).
          books.abandon(`${label(sig)} while the store refused writes: the session ends; what was waiting is swept again next session`);
          return;
        }
        if (!again) out.lines(`\n${label(sig)}: stopping — the running chunk is being shut down and its range will be re-swept`);
        else out.line(`${sig}: already stopping; waiting for the chunk's processes to exit`);
      });
      return [...sessionHeadLines(p.session, "run", ` on ${hostname()}`), ...sessionBudgetLines(p.session, o.seconds)];
    },
    async run(signal) {
      const { engine, books, session } = parts!;
      await runLocal(engine, books, localWorker(session.lanes, session.lastCounts), signal);
      return { summary: [], shutdownIncomplete: false };
    },
    // The local slots wait on the books themselves: a failed queue rejects what they wait on.
    storeFailed: () => undefined,
    close: () => undefined,
  };
}
