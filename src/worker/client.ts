// The `worker` client: dial the coordinator (waiting for it if it is not up yet), prove it sees
// the same shared directory and generator, then pull chunks and run them with the same child
// execution as `run`. All socket I/O is strict request -> reply on this one loop; chunks run in
// the background and only their results cross over. It never reads the config or the store.
//
// Loop states: working -> draining (coordinator said so: finish what is held, take nothing new)
//              -> stopping (stop{token}: end children, clean scratch, then stop_ack{token}) -> done
// Lost coordinator (EOF, timeout, bad frame): children are killed, exit 1.
import { readFileSync, rmSync } from "node:fs";
import { hostname as osHostname } from "node:os";
import { performance } from "node:perf_hooks";
import { formatDuration } from "../config/duration.ts";
import { formatInt } from "../config/format.ts";
import { RefusedError, RuntimeFailure } from "../errors.ts";
import { runChild, type ChildResult } from "../exec/run-child.ts";
import { Connection, dial } from "../net/connection.ts";
import {
  CoordinatorReply,
  HandshakeReply,
  PROTOCOL_VERSION,
  Welcome,
  Refuse,
  type AssignedChunk,
  type ChallengeFrame,
  type CoordinatorReplyT,
  type Frame,
  type ProveFrame,
  type WelcomeFrame,
} from "../net/messages.ts";
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

export const EXIT_WORKER = { ok: 0, lost: 1 } as const;

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

interface Running {
  chunk: AssignedChunk;
  controller: AbortController;
  result: ChildResult | null;
  startedMs: number;
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
  if (welcome.mode !== "sweep") {
    conn.destroy();
    throw new RuntimeFailure(`the coordinator runs a '${welcome.mode}' campaign, which this worker loop does not serve`);
  }
  o.log(`worker ${host}: attached to ${o.host}:${o.port} as #${welcome.worker_id} (session ${welcome.session}, generation ${welcome.generation}), -j ${o.jobs}`);
  const loop = new SweepWorkerLoop(conn, welcome, o);
  try {
    return await loop.run();
  } finally {
    conn.destroy();
    o.log(`worker ${host}: done`);
  }
}

class SweepWorkerLoop {
  private readonly running = new Map<number, Running>();
  private draining = false;
  private interrupted = false;
  private stopToken: string | null = null;
  private lastBeatMs = 0;
  private wake: (() => void) | null = null;

  constructor(
    private readonly conn: Connection,
    private readonly welcome: WelcomeFrame,
    private readonly o: WorkerOptions,
  ) {
    o.signal.addEventListener("abort", () => this.wake?.(), { once: true });
  }

  async run(): Promise<number> {
    try {
      return await this.loop();
    } catch (err) {
      this.o.log(`worker: lost the coordinator (${(err as Error).message})`);
      await this.endChildren();
      return EXIT_WORKER.lost;
    }
  }

  private async loop(): Promise<number> {
    const beatMs = Math.max(0.2, this.welcome.heartbeat_seconds) * 1000;
    for (;;) {
      if (this.o.signal.aborted && !this.interrupted) {
        this.interrupted = true;
        this.o.log("  interrupted: stopping the chunks I hold; the coordinator will re-sweep them");
        for (const r of this.running.values()) r.controller.abort();
      }
      await this.reportFinished();
      if (this.stopToken !== null) return this.stop(this.stopToken);
      if (this.interrupted && this.running.size === 0) {
        await this.call({ type: "bye", reason: "interrupted" });
        return EXIT_WORKER.ok;
      }
      let pauseMs = beatMs;
      if (!this.draining && !this.interrupted && this.running.size < this.o.slots) {
        const reply = await this.call({ type: "want", slots: this.o.slots - this.running.size });
        if (reply.type === "assign") {
          for (const chunk of reply.chunks) this.start(chunk);
          continue;
        }
        if (reply.type === "wait") pauseMs = Math.min(beatMs, reply.seconds * 1000);
        if (reply.type === "drain") this.startDraining(`coordinator is draining (${reply.reason}) — finishing what I hold`);
        if (this.stopToken !== null) continue;
      }
      const now = performance.now();
      const idleDrained = (this.draining || this.interrupted) && this.running.size === 0;
      if ((this.running.size > 0 && now - this.lastBeatMs >= beatMs) || (idleDrained && !this.interrupted)) {
        this.lastBeatMs = now;
        const reply = await this.call({ type: "heartbeat", ids: [...this.running.keys()] });
        if (reply.type === "ack" && reply.drain) this.startDraining("coordinator is draining — will exit once my chunks land");
        if (this.stopToken !== null) continue;
        if (idleDrained) pauseMs = Math.min(pauseMs, 1000);
      }
      await this.pause(pauseMs);
    }
  }

  private startDraining(line: string): void {
    if (this.draining) return;
    this.draining = true;
    this.o.log(`  ${line}`);
  }

  /** One request -> reply. A `stop` reply is remembered; protocol breaks throw (lost coordinator). */
  private async call(frame: Frame): Promise<CoordinatorReplyT> {
    const reply = await this.conn.request(frame, CoordinatorReply, REQUEST_TIMEOUT_MS);
    if (reply.type === "refuse") throw new RuntimeFailure(`the coordinator refused a request: ${reply.reason}`);
    if (reply.type === "stop") this.stopToken = reply.token;
    return reply;
  }

  private start(chunk: AssignedChunk): void {
    const run: Running = { chunk, controller: new AbortController(), result: null, startedMs: performance.now() };
    this.running.set(chunk.chunk_id, run);
    this.o.log(`  chunk ${chunk.chunk_id}: ${chunk.lane} seeds ${formatInt(chunk.seed_from)}..${formatInt(chunk.seed_to)} (${formatInt(chunk.seed_to - chunk.seed_from + 1)})`);
    rmSync(chunk.scratch_dir, { recursive: true, force: true });
    runChild({
      argv: chunk.argv,
      cwd: chunk.cwd,
      logPath: chunk.log_path,
      hardTimeoutMs: chunk.hard_timeout * 1000,
      nice: chunk.nice,
      idleIo: chunk.idle_io,
      signal: run.controller.signal,
    }).then(
      (result) => this.finished(run, result),
      (err) => this.finished(run, { outcome: "error", exitCode: null, signal: null, seconds: 0, error: String(err) }),
    );
  }

  private finished(run: Running, result: ChildResult): void {
    run.result = result;
    this.wake?.();
  }

  private async reportFinished(): Promise<void> {
    for (const [id, run] of this.running) {
      if (!run.result) continue;
      const r = run.result;
      const reply = await this.call({
        type: "done",
        chunk_id: id,
        elapsed: r.seconds,
        rc: r.exitCode,
        outcome: r.outcome,
        error: r.error ?? null,
      });
      this.running.delete(id);
      const note = reply.type === "ack" ? reply.note : reply.type;
      this.o.log(`  chunk ${id} ${r.outcome}${r.exitCode !== null ? ` (rc ${r.exitCode})` : ""} in ${formatDuration(r.seconds)} (${note})`);
      if (reply.type === "ack" && reply.drain) this.startDraining("coordinator is draining — finishing what I hold");
    }
  }

  /** The tokenised stop: end the children, report them, clean up, then ACK with the exact token. */
  private async stop(token: string): Promise<number> {
    this.o.log("  the coordinator asked me to stop");
    for (const r of this.running.values()) r.controller.abort();
    await this.waitChildren();
    const scratch = [...this.running.values()].map((r) => r.chunk.scratch_dir);
    await this.reportFinished();
    for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
    const reply = await this.conn.request({ type: "stop_ack", token }, CoordinatorReply, REQUEST_TIMEOUT_MS);
    this.o.log(reply.type === "bye" ? "  stop acknowledged" : `  the coordinator answered the stop_ack with '${reply.type}'`);
    return reply.type === "bye" ? EXIT_WORKER.ok : EXIT_WORKER.lost;
  }

  private async endChildren(): Promise<void> {
    for (const r of this.running.values()) r.controller.abort();
    await this.waitChildren();
  }

  /** Bounded by runChild's own TERM -> KILL grace. */
  private async waitChildren(): Promise<void> {
    while ([...this.running.values()].some((r) => r.result === null)) await this.pause(100);
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = null;
        done();
      };
    });
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });
}
