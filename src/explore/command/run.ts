// `explore`: one master of an explore campaign, start to final statistics. A master is either
// alone, the root of several (--masters N, rank 0), or a submaster (--join ROOT:PORT). The loop
// itself (rescans, heartbeats, local slots, dispatch) is the same for all three; what differs is
// how it ends (endings.ts) and how the statistics come together (stats-round.ts).
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, rmdirSync, statSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { formatDuration } from "../../config/duration.ts";
import { RuntimeFailure, UsageError } from "../../errors.ts";
import { EXIT } from "../../exit-codes.ts";
import { CampaignLock } from "../../lock/campaign-lock.ts";
import type { Connection } from "../../net/connection.ts";
import type { ReadService } from "../../net/worker-server.ts";
import type { TaskItemT } from "../../net/messages.ts";
import type { Budgets } from "../state/corpus.ts";
import { DEFAULT_BUDGETS, DEFAULT_FINALIZE_SECONDS, DEFAULT_JOIN_TIMEOUT_SECONDS } from "../defaults.ts";
import { writeFileAtomic } from "../state/durable.ts";
import { disposeScratch, executeTask, usesFileMode, type ExecuteSetup } from "../executor/execute.ts";
import { IdleWindow, ParticipantEnding, RootEnding, type EndReason, type Ending } from "../fleet/endings.ts";
import { LeaseTable } from "../state/lease-table.ts";
import { ExploreMaster, type Ownership } from "../master/master.ts";
import type { CampaignSetup, RootHub } from "../fleet/peers.ts";
import type { ExploreRemote } from "../fleet/remote.ts";
import { computeStats, renderStats, type ExploreStats } from "./stats.ts";
import type { Inbox } from "../fleet/stats-round.ts";
import { WakeablePause } from "../../util/pause.ts";
import { awaitToken, serverToken, type FoundToken } from "../../net/token.ts";
import { HEX64 } from "../../core/message-checks.ts";
import { randomHex } from "../../util/random-hex.ts";
// The wire, the masters' channel and their statistics round are loaded only by a master that
// serves workers or has peers: a lone master starts faster without them.

const INPUT_SCAN_MS = 1000;
/**
 * Input files admitted per turn of the loop (publish + claim, about 2 ms each on a small VM): a
 * large input directory (an AFL++ queue of thousands) is admitted a batch at a time between runs
 * instead of all before the first one. Batches much smaller than this cost throughput: in
 * bench/explore.mjs runs one after the other, 2 per turn gave 146 tasks/s against 162 for
 * admitting all 300 seeds first.
 */
const ADMIT_BATCH = 256;
const CORPUS_SCAN_MS = 250;
const SHARD_COUNT = 64;
/** How long a submaster waits for the root's token file and then the root, together. */
const JOIN_WAIT_SECONDS = 60;

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
  /** Several masters: the root's total (--masters N, with --port). */
  masters?: number;
  /** A submaster: the root's address (--join). */
  join?: { host: string; port: number } | null;
  /** Lost-master and shutdown grace (seconds); default max(120, 4 x timeout). */
  graceSeconds?: number | null;
  /** How long the root waits for every master to join, and a submaster for the roster. */
  joinTimeoutSeconds?: number;
  /** Bound of the final rendezvous (seconds). */
  finalizeSeconds?: number;
  /** Which lease-record writes are fsynced (see LeaseTable): default "fence". */
  durability?: "fence" | "all";
  write?: (line: string) => void;
  signal: AbortSignal;
}

export function stateDir(corpusDir: string): string {
  return join(corpusDir, ".fuzzfleet");
}

type Role = { kind: "single" } | { kind: "root"; masters: number } | { kind: "participant"; join: { host: string; port: number } };

export async function explore(o: ExploreOptions): Promise<number> {
  const write = o.write ?? ((line: string) => process.stdout.write(line + "\n"));
  const startMs = performance.now();
  const now = () => performance.now();
  const budgets = o.budgets ?? DEFAULT_BUDGETS;
  const inputDir = resolve(o.inputDir);
  const corpusDir = resolve(o.corpusDir);
  const ownership = o.ownership ?? "rendezvous";
  const role: Role = o.join ? { kind: "participant", join: o.join } : (o.masters ?? 1) > 1 ? { kind: "root", masters: o.masters! } : { kind: "single" };
  if (role.kind === "root" && o.port === null) throw new UsageError("--masters needs --port: the other masters join the root on that port");
  checkDirectory(inputDir, "-i");
  if (corpusDir === inputDir) throw new UsageError("-o must not be the input directory: the corpus holds every child too");
  mkdirSync(corpusDir, { recursive: true });
  const state = stateDir(corpusDir);
  const leaseTtlSeconds = o.leaseTtlSeconds ?? Math.max(120, 4 * o.timeoutSeconds);
  const graceMs = (o.graceSeconds ?? Math.max(120, 4 * o.timeoutSeconds)) * 1000;
  const setup: CampaignSetup = {
    corpus_dir: corpusDir,
    input_dir: inputDir,
    target: o.target,
    timeout_seconds: o.timeoutSeconds,
    max_idle_seconds: o.maxIdleSeconds,
    simulate: o.simulate,
    max_children: budgets.maxChildren,
    max_result_bytes: budgets.maxResultBytes,
    max_input_bytes: budgets.maxInputBytes,
    lease_ttl_seconds: leaseTtlSeconds,
    ownership,
  };
  // A submaster takes the root's token from the shared state directory, waiting for it if the
  // root is not up yet; it checks the root's host name first, which no wait could fix.
  let found: FoundToken | null = null;
  const joinWaitStart = now();
  if (role.kind === "participant") {
    const { checkHostName } = await import("../../net/dial-wait.ts");
    await checkHostName(role.join.host, role.join.port);
    found = await awaitToken(
      { flag: o.token, outDir: state },
      { waitSeconds: JOIN_WAIT_SECONDS, signal: o.signal, log: write, creator: "the root master", fix: "start the root master with the same -o, or pass --token or FUZZFLEET_TOKEN" },
    );
    if (!found) throw new RuntimeFailure("interrupted while waiting for the campaign token");
  }

  // Frames that belong to the end-of-campaign rounds, collected while the loop still runs.
  const statsInbox: Inbox = [];
  let statsLost: string | null = null;
  // The root and a single master own the campaign state; a submaster borrows the root's.
  const lock = role.kind === "participant" ? null : CampaignLock.acquire(state, { mode: "explore", port: o.port });
  let tokenFile: string | null = null;
  let keepState = true;
  let rootLink: Connection | null = null;
  // Closed in `finally` too: a campaign that fails early must not keep listening (nor the process alive).
  let hub: RootHub | null = null;
  let remote: ExploreRemote | null = null;
  try {
    // A master that serves keeps the token in the state directory (created 0600 if absent); the
    // banner names the file, never the secret.
    if (role.kind !== "participant" && (o.port !== null || role.kind === "root")) {
      found = serverToken({ flag: o.token, outDir: state });
      tokenFile = found.file;
    }
    let epoch: string;
    let rank = 0;
    let ranks = [0];
    if (role.kind === "participant") {
      write(`fuzzfleet explore: joining the root master at ${role.join.host}:${role.join.port}`);
      const { joinRoot } = await import("../fleet/peers.ts");
      const joined = await joinRoot({
        ...role.join,
        token: found!.token,
        setup,
        waitSeconds: Math.max(0, JOIN_WAIT_SECONDS - (now() - joinWaitStart) / 1000),
        joinTimeoutMs: (o.joinTimeoutSeconds ?? DEFAULT_JOIN_TIMEOUT_SECONDS) * 1000,
        signal: o.signal,
        log: write,
      });
      ({ epoch, rank, ranks } = joined);
      rootLink = joined.conn;
      if (!existsSync(join(state, `work-${epoch}`, "state.json"))) {
        throw new RuntimeFailure(`the root's campaign state ${join(state, `work-${epoch}`)} is not visible here: every master must mount the corpus directory at the same path`);
      }
    } else {
      epoch = openEpoch(state, o.resumeEpoch);
      if (role.kind === "root") ranks = Array.from({ length: role.masters }, (_, i) => i);
    }
    const workDir = join(state, `work-${epoch}`);
    const tag = role.kind === "single" ? "[explore]" : `[explore r${rank}]`;
    const log = (line: string) => write(`${tag} ${line}`);
    // Under broadcast ownership every master keeps its own table: nothing is shared, every master
    // runs everything (the behaviour rendezvous ownership replaces, kept for the benchmark).
    const leases = new LeaseTable({
      root: join(workDir, ownership === "broadcast" ? `leases-r${rank}` : "leases"),
      shardCount: SHARD_COUNT,
      lockTimeoutMs: 30_000,
      durability: o.durability ?? "fence",
    });
    const master = new ExploreMaster({
      corpusDir,
      inputDir,
      stagingRoot: join(workDir, "staging", `r${rank}`),
      leases,
      epoch,
      rank,
      ranks,
      ownership,
      budgets,
      timeoutSeconds: o.timeoutSeconds,
      leaseTtlMs: leaseTtlSeconds * 1000,
      wallNow: () => Date.now(),
      log,
    });
    write(`fuzzfleet explore: epoch ${epoch} (${o.resumeEpoch ? "resumed" : role.kind === "participant" ? "joined" : "new"})${ranks.length > 1 ? `, rank ${rank} of ${ranks.length} masters (${ownership} ownership)` : ""}`);
    write(`  corpus   ${corpusDir}`);
    write(`  inputs   ${inputDir}`);
    write(`  target   ${o.target.join(" ")}  (${usesFileMode(o.target) ? "file mode: @@ is the input's path" : "stdin mode"})`);
    write(
      `  per-run timeout ${formatDuration(o.timeoutSeconds)}, idle window ${o.maxIdleSeconds}s` +
        `${o.wallTimeoutSeconds > 0 ? `, wall budget ${formatDuration(o.wallTimeoutSeconds)}` : ""}${o.simulate ? ", --simulate" : ""}`,
    );

    const campaign = new Campaign(o, master, join(workDir, "scratch", `r${rank}`), budgets, leaseTtlSeconds * 1000, now, log, ranks.length > 1);
    let ending: Ending;
    const nonce = { path: join(workDir, `nonce-r${rank}`), value: randomHex(16) };
    writeFileSync(nonce.path, nonce.value + "\n", { mode: 0o600 });
    if (role.kind === "root") {
      let rootEnding: RootEnding | null = null;
      const { RootHub } = await import("../fleet/peers.ts");
      hub = new RootHub({
        token: found!.token,
        masters: role.masters,
        setup,
        nonce,
        epoch,
        graceMs,
        log,
        onFrame: (peer, f) => {
          if (f.type === "stats") statsInbox.push({ rank: peer.rank, frame: f });
          else rootEnding?.onFrame(peer, f);
        },
        onLost: (peer, why) => rootEnding ? rootEnding.onLost(peer, why) : log(`master rank ${peer.rank} was lost before the campaign started: ${why}`),
      });
      remote = await campaign.startServer(found!, nonce, (conn, hello) => hub!.accept(conn, hello));
      write(`  waiting for ${role.masters - 1} more master(s): fuzzfleet explore … --join <this host>:${campaign.port}${joinTokenHint(found!)}`);
      await hub.start((o.joinTimeoutSeconds ?? DEFAULT_JOIN_TIMEOUT_SECONDS) * 1000);
      ending = rootEnding = new RootEnding(master, hub, o.maxIdleSeconds * 1000, now, log);
    } else if (role.kind === "participant") {
      if (o.port !== null) remote = await campaign.startServer(found!, nonce, null);
      const p = new ParticipantEnding(master, rootLink!, rank, log);
      const { readRoot } = await import("../fleet/peers.ts");
      void readRoot(rootLink!, graceMs, (f) => {
        if (f.type === "stats_ack" || f.type === "release") statsInbox.push({ rank: 0, frame: f });
        else p.onFrame(f);
      }, (why) => {
        statsLost = why;
        p.onLost(why);
      });
      ending = p;
    } else {
      if (o.port !== null) remote = await campaign.startServer(found!, nonce, null);
      ending = new IdleWindow(master, o.maxIdleSeconds * 1000, log);
    }

    if (o.resumeEpoch) {
      const replayed = master.replayCommitting();
      const reclaimed = master.recoverExpired(0);
      write(`  resumed: ${replayed} interrupted commit(s) redone, ${reclaimed} lease(s) taken over`);
    }
    master.admitInputs(ADMIT_BATCH);
    master.scanCorpus();
    const listed = master.inputBacklogCount + master.external.size;
    write(`  ${listed} initial input(s) seen, ${master.pendingCount} task(s) queued here so far`);

    const end = await campaign.loop(remote, ending);
    const stop = await campaign.shutdown(remote, end);
    const elapsed = (now() - startMs) / 1000;
    const problems = [...ending.problems, ...master.problems, ...stop];
    const late = end === "idle" || end === "quiescence" ? master.countLateInputs() : 0;

    if (role.kind === "participant") {
      const { participantStats } = await import("../fleet/stats-round.ts");
      const r = await participantStats({ conn: rootLink!, rank, master, late, graceMs, finalizeMs: (o.finalizeSeconds ?? DEFAULT_FINALIZE_SECONDS) * 1000, inbox: statsInbox, lost: () => statsLost, log });
      problems.push(...r.problems);
      const stale = master.counters.staleResults;
      write(
        `rank ${rank}: ${master.counters.observations} observation(s), ${master.counters.generated} generated` +
          `${stale ? `, ${stale} stale result(s) discarded (their tasks were taken over)` : ""}` +
          `${late ? `, ${late} late input file(s) left for the next campaign` : ""}`,
      );
      if (r.timedOut) return EXIT.rendezvousTimeout;
      return problems.length > 0 ? report(write, problems, workDir, epoch, EXIT.lifecycle) : EXIT.ok;
    }

    let stats: ExploreStats;
    if (role.kind === "root") {
      const { rootStats } = await import("../fleet/stats-round.ts");
      const r = await rootStats({ hub: hub!, master, late, graceMs, inbox: statsInbox, now, log });
      problems.push(...r.problems);
      stats = computeStats(leases, master, corpusDir, elapsed, campaign.executorsUsed(), ranks.length, { ...r.totals, byMaster: r.byMaster });
    } else {
      stats = computeStats(leases, master, corpusDir, elapsed, campaign.executorsUsed());
    }
    write(renderStats(stats));
    if (o.statsJson) writeFileSync(o.statsJson, JSON.stringify(stats, null, 2) + "\n");
    if (stats.late_inputs > 0) write(`${stats.late_inputs} input file(s) arrived after the frontier was declared exhausted: left for the next campaign`);
    const clean = problems.length === 0 && (end === "idle" || end === "quiescence");
    if (clean) {
      keepState = false;
      rmSync(workDir, { recursive: true, force: true });
      // The token file is part of the hidden state: a corpus that is copied or shared later
      // must not carry the secret along.
      if (tokenFile !== null) rmSync(tokenFile, { force: true });
    }
    if (hub) {
      // Test seam: hold the final release this long (FUZZFLEET_TEST_HOLD_RELEASE_MS).
      const holdMs = Number(process.env.FUZZFLEET_TEST_HOLD_RELEASE_MS ?? 0) || 0;
      if (holdMs > 0) await new Promise((r) => setTimeout(r, holdMs));
    }
    hub?.broadcast({ type: "release", token: epoch });
    if (problems.length > 0) return report(write, problems, workDir, epoch, EXIT.lifecycle);
    if (!clean) write(`the frontier is not exhausted (${end}); continue with: --resume ${epoch}`);
    return EXIT.ok;
  } finally {
    hub?.close();
    remote?.server.close();
    rootLink?.destroy();
    lock?.release();
    if (!keepState) removeIfEmpty(state);
  }
}

function report(write: (l: string) => void, problems: string[], workDir: string, epoch: string, code: number): number {
  write(`campaign incomplete (${problems.length} problem(s)):`);
  for (const p of problems.slice(0, 20)) write(`  ${p}`);
  if (problems.length > 20) write(`  … ${problems.length - 20} more`);
  if (existsSync(workDir)) write(`hidden state kept in ${workDir} for inspection; resume with --resume ${epoch}`);
  return code;
}

class Campaign {
  private readonly localControllers: AbortController[] = [];
  private readonly localRunning = new Set<Promise<void>>();
  /** What every run of local slot i needs, built with its first task. */
  private readonly slotSetups: ExecuteSetup[] = [];
  private readonly sleeper = new WakeablePause();
  private closing = false;
  /** When the loop started (the clock of the wall budget). */
  private loopStart = 0;
  private remote: ExploreRemote | null = null;
  port = 0;

  constructor(
    private readonly o: ExploreOptions,
    private readonly master: ExploreMaster,
    /** This master's private scratch space (one directory per local slot below it). */
    private readonly scratchDir: string,
    private readonly budgets: Budgets,
    private readonly leaseTtlMs: number,
    private readonly now: () => number,
    private readonly log: (line: string) => void,
    /** Other masters publish into the same corpus: scan it for their children. */
    private readonly multiMaster: boolean,
  ) {
    o.signal.addEventListener("abort", () => this.sleeper.wake(), { once: true });
  }

  executorsUsed(): { local: number; remote: number } {
    return { local: this.o.slots, remote: this.remote?.server.everyone.length ?? 0 };
  }

  async startServer(found: FoundToken, nonce: { path: string; value: string }, onPeer: ConstructorParameters<typeof ExploreRemote>[0]["onPeer"]): Promise<ExploreRemote> {
    const refuseRead = { type: "text" as const, text: "an explore master answers no status queries; watch its console\n" };
    const read: ReadService = { status: () => refuseRead, failures: () => refuseRead };
    const { ExploreRemote } = await import("../fleet/remote.ts");
    const remote = new ExploreRemote({
      master: this.master,
      token: found.token,
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
      leaseSeconds: this.leaseTtlMs / 1000,
      heartbeatSeconds: Math.max(0.5, Math.min(5, this.leaseTtlMs / 4000)),
      read,
      now: this.now,
      log: this.log,
      onProgress: () => this.sleeper.wake(),
      onPeer,
    });
    const bind = this.o.bind ?? hostname();
    let addr;
    try {
      addr = await remote.listen(bind, this.o.port!);
    } catch (err) {
      throw new RuntimeFailure(`could not listen on ${bind}:${this.o.port} — ${(err as Error).message}`, { cause: err });
    }
    this.remote = remote;
    this.port = addr.port;
    const shown = /^[\d.]+$|:/.test(bind) ? addr.address : bind;
    this.log(`listening on ${addr.address}:${addr.port}; workers join with:`);
    this.log(`  fuzzfleet worker --master ${shown}:${addr.port}${workerTokenFlag(found)} -j 1${found.source === "FUZZFLEET_TOKEN" ? ENV_TOKEN_NOTE : ""}`);
    if (addr.address.startsWith("127.") || addr.address === "::1") {
      this.log("!! that is a LOOPBACK address — hosts other than this one cannot reach it; pass --bind <LAN address>");
    }
    return remote;
  }

  private dispatchOpen(): boolean {
    if (this.closing) return false;
    const wall = this.o.wallTimeoutSeconds;
    // A run that could not finish inside the wall budget is not started.
    return wall <= 0 || wall - (this.now() - this.loopStart) / 1000 > this.o.timeoutSeconds;
  }

  async loop(remote: ExploreRemote | null, ending: Ending): Promise<EndReason> {
    this.loopStart = this.now();
    let lastInputs = this.now();
    let lastCorpus = this.now();
    let lastRecovery = this.now();
    let lastBeat = this.now();
    // Renew held leases well inside their TTL; leases can only expire a TTL after they were last
    // renewed, so looking for expired ones more often is waste.
    const beatMs = Math.max(100, Math.min(30_000, this.leaseTtlMs / 3));
    const recoveryMs = Math.max(CORPUS_SCAN_MS, Math.min(5000, this.leaseTtlMs / 4));
    for (;;) {
      const t = this.now();
      if (this.o.signal.aborted) return "interrupted";
      if (t - lastBeat >= beatMs) {
        this.master.heartbeat();
        lastBeat = t;
      }
      let found = 0;
      // A backlog is worked through at once; a new listing waits for the scan interval.
      const relist = this.master.inputBacklogCount === 0;
      if (!relist || t - lastInputs >= INPUT_SCAN_MS) {
        found += this.master.admitInputs(ADMIT_BATCH);
        if (relist) lastInputs = t;
      }
      // With one master every child is claimed where it is committed; the corpus scan only
      // finds what other masters published.
      if (this.multiMaster && t - lastCorpus >= CORPUS_SCAN_MS) {
        found += this.master.scanCorpus();
        lastCorpus = t;
      }
      if (t - lastRecovery >= recoveryMs) {
        found += this.master.recoverExpired();
        lastRecovery = t;
      }
      if (this.dispatchOpen()) this.fillLocalSlots();
      else if (this.o.wallTimeoutSeconds > 0 && this.master.activeCount === 0) return "wall budget";
      if (!remote && this.o.slots > 0 && this.master.quarantined.size >= this.o.slots && this.master.pendingCount > 0) {
        this.master.problems.push("every executor was quarantined: no usable executor left");
        return "no usable executor";
      }
      const end = ending.step(t, found);
      if (end) return end;
      const untilEnd = ending instanceof IdleWindow ? ending.untilEnd(this.now()) : 50;
      // Inputs still to admit: come back as soon as the results and exits that arrived meanwhile
      // have been handled.
      const admitting = this.master.inputBacklogCount > 0;
      await this.sleeper.pause(admitting ? 0 : Math.max(0, Math.min(CORPUS_SCAN_MS, untilEnd)));
    }
  }

  private fillLocalSlots(): void {
    for (let i = 0; i < this.o.slots; i++) {
      const key = `local-${i}`;
      if (this.localControllers[i] || this.master.quarantined.has(key)) continue;
      const task = this.master.nextTask(key);
      if (!task) return;
      this.startLocal(i, key, task);
    }
  }

  private startLocal(i: number, key: string, task: TaskItemT): void {
    const controller = new AbortController();
    this.localControllers[i] = controller;
    this.slotSetups[i] ??= {
      corpusDir: resolve(this.o.corpusDir),
      stageRoot: this.master.stageRoot(key),
      target: this.o.target,
      targetCwd: process.cwd(),
      simulate: this.o.simulate,
      budgets: this.budgets,
      scratchRoot: join(this.scratchDir, key),
    };
    const run = executeTask(task, this.slotSetups[i], controller.signal)
      .then(
        (result) => {
          // The slot is free once its target has finished: the next run starts before this
          // result is committed, so the commit's file work overlaps the next target's run.
          if (this.localControllers[i] === controller) delete this.localControllers[i];
          if (this.dispatchOpen()) this.fillLocalSlots();
          try {
            this.master.consumeResult(key, result);
          } catch (err) {
            // The slot may hold its next task already, so nothing is released here; the task of
            // this result stays with its lease (committing or leased) for --resume or takeover.
            this.master.problems.push(`local slot ${i}: the result of task ${task.task_id} could not be committed: ${(err as Error).message}`);
          }
        },
        (err) => {
          this.master.problems.push(`local slot ${i} failed: ${(err as Error).message}`);
          this.master.release(key);
        },
      )
      .finally(() => {
        if (this.localControllers[i] === controller) delete this.localControllers[i];
        this.localRunning.delete(run);
        this.sleeper.wake();
      });
    this.localRunning.add(run);
  }

  /** Stops dispatch, settles local slots and remote workers. Returns the problems it saw. */
  async shutdown(remote: ExploreRemote | null, end: EndReason): Promise<string[]> {
    this.closing = true;
    if (remote) remote.closing = end;
    if (end !== "idle" && end !== "quiescence") for (const c of this.localControllers) c?.abort();
    await Promise.all(this.localRunning);
    const problems: string[] = [];
    if (remote) {
      const outcome = await remote.server.stopAll(15_000);
      remote.server.close();
      for (const n of outcome.pending) problems.push(`worker ${n} did not acknowledge the stop`);
      for (const g of outcome.gone) problems.push(`worker ${g.name} left before acknowledging the stop (${g.why})`);
      if (outcome.acked.length) this.log(`worker shutdown: ${outcome.acked.length} exact ACK(s)`);
    }
    this.master.heartbeat();
    for (let i = 0; i < this.o.slots; i++) disposeScratch(join(this.scratchDir, `local-${i}`));
    rmSync(this.scratchDir, { recursive: true, force: true });
    return problems;
  }
}

/** What a worker adds to its command line to get this master's token: never the secret, unless --token gave it. */
function workerTokenFlag(found: FoundToken): string {
  if (found.file !== null) return ` --token-file ${found.file}`;
  return found.source === "--token" ? ` --token ${found.token}` : "";
}

/** The same for a submaster, which reads the state directory of its own -o by itself. */
function joinTokenHint(found: FoundToken): string {
  if (found.file !== null) return ` (the token is read from ${found.file})`;
  return found.source === "--token" ? ` --token ${found.token}` : ENV_TOKEN_NOTE;
}

const ENV_TOKEN_NOTE = "  (with this master's FUZZFLEET_TOKEN in the environment)";

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
    const epoch = randomHex(32);
    const work = join(state, `work-${epoch}`);
    mkdirSync(work, { recursive: true });
    writeFileAtomic(join(work, "state.json"), JSON.stringify({ schema: "fuzzfleet-explore-state-v1", epoch, shard_count: SHARD_COUNT }) + "\n");
    return epoch;
  }
  if (!HEX64.test(resume)) throw new UsageError(`--resume wants the 64 lowercase hex characters of an epoch (got '${resume}')`);
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
