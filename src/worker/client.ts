// The `worker` client: find the campaign token and dial the coordinator or explore master
// (waiting, within one --wait budget, for either that is not there yet), prove it sees the same
// shared directory (and generator), then run the campaign's units in WorkerLoop. The campaign
// kind comes from `welcome`. It never reads a config or a store.
import { readFileSync } from "node:fs";
import { lookup as dnsLookup } from "node:dns/promises";
import { isIP } from "node:net";
import { hostname as osHostname } from "node:os";
import { performance } from "node:perf_hooks";
import { formatDuration } from "../config/duration.ts";
import { printable } from "../core/log-lines.ts";
import { RefusedError, RuntimeFailure } from "../errors.ts";
import { Connection, dial } from "../net/connection.ts";
import { HandshakeReply, PROTOCOL_VERSION, Welcome, Refuse, type ChallengeFrame, type ProveFrame, type WelcomeFrame } from "../net/messages.ts";
import { awaitToken, type TokenSource } from "../net/token.ts";
import { WakeablePause } from "../util/pause.ts";
import { EXIT_WORKER, WorkerLoop, type UnitRunner } from "./loop.ts";
import { SweepRunner } from "./sweep-runner.ts";
import { ExploreRunner } from "./explore-runner.ts";
import { appBuildOf, hashIdentity } from "../sweep/identity.ts";
import { z } from "zod";

const CONNECT_TIMEOUT_MS = 5_000;
const REQUEST_TIMEOUT_MS = 60_000;
const RETRY_MS = 1_000;

/** Resolves a host name (rejecting with the resolver's error code); a seam for tests, which must not ask a real name server. */
export type HostLookup = (host: string) => Promise<unknown>;
const systemLookup: HostLookup = (host) => dnsLookup(host, { all: true });

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
}

export interface DialWait {
  host: string;
  port: number;
  waitSeconds: number;
  signal: AbortSignal;
  log: (line: string) => void;
  lookup?: HostLookup;
}

/**
 * Refuses at once a host name the resolver says does not exist: waiting could not fix it. A
 * resolver that does not answer (EAI_AGAIN) is left to connectWithWait, which retries.
 */
export async function checkHostName(host: string, port: number, lookup: HostLookup = systemLookup): Promise<void> {
  try {
    await resolveName(host, lookup);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOTFOUND") throw unresolvable(host, port, err);
  }
}

/** Connects, waiting up to waitSeconds for a coordinator that is not up yet. Null if the signal aborted the wait. */
export async function connectWithWait(o: DialWait): Promise<Connection | null> {
  const deadline = performance.now() + o.waitSeconds * 1000;
  const lookup = o.lookup ?? systemLookup;
  const pause = new WakeablePause();
  const onAbort = () => pause.wake();
  o.signal.addEventListener("abort", onAbort, { once: true });
  let saidWaiting = false;
  let saidResolver = false;
  try {
    for (;;) {
      if (o.signal.aborted) return null;
      try {
        await resolveName(o.host, lookup);
        return await dial(o.host, o.port, CONNECT_TIMEOUT_MS);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "ENOTFOUND") throw unresolvable(o.host, o.port, err);
        if (performance.now() >= deadline) {
          throw new RuntimeFailure(`cannot reach the coordinator at ${o.host}:${o.port} — ${(err as Error).message}`);
        }
        if (code === "EAI_AGAIN") {
          if (!saidResolver) o.log(`the name server gives no answer for '${o.host}' (EAI_AGAIN); retrying for up to ${formatDuration(o.waitSeconds)} …`);
          saidResolver = true;
        } else if (!saidWaiting) {
          o.log(`waiting for the coordinator at ${o.host}:${o.port} (up to ${formatDuration(o.waitSeconds)}) …`);
          saidWaiting = true;
        }
      }
      await pause.pause(Math.max(0, Math.min(RETRY_MS, deadline - performance.now())));
    }
  } finally {
    o.signal.removeEventListener("abort", onAbort);
  }
}

async function resolveName(host: string, lookup: HostLookup): Promise<void> {
  if (isIP(host) === 0) await lookup(host);
}

function unresolvable(host: string, port: number, err: unknown): RuntimeFailure {
  return new RuntimeFailure(
    `cannot reach ${host}:${port}: the host name '${host}' does not resolve (${(err as Error).message}); check its spelling, or give the master's IP address`,
    { cause: err },
  );
}

/** Answers the coordinator's challenge with what this host sees in the shared directory. */
export function proveIdentity(c: ChallengeFrame): ProveFrame {
  const problems: string[] = [];
  let nonce: string | null = null;
  try {
    nonce = readFileSync(c.nonce_path, "utf8").trim().slice(0, 256);
  } catch (err) {
    problems.push(`nonce: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let genHash: string | null = null;
  if (c.identity) {
    try {
      genHash = hashIdentity({ command: c.identity.command, files: c.identity.files, baseDir: c.identity.base_dir });
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  let appBuild: string | null = null;
  if (c.app_path) {
    try {
      appBuild = appBuildOf(c.app_path);
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  return { type: "prove", nonce, gen_hash: genHash, app_build: appBuild, problem: problems.length ? problems.join("; ").slice(0, 2000) : null };
}

/** Handshake: hello -> challenge -> prove -> welcome. Throws RefusedError with the coordinator's reason. */
export async function handshake(conn: Connection, o: { token: string; jobs: number; slots: number; hostname?: string }): Promise<WelcomeFrame> {
  const first = await conn.request(
    { type: "hello", token: o.token, protocol: PROTOCOL_VERSION, host: o.hostname ?? osHostname(), jobs: o.jobs, slots: o.slots },
    HandshakeReply,
    REQUEST_TIMEOUT_MS,
  );
  if (first.type === "refuse") throw new RefusedError(`the coordinator refused this worker:\n  ${printable(first.reason, { max: 2000 })}`);
  if (first.type !== "challenge") throw new RuntimeFailure(`unexpected handshake reply '${first.type}'`);
  const reply = await conn.request(proveIdentity(first), z.discriminatedUnion("type", [Welcome, Refuse]), REQUEST_TIMEOUT_MS);
  if (reply.type === "refuse") throw new RefusedError(`the coordinator refused this worker:\n  ${printable(reply.reason, { max: 2000 })}`);
  return reply;
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
    creator: "the coordinator or explore master",
    fix:
      o.token.file !== undefined
        ? "check --token-file against the path the master's banner prints, and start the master"
        : "start the coordinator, and run this worker in its campaign directory or pass --out (sweep); " +
          "for an explore master pass --token-file CORPUS_DIR/.fuzzfleet/fuzzfleet.token; or set FUZZFLEET_TOKEN",
  });
  if (!found) {
    o.log(`worker ${host}: interrupted while waiting for the campaign token; nothing was started`);
    return EXIT_WORKER.ok;
  }
  // Whole seconds, so the line that may follow names the budget as given when no time was spent.
  const left = Math.max(0, Math.round(o.waitSeconds - (performance.now() - startMs) / 1000));
  const conn = await connectWithWait({ ...o, waitSeconds: left });
  if (!conn) return EXIT_WORKER.ok;
  let welcome: WelcomeFrame;
  try {
    welcome = await handshake(conn, { token: found.token, jobs: o.jobs, slots: o.slots, hostname: host });
  } catch (err) {
    conn.destroy();
    throw err;
  }
  o.log(
    `worker ${host}: attached to ${o.host}:${o.port} as #${welcome.worker_id} (${welcome.mode} session ${welcome.session}` +
      `${welcome.mode === "sweep" ? `, generation ${welcome.generation}` : ""}), -j ${o.jobs}`,
  );
  const runner = welcome.explore ? new ExploreRunner(welcome.explore, o.log) : new SweepRunner();
  const loop = new WorkerLoop<unknown>(conn, welcome, runner as UnitRunner<unknown>, { slots: o.slots, signal: o.signal, log: o.log });
  try {
    return await loop.run();
  } finally {
    conn.destroy();
    if (runner instanceof ExploreRunner) runner.dispose();
    o.log(`worker ${host}: done`);
  }
}
