// The `worker` client: find the campaign token and dial the coordinator or explore master
// (waiting, within one --wait budget, for either that is not there yet), prove it sees the same
// shared directory (and generator), or say that it does not and prove that its own copy of the
// generator (below its working directory) is the same — for an explore master, the target build
// it would run, found the same way; then run the campaign's units in
// WorkerLoop. The campaign kind, and how a worker without the shared directory sends its files,
// come from `welcome`. It never reads a config or a store: what it needs travels in the handshake.
import { hostname as osHostname } from "node:os";
import { performance } from "node:perf_hooks";
import { printable } from "../core/log-lines.ts";
import { RefusedError, RuntimeFailure } from "../errors.ts";
import { EXIT } from "../exit-codes.ts";
import type { Connection } from "../net/connection.ts";
import { checkHostName, connectWithWait, type HostLookup } from "../net/dial-wait.ts";
import { HandshakeReply, PROTOCOL_VERSION, Welcome, Refuse, type ProveFrame, type WelcomeFrame } from "../net/messages.ts";
import { awaitToken, type TokenSource } from "../net/token.ts";
import { WorkerLoop, type UnitRunner } from "./loop.ts";
import { SweepRunner } from "./sweep-runner.ts";
import { ExploreRunner } from "./explore-runner.ts";
import { proveIdentity } from "../config/identity.ts";
import { provenTarget } from "../explore/state/target-identity.ts";
import { z } from "zod";

const REQUEST_TIMEOUT_MS = 60_000;

export interface WorkerOptions {
  host: string;
  port: number;
  jobs: number;
  slots: number;
  /** Where the token comes from; the campaign's file is waited for within waitSeconds. */
  token: TokenSource;
  /** How long to wait for the token file and the coordinator together. */
  waitSeconds: number;
  /** Ctrl-C: finish by interrupting the chunks held, report them, say goodbye. */
  signal: AbortSignal;
  log: (line: string) => void;
  hostname?: string;
  lookup?: HostLookup;
  /**
   * Who is dialed, for the lines of the wait and the refusals: a worker that knows its campaign's
   * kind (a launched rank) names it; default "the coordinator or explore master".
   */
  who?: string;
}

/** A plain worker cannot know, before the welcome, which kind of campaign it serves. */
export const EITHER_MASTER = "the coordinator or explore master";

/** Handshake: hello -> challenge -> prove -> welcome. Throws RefusedError with the coordinator's reason. */
export async function handshake(
  conn: Connection,
  o: { token: string; jobs: number; slots: number; hostname?: string; who?: string; workDir?: string },
): Promise<{ welcome: WelcomeFrame; shared: boolean; problem: string | null }> {
  const who = o.who ?? EITHER_MASTER;
  const first = await conn.request(
    { type: "hello", token: o.token, protocol: PROTOCOL_VERSION, host: o.hostname ?? osHostname(), jobs: o.jobs, slots: o.slots },
    HandshakeReply,
    REQUEST_TIMEOUT_MS,
  );
  if (first.type === "refuse") throw new RefusedError(`${who} refused this worker:\n  ${printable(first.reason, { max: 2000 })}`);
  if (first.type !== "challenge") throw new RuntimeFailure(`unexpected handshake reply '${first.type}'`);
  const ownDir = o.workDir ?? process.cwd();
  // The generator contract's proof, plus what only an explore master asks: the target build.
  const prove: ProveFrame = proveIdentity(first, ownDir);
  if (first.target) {
    // An explore master checks the target build this worker would run, where it would run it.
    const target = provenTarget(first.target, prove.shared_dir !== false, ownDir, process.env.PATH);
    prove.target_build = target.build;
    if (target.problem !== null) prove.problem = [prove.problem, target.problem].filter((p) => p !== null).join("; ").slice(0, 2000);
  }
  const reply = await conn.request(prove, z.discriminatedUnion("type", [Welcome, Refuse]), REQUEST_TIMEOUT_MS);
  if (reply.type === "refuse") throw new RefusedError(`${who} refused this worker:\n  ${printable(reply.reason, { max: 2000 })}`);
  const shared = prove.shared_dir !== false;
  if (!shared && !reply.transfer) throw new RuntimeFailure(`${who} admitted this worker, which does not see the shared directory, without saying how its files travel`);
  return { welcome: reply, shared, problem: prove.problem };
}

/** Runs the whole worker: returns the exit code (0 after a clean stop or Ctrl-C, 4 on a lost coordinator). */
export async function runWorker(o: WorkerOptions): Promise<number> {
  const host = o.hostname ?? osHostname();
  const startMs = performance.now();
  await checkHostName(o.host, o.port, o.lookup);
  const found = await awaitToken(o.token, {
    waitSeconds: o.waitSeconds,
    signal: o.signal,
    log: o.log,
    creator: o.who ?? EITHER_MASTER,
    fix:
      o.token.file !== undefined
        ? "check --token-file against the path the master's banner prints, and start the master"
        : "start the coordinator, and run this worker in its campaign directory or pass --out (sweep); " +
          "for an explore master pass --token-file CORPUS_DIR/.fuzzfleet/fuzzfleet.token; or set FUZZFLEET_TOKEN",
  });
  if (!found) {
    o.log(`worker ${host}: interrupted while waiting for the campaign token; nothing was started`);
    return EXIT.ok;
  }
  // Whole seconds, so the line that may follow names the budget as given when no time was spent.
  const left = Math.max(0, Math.round(o.waitSeconds - (performance.now() - startMs) / 1000));
  const conn = await connectWithWait({ ...o, waitSeconds: left, who: o.who ?? EITHER_MASTER });
  if (!conn) return EXIT.ok;
  let welcome: WelcomeFrame;
  let shared: boolean;
  let problem: string | null;
  const workDir = process.cwd();
  try {
    ({ welcome, shared, problem } = await handshake(conn, { token: found.token, jobs: o.jobs, slots: o.slots, hostname: host, who: o.who, workDir }));
  } catch (err) {
    conn.destroy();
    throw err;
  }
  const files = shared ? "shared directory" : `no shared directory (${printable(problem ?? "", { max: 200 })}): runs in its own, files sent over the connection`;
  o.log(
    `worker ${host}: attached to ${o.host}:${o.port} as #${welcome.worker_id} (${welcome.mode} session ${welcome.session}` +
      `${welcome.mode === "sweep" ? `, generation ${welcome.generation}` : ""}, ${files}), -j ${o.jobs}`,
  );
  let runner: ExploreRunner | SweepRunner;
  try {
    const transfer = welcome.transfer ? { workDir, terms: welcome.transfer } : null;
    runner = welcome.explore ? new ExploreRunner(welcome.explore, o.log, transfer) : new SweepRunner(transfer);
  } catch (err) {
    // A worker that refuses to serve (another target build) tells the master why before it leaves.
    if (err instanceof RefusedError) conn.send({ type: "bye", reason: err.message.slice(0, 500) });
    conn.close();
    throw err;
  }
  const loop = new WorkerLoop<unknown>(conn, welcome, runner as UnitRunner<unknown>, { slots: o.slots, signal: o.signal, log: o.log });
  try {
    return await loop.run();
  } finally {
    conn.destroy();
    runner.dispose();
    o.log(`worker ${host}: done`);
  }
}
