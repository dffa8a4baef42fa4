// `explore` with one master: the campaign loop around ExploreMaster. It owns the clock: rescans
// (inputs about every second, corpus and expired leases every quarter second), lease heartbeats,
// local slots, the optional worker server, the exact idle window, the wall budget and signals;
// then the tokenised stop, the final statistics and the clean-up of hidden state.
//
// Ending: idle (no pending and no active task after a fresh rescan, for --max-idle seconds on
// the monotonic clock) | wall budget | SIGINT/SIGTERM | no usable executor left.
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, rmdirSync, statSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { formatDuration } from "../config/duration.ts";
import { RuntimeFailure, UsageError } from "../errors.ts";
import { CampaignLock } from "../lock/campaign-lock.ts";
import type { ReadService } from "../net/worker-server.ts";
import { DEFAULT_BUDGETS, type Budgets } from "./corpus.ts";
import { writeFileAtomic } from "./durable.ts";
import { disposeScratch, executeTask } from "./execute.ts";
import { LeaseTable } from "./lease-table.ts";
import { ExploreMaster, type Ownership } from "./master.ts";
import { ExploreRemote } from "./remote.ts";
import { computeStats, renderStats, type ExploreStats } from "./stats.ts";

export const EXIT_EXPLORE = { ok: 0, lifecycle: 70, rendezvous: 71 } as const;
const INPUT_SCAN_MS = 1000;
const CORPUS_SCAN_MS = 250;
const SHARD_COUNT = 64;
const EPOCH_RE = /^[0-9a-f]{64}$/;

export interface ExploreOptions {
  inputDir: string;
  corpusDir: string;
  target: string[];
  slots: number;
  timeoutSeconds: number;
  maxIdleSeconds: number;
  wallTimeoutSeconds: number;
  simulate: boolean;
  port: number | null;
  bind: string | null;
  token: string | undefined;
  statsJson: string | null;
  resumeEpoch: string | null;
  leaseTtlSeconds: number | null;
  budgets?: Budgets;
  ownership?: Ownership;
  write?: (line: string) => void;
  signal: AbortSignal;
}

export function stateDir(corpusDir: string): string {
  return join(corpusDir, ".fuzzfleet");
}

export async function explore(o: ExploreOptions): Promise<number> {
  const write = o.write ?? ((line: string) => process.stdout.write(line + "\n"));
  const startMs = performance.now();
  const now = () => performance.now();
  const budgets = o.budgets ?? DEFAULT_BUDGETS;
  const inputDir = resolve(o.inputDir);
  const corpusDir = resolve(o.corpusDir);
  checkDirectory(inputDir, "-i");
  if (corpusDir === inputDir) throw new UsageError("-o must not be the input directory: the corpus holds every child too");
  mkdirSync(corpusDir, { recursive: true });
  const state = stateDir(corpusDir);
  const lock = CampaignLock.acquire(state, { mode: "explore", port: o.port });
  let keepState = true;
  try {
    const epoch = openEpoch(state, o.resumeEpoch);
    const workDir = join(state, `work-${epoch}`);
    const leaseTtlMs = (o.leaseTtlSeconds ?? Math.max(120, 4 * o.timeoutSeconds)) * 1000;
    const leases = new LeaseTable({ root: join(workDir, "leases"), shardCount: SHARD_COUNT, lockTimeoutMs: 30_000, durability: "fence" });
    const master = new ExploreMaster({
      corpusDir,
      inputDir,
      stagingRoot: join(workDir, "staging"),
      leases,
      epoch,
      rank: 0,
      ranks: [0],
      ownership: o.ownership ?? "rendezvous",
      budgets,
      timeoutSeconds: o.timeoutSeconds,
      leaseTtlMs,
      wallNow: () => Date.now(),
      log: (line) => write(`[explore] ${line}`),
    });
    write(`fuzzfleet explore: epoch ${epoch} (${o.resumeEpoch ? "resumed" : "new"})`);
    write(`  corpus   ${corpusDir}`);
    write(`  inputs   ${inputDir}`);
    write(`  target   ${o.target.join(" ")}  (${o.target.some((a) => a.includes("@@")) ? "file mode: @@ is the input's path" : "stdin mode"})`);
    write(
      `  per-run timeout ${formatDuration(o.timeoutSeconds)}, idle window ${o.maxIdleSeconds}s` +
        `${o.wallTimeoutSeconds > 0 ? `, wall budget ${formatDuration(o.wallTimeoutSeconds)}` : ""}${o.simulate ? ", --simulate" : ""}`,
    );
    if (o.resumeEpoch) {
      const replayed = master.replayCommitting();
      const reclaimed = master.recoverExpired(0);
      write(`  resumed: ${replayed} interrupted commit(s) redone, ${reclaimed} lease(s) taken over`);
    }
    master.admitInputs();
    master.scanCorpus();
    write(`  ${master.external.size} initial input(s), ${master.pendingCount} task(s) queued`);

    const campaign = new Campaign(o, master, workDir, budgets, leaseTtlMs, now, write);
    const remote = o.port !== null ? await campaign.startServer() : null;
    const end = await campaign.loop(remote);
    const stop = await campaign.shutdown(remote, end);
    const stats = computeStats(leases, master, corpusDir, (now() - startMs) / 1000, campaign.executorsUsed());
    write(renderStats(stats));
    if (o.statsJson) writeFileSync(o.statsJson, JSON.stringify(stats, null, 2) + "\n");
    const problems = [...master.problems, ...stop];
    if (end === "idle") {
      const late = master.countLateInputs();
      if (late > 0) write(`${late} input file(s) arrived after the frontier was declared exhausted: left for the next campaign`);
    }
    if (problems.length > 0) {
      write(`campaign incomplete (${problems.length} problem(s)):`);
      for (const p of problems.slice(0, 20)) write(`  ${p}`);
      if (problems.length > 20) write(`  … ${problems.length - 20} more`);
      write(`hidden state kept in ${workDir} for inspection; resume with --resume ${epoch}`);
      return EXIT_EXPLORE.lifecycle;
    }
    if (end === "idle") {
      keepState = false;
      rmSync(workDir, { recursive: true, force: true });
    } else {
      write(`the frontier is not exhausted (${end}); continue with: --resume ${epoch}`);
    }
    return EXIT_EXPLORE.ok;
  } finally {
    lock.release();
    if (!keepState) removeIfEmpty(state);
  }
}

type EndReason = "idle" | "wall budget" | "interrupted" | "no usable executor";

class Campaign {
  private readonly localControllers: AbortController[] = [];
  private readonly localRunning = new Set<Promise<void>>();
  private wake: (() => void) | null = null;
  private closing = false;
  private remote: ExploreRemote | null = null;
  /** Other masters publish into the same corpus (several-master campaigns). */
  multiMaster = false;

  constructor(
    private readonly o: ExploreOptions,
    private readonly master: ExploreMaster,
    private readonly workDir: string,
    private readonly budgets: Budgets,
    private readonly leaseTtlMs: number,
    private readonly now: () => number,
    private readonly write: (line: string) => void,
  ) {
    o.signal.addEventListener("abort", () => this.poke(), { once: true });
  }

  executorsUsed(): { local: number; remote: number } {
    return { local: this.o.slots, remote: this.remote?.server.everyone.length ?? 0 };
  }

  async startServer(): Promise<ExploreRemote> {
    const leaseTtlMs = this.leaseTtlMs;
    const token = this.o.token ?? process.env.FUZZFLEET_TOKEN?.trim() ?? randomBytes(16).toString("hex");
    const nonce = { path: join(this.workDir, "nonce"), value: randomBytes(16).toString("hex") };
    mkdirSync(this.workDir, { recursive: true });
    writeFileSync(nonce.path, nonce.value + "\n", { mode: 0o600 });
    const refuseRead = { type: "text" as const, text: "an explore master answers no status queries; watch its console\n" };
    const read: ReadService = { status: () => refuseRead, failures: () => refuseRead };
    const remote = new ExploreRemote({
      master: this.master,
      token,
      nonce,
      setup: {
        corpus_dir: resolve(this.o.corpusDir),
        target: this.o.target,
        target_cwd: process.cwd(),
        simulate: this.o.simulate,
        max_children: this.budgets.maxChildren,
        max_result_bytes: this.budgets.maxResultBytes,
        max_input_bytes: this.budgets.maxInputBytes,
      },
      leaseSeconds: leaseTtlMs / 1000,
      heartbeatSeconds: Math.max(0.5, Math.min(5, leaseTtlMs / 4000)),
      read,
      now: this.now,
      log: (line) => this.write(`[explore] ${line}`),
      onProgress: () => this.poke(),
    });
    const bind = this.o.bind ?? hostname();
    let addr;
    try {
      addr = await remote.listen(bind, this.o.port!);
    } catch (err) {
      throw new RuntimeFailure(`could not listen on ${bind}:${this.o.port} — ${(err as Error).message}`, { cause: err });
    }
    this.remote = remote;
    const shown = /^[\d.]+$|:/.test(bind) ? addr.address : bind;
    this.write(`  listening on ${addr.address}:${addr.port}; workers join with:`);
    this.write(`    fuzzfleet worker --master ${shown}:${addr.port} --token ${token} -j 1`);
    if (addr.address.startsWith("127.") || addr.address === "::1") {
      this.write("  !! that is a LOOPBACK address — workers on other hosts cannot reach it; pass --bind <LAN address>");
    }
    return remote;
  }

  private poke(): void {
    this.wake?.();
  }

  private dispatchOpen(elapsedSeconds: number): boolean {
    if (this.closing) return false;
    const wall = this.o.wallTimeoutSeconds;
    // A run that could not finish inside the wall budget is not started.
    return wall <= 0 || wall - elapsedSeconds > this.o.timeoutSeconds;
  }

  async loop(remote: ExploreRemote | null): Promise<EndReason> {
    const start = this.now();
    let idleSince: number | null = null;
    let lastInputs = this.now();
    let lastCorpus = this.now();
    let lastRecovery = this.now();
    let lastBeat = this.now();
    // Leases can only expire a TTL after they were last renewed: looking more often is waste.
    const recoveryMs = Math.max(CORPUS_SCAN_MS, Math.min(5000, this.leaseTtlMs / 4));
    // With one master every child is claimed where it is committed; the corpus scan only finds
    // what other masters published.
    const scanCorpus = this.multiMaster;
    // Renew held leases well inside their TTL.
    const beatMs = Math.max(100, Math.min(30_000, this.leaseTtlMs / 3));
    for (;;) {
      const t = this.now();
      const elapsed = (t - start) / 1000;
      if (this.o.signal.aborted) return "interrupted";
      if (this.o.wallTimeoutSeconds > 0 && elapsed >= this.o.wallTimeoutSeconds && this.master.activeTasks().length === 0) {
        return "wall budget";
      }
      if (t - lastBeat >= beatMs) {
        this.master.heartbeat();
        lastBeat = t;
      }
      let found = 0;
      if (t - lastInputs >= INPUT_SCAN_MS) {
        found += this.master.admitInputs();
        lastInputs = t;
      }
      if (scanCorpus && t - lastCorpus >= CORPUS_SCAN_MS) {
        found += this.master.scanCorpus();
        lastCorpus = t;
      }
      if (t - lastRecovery >= recoveryMs) {
        found += this.master.recoverExpired();
        lastRecovery = t;
      }
      if (this.dispatchOpen(elapsed)) this.fillLocalSlots();
      if (!remote && this.o.slots > 0 && this.master.quarantined.size >= this.o.slots && this.master.pendingCount > 0) {
        this.master.problems.push("every executor was quarantined: no usable executor left");
        return "no usable executor";
      }
      if (!this.dispatchOpen(elapsed) && this.master.activeTasks().length === 0 && this.o.wallTimeoutSeconds > 0) {
        return "wall budget";
      }
      if (this.master.idle && found === 0) {
        if (idleSince === null) {
          // A fresh rescan first: the idle window starts only when nothing is left anywhere.
          if (this.master.refresh()) continue;
          idleSince = t;
          this.write(`[explore] no more work in sight — ending in ${this.o.maxIdleSeconds}s unless some appears`);
        } else if (t - idleSince >= this.o.maxIdleSeconds * 1000) {
          this.write(`[explore] no more inputs after ${((t - idleSince) / 1000).toFixed(3)}s (limit ${this.o.maxIdleSeconds}s)`);
          return "idle";
        }
      } else {
        idleSince = null;
      }
      const untilIdleEnd = idleSince === null ? Infinity : idleSince + this.o.maxIdleSeconds * 1000 - this.now();
      await this.pause(Math.max(0, Math.min(CORPUS_SCAN_MS, untilIdleEnd)));
    }
  }

  private fillLocalSlots(): void {
    for (let i = 0; i < this.o.slots; i++) {
      const key = `local-${i}`;
      if (this.localControllers[i] || this.master.quarantined.has(key)) continue;
      const task = this.master.nextTask(key);
      if (!task) return;
      const controller = new AbortController();
      this.localControllers[i] = controller;
      const run = executeTask(
        task,
        {
          corpusDir: resolve(this.o.corpusDir),
          stageRoot: this.master.stageRoot(key),
          target: this.o.target,
          targetCwd: process.cwd(),
          simulate: this.o.simulate,
          budgets: this.budgets,
          scratchRoot: join(this.workDir, "scratch", key),
        },
        controller.signal,
      )
        .then((result) => {
          this.master.consumeResult(key, result);
        })
        .catch((err) => {
          this.master.problems.push(`local slot ${i} failed: ${(err as Error).message}`);
          this.master.release(key);
        })
        .finally(() => {
          delete this.localControllers[i];
          this.localRunning.delete(run);
          this.poke();
        });
      this.localRunning.add(run);
    }
  }

  /** Stops dispatch, settles local slots and remote workers. Returns the problems it saw. */
  async shutdown(remote: ExploreRemote | null, end: EndReason): Promise<string[]> {
    this.closing = true;
    if (remote) remote.closing = end;
    if (end === "interrupted") for (const c of this.localControllers) c?.abort();
    await Promise.all(this.localRunning);
    const problems: string[] = [];
    if (remote) {
      const outcome = await remote.server.stopAll(15_000);
      remote.server.close();
      for (const n of outcome.pending) problems.push(`worker ${n} did not acknowledge the stop`);
      for (const g of outcome.gone) problems.push(`worker ${g.name} left before acknowledging the stop (${g.why})`);
      if (outcome.acked.length) this.write(`[explore] worker shutdown: ${outcome.acked.length} exact ACK(s)`);
    }
    this.master.heartbeat();
    for (let i = 0; i < this.o.slots; i++) disposeScratch(join(this.workDir, "scratch", `local-${i}`));
    rmSync(join(this.workDir, "scratch"), { recursive: true, force: true });
    return problems;
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      function done(): void {
        clearTimeout(timer);
        self.wake = null;
        resolve();
      }
      this.wake = done;
    });
  }
}

function checkDirectory(path: string, flag: string): void {
  let st;
  try {
    st = statSync(path);
  } catch {
    throw new UsageError(`${flag} ${path} does not exist`);
  }
  if (!st.isDirectory()) throw new UsageError(`${flag} ${path} is not a directory`);
}

/** A new random epoch, or the one to resume (its state must exist and match). */
function openEpoch(state: string, resume: string | null): string {
  if (resume === null) {
    const epoch = randomBytes(32).toString("hex");
    const work = join(state, `work-${epoch}`);
    mkdirSync(work, { recursive: true });
    writeFileAtomic(join(work, "state.json"), JSON.stringify({ schema: "fuzzfleet-explore-state-v1", epoch, shard_count: SHARD_COUNT }) + "\n");
    return epoch;
  }
  if (!EPOCH_RE.test(resume)) throw new UsageError(`--resume wants the 64 lowercase hex characters of an epoch (got '${resume}')`);
  const file = join(state, `work-${resume}`, "state.json");
  let parsed: { schema?: unknown; epoch?: unknown; shard_count?: unknown };
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch {
    const known = existsSync(state) ? readdirSync(state).filter((n) => n.startsWith("work-")).map((n) => n.slice(5)) : [];
    throw new UsageError(`no explore state for epoch ${resume} (no ${file})${known.length ? `; known: ${known.join(", ")}` : ""}`);
  }
  if (parsed.epoch !== resume || parsed.shard_count !== SHARD_COUNT || parsed.schema !== "fuzzfleet-explore-state-v1") {
    throw new RuntimeFailure(`${file} does not describe epoch ${resume} with ${SHARD_COUNT} shards; refusing to resume on it`);
  }
  return resume;
}

function removeIfEmpty(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // Not empty (another epoch's state) or already gone.
  }
}

export type { ExploreStats };
