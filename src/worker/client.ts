// The `worker` client: dial the coordinator or explore master (waiting for it if it is not up
// yet), prove it sees the same shared directory (and generator), then run the campaign's units in
// WorkerLoop. The campaign kind comes from `welcome`. It never reads a config or a store.
import { readFileSync } from "node:fs";
import { hostname as osHostname } from "node:os";
import { performance } from "node:perf_hooks";
import { formatDuration } from "../config/duration.ts";
import { RefusedError, RuntimeFailure } from "../errors.ts";
import { Connection, dial } from "../net/connection.ts";
import { HandshakeReply, PROTOCOL_VERSION, Welcome, Refuse, type ChallengeFrame, type ProveFrame, type WelcomeFrame } from "../net/messages.ts";
import { EXIT_WORKER, WorkerLoop, type UnitRunner } from "./loop.ts";
import { SweepRunner } from "./sweep-runner.ts";
import { ExploreRunner } from "./explore-runner.ts";
import { appBuildOf, hashIdentity } from "../sweep/identity.ts";
import { z } from "zod";

const CONNECT_TIMEOUT_MS = 5_000;
const REQUEST_TIMEOUT_MS = 60_000;
const RETRY_MS = 1_000;

export interface WorkerOptions {
  host: string;
  port: number;
  jobs: number;
  slots: number;
  token: string;
  waitSeconds: number;
  /** Ctrl-C: finish by interrupting the chunks held, report them, say goodbye. */
  signal: AbortSignal;
  log: (line: string) => void;
  hostname?: string;
}


/** Connects, waiting up to waitSeconds for a coordinator that is not up yet. */
export async function connectWithWait(o: Pick<WorkerOptions, "host" | "port" | "waitSeconds" | "signal" | "log">): Promise<Connection | null> {
  const deadline = performance.now() + o.waitSeconds * 1000;
  let said = false;
  for (;;) {
    try {
      return await dial(o.host, o.port, CONNECT_TIMEOUT_MS);
    } catch (err) {
      if (performance.now() >= deadline) {
        throw new RuntimeFailure(`cannot reach the coordinator at ${o.host}:${o.port} — ${(err as Error).message}`);
      }
      if (!said) {
        o.log(`waiting for the coordinator at ${o.host}:${o.port} (up to ${formatDuration(o.waitSeconds)}) …`);
        said = true;
      }
    }
    if (o.signal.aborted) return null;
    await sleep(RETRY_MS, o.signal);
  }
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
export async function handshake(conn: Connection, o: Pick<WorkerOptions, "token" | "jobs" | "slots" | "hostname">): Promise<WelcomeFrame> {
  const first = await conn.request(
    { type: "hello", token: o.token, protocol: PROTOCOL_VERSION, host: o.hostname ?? osHostname(), jobs: o.jobs, slots: o.slots },
    HandshakeReply,
    REQUEST_TIMEOUT_MS,
  );
  if (first.type === "refuse") throw new RefusedError(`the coordinator refused this worker:\n  ${first.reason}`);
  if (first.type !== "challenge") throw new RuntimeFailure(`unexpected handshake reply '${first.type}'`);
  const reply = await conn.request(proveIdentity(first), z.discriminatedUnion("type", [Welcome, Refuse]), REQUEST_TIMEOUT_MS);
  if (reply.type === "refuse") throw new RefusedError(`the coordinator refused this worker:\n  ${reply.reason}`);
  return reply;
}

/** Runs the whole worker: returns the exit code (0 after a clean stop, 1 on a lost coordinator). */
export async function runWorker(o: WorkerOptions): Promise<number> {
  const host = o.hostname ?? osHostname();
  const conn = await connectWithWait(o);
  if (!conn) return EXIT_WORKER.ok;
  let welcome: WelcomeFrame;
  try {
    welcome = await handshake(conn, { ...o, hostname: host });
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

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });
}
