// ExploreMaster: the frontier of one master. It admits inputs into the content-addressed corpus
// (admission.ts), claims the tasks it owns in the fenced lease table, hands them to executors
// (local slots or remote workers; dispatch.ts), and turns their results into commits: check the
// result (result-checks.ts), verify the stage, pass the commit fence, promote the children,
// complete, then claim the children it owns (commits.ts; batched when the lease table is its own:
// commit-batch.ts). discovery.ts finds other masters' children. No socket I/O and no timers (a
// batch commits on the next turn of the event loop): the master loop (command/master-loop.ts) drives it.
//
// A task: pending (hash, fence) -> active on one executor -> committed | requeued (front, same
// fence) | dropped (fence lost). Only the current fence of a hash may be dispatched, committed
// or completed; a late result under an old fence changes nothing.
//
// Stages are never followed through a symlink: a stage is reached from the staging root this
// master created (StagingArea); inputs are read as admission.ts says.
//
// What outlives the campaign is recorded as tasks end, under the target's build: every completed
// task in the explored ledger (content earlier campaigns completed under the same build is skipped
// unless `fresh`; under another build it runs again), every committed run that crashed or hung in
// the findings store, and a recorded input that a new build ran without a crash or hang as not
// reproduced by it (state/ledger.ts, state/findings.ts, state/target-identity.ts).
import { dirname, join } from "node:path";
import { printable } from "../../core/log-lines.ts";
import { owner as rendezvousOwner } from "../../core/rendezvous.ts";
import type { Budgets } from "../defaults.ts";
import { FileProblem, IntegrityError, listCorpus, STAGE_ID_RE, verifyPublic } from "../state/corpus.ts";
import { FindingsStore, findingsDir } from "../state/findings.ts";
import type { Redact } from "../../exec/secrets.ts";
import { campaignBaseline, type EarlierExplored, ExploredLedger, ledgerDir, targetChange, type TargetChange } from "../state/ledger.ts";
import { stateDir, workDir } from "../state/work-dir.ts";
import type { TargetIdentity } from "../state/target-identity.ts";
import { canonicalManifest, type LeaseTable, type Origin } from "../state/lease-table.ts";
import { type OpenStage, StagingArea, verifyStage } from "../state/staging.ts";
import type { Task, TaskResult } from "../task.ts";
import { InputAdmission } from "./admission.ts";
import { CorpusDiscovery } from "./discovery.ts";
import { noCounts, type MasterCounters } from "./counters.ts";
import { commitResult, completeOverBudget, replayCommits, type CommitContext, type CommitOutcome } from "./commits.ts";
import { Dispatch, type ActiveTask } from "./dispatch.ts";
import { batchable, CommitBatches, type QueuedCommit } from "./commit-batch.ts";
import { resultProblem } from "./result-checks.ts";
import { sharesServed, takeOverExpired, takeOverShares } from "./recovery.ts";
import { recordNotReproduced, recordRunFinding } from "./finding-record.ts";
import { problem, type Problem } from "../../core/problems.ts";

export type Ownership = "rendezvous" | "broadcast";

export interface MasterOptions {
  corpusDir: string;
  /** The input directories (-i, one or several). */
  inputDir: string | readonly string[];
  /** <work>/staging: executor stages live in <stagingRoot>/<executor key>/<staging id>. */
  stagingRoot: string;
  leases: LeaseTable;
  epoch: string;
  rank: number;
  ranks: number[];
  ownership: Ownership;
  budgets: Budgets;
  /** Per-run timeout in seconds, carried by every task. */
  timeoutSeconds: number;
  leaseTtlMs: number;
  /** Wall-clock ms (lease records compare across processes). */
  wallNow: () => number;
  log: (line: string) => void;
  /** Run everything again, content earlier campaigns completed included (default false). */
  fresh?: boolean;
  /** The target build the campaign runs (state/target-identity.ts): what the ledger and findings record. */
  build: string;
  /** What `build` was computed from, for the statistics (default: the build alone is known). */
  targetIdentity?: TargetIdentity;
  /** Hides the campaign's secrets in the output tails of findings (default: nothing hidden). */
  redact?: Redact;
}

export class ExploreMaster {
  readonly counters: MasterCounters = noCounts();
  readonly quarantined = new Map<string, string>();
  /** Problems that make the campaign end non-zero (integrity, invalid results…), in order. */
  readonly problems: Problem[] = [];
  private readonly tasks: Dispatch;
  private readonly admission: InputAdmission;
  /** Corpus names already considered (claimed, or not ours to claim). */
  private readonly observed = new Set<string>();
  /** Public objects whose bytes this master verified or published itself. */
  private readonly verified = new Set<string>();
  private readonly staging: StagingArea;
  /** The staging areas of masters whose shares this one took over. */
  private readonly otherStaging = new Map<number, StagingArea>();
  private readonly commits: CommitContext;
  /** Group commit of remote results with children (and of local ones when the loop is woken per batch). */
  private readonly batches: CommitBatches;
  private readonly discovery: CorpusDiscovery;
  private readonly ownerName: string;
  /** Broadcast ownership, or a single master: every hash is this master's, no owner hash needed. */
  private readonly everyoneOwns: boolean;
  /** The loop's wake-up, called once a batch of commits settled (new tasks may be pending). */
  onCommitted: (() => void) | null = null;
  /** While frozen (a quiescence vote is pending), no new work is discovered. */
  frozen = false;
  /** The inputs that crashed or hung the target, of every campaign on this corpus. */
  readonly findings: FindingsStore;
  /** Corpus objects that were there before this epoch's campaign began (never counted as new). */
  readonly baseline: ReadonlySet<string>;
  private readonly ledger: ExploredLedger;
  /** Content completed by earlier campaigns, by build (nothing when fresh). */
  private readonly earlier: EarlierExplored;
  /** Content of `earlier.same` this master passed over. */
  private readonly skipped = new Set<string>();
  /** Content of `earlier.other` this master claimed: run again under this build. */
  private readonly rerun = new Set<string>();
  /** Inputs with a finding record (any campaign's): a run of one without a finding may mean a new build fixed it. */
  private readonly recordedFindings: Set<string>;
  /** Findings this master recorded in this session, and how many of them were new inputs. */
  readonly found = { recorded: 0, newInputs: 0 };

  constructor(private readonly o: MasterOptions) {
    this.staging = new StagingArea(o.stagingRoot);
    this.ownerName = `${o.epoch.slice(0, 16)}:${o.rank}`;
    this.everyoneOwns = o.ownership === "broadcast" || new Set(o.ranks).size === 1;
    // The same condition makes this master the table's only writer (a lone master holds the
    // campaign lock; a broadcast master's table is its own): it journals instead of a file per write.
    if (this.everyoneOwns) o.leases.takeExclusive();
    // Several masters: each serves its share under a partition lease, in a journal of its own.
    else o.leases.takePartition({ rank: o.rank, ranks: o.ranks, holder: `${this.ownerName}:${process.pid}`, epoch: o.epoch, ttlMs: o.leaseTtlMs, wallNow: o.wallNow });
    this.tasks = new Dispatch(o.timeoutSeconds);
    const state = stateDir(o.corpusDir);
    this.findings = new FindingsStore(findingsDir(state), { redact: o.redact });
    this.ledger = new ExploredLedger(ledgerDir(state), o.epoch, o.rank, o.leases.durability === "all", o.build);
    this.earlier = o.fresh ? { same: new Set(), other: new Map(), lastBuild: null } : this.ledger.loadEarlier(o.build);
    this.recordedFindings = new Set(this.findings.list().map((f) => f.input_hash));
    this.baseline = campaignBaseline(workDir(state, o.epoch), () => listCorpus(o.corpusDir));
    this.commits = { leases: o.leases, corpusDir: o.corpusDir, maxInputBytes: o.budgets.maxInputBytes, wallNow: o.wallNow };
    const settle = (c: QueuedCommit, outcome: CommitOutcome) => this.settle(c.task, c.result, outcome);
    this.batches = new CommitBatches({ ctx: this.commits, isVerified: (h) => this.verified.has(h), settle, problem: (m) => this.problem(m), settled: () => this.onCommitted?.() });
    this.discovery = new CorpusDiscovery({
      corpusDir: o.corpusDir,
      hintDir: join(workDir(state, o.epoch), "discovered"),
      rank: o.rank,
      maxInputBytes: o.budgets.maxInputBytes,
      observed: this.observed,
      owns: (hash) => this.owns(hash),
      claim: (hash) => this.claim(hash, this.external.has(hash) ? "initial" : "generated"),
      integrity: (m) => this.integrity(m),
      problem: (m) => this.problem(m),
    });
    this.admission = new InputAdmission({
      inputDir: o.inputDir,
      corpusDir: o.corpusDir,
      budgets: o.budgets,
      everyoneOwns: this.everyoneOwns,
      owns: (hash) => this.owns(hash),
      admit: (hash) => {
        this.verified.add(hash);
        this.observed.add(hash);
        return this.claim(hash, "initial");
      },
      counters: this.counters,
      log: o.log,
      problem: (m) => this.problem(m),
      integrity: (m) => this.integrity(m),
    });
  }

  /** The campaign (epoch) this master works for. */
  get epoch(): string {
    return this.o.epoch;
  }

  /** Corpus names this master has seen (its listings, hints and the children it published): the corpus as it knows it, for views that must not list it again. */
  get corpusSeen(): ReadonlySet<string> {
    return this.observed;
  }

  /** Content hashes seen in the input directory. */
  get external(): ReadonlySet<string> {
    return this.admission.external;
  }

  get idle(): boolean {
    return this.tasks.pendingCount === 0 && this.tasks.activeCount === 0 && this.admission.backlogCount === 0 && this.admission.settlingCount === 0 && this.batches.size === 0;
  }

  get pendingCount(): number {
    return this.tasks.pendingCount;
  }

  /** Tasks handed out and not yet answered. */
  get activeCount(): number {
    return this.tasks.activeCount;
  }

  /** Input files listed and not yet looked at. */
  get inputBacklogCount(): number {
    return this.admission.backlogCount;
  }

  /** Input files listed that are still settling (fresh or changing): admitted once they stay the same. */
  get inputSettlingCount(): number {
    return this.admission.settlingCount;
  }

  /** The ids of the tasks `executor` holds. */
  activeOn(executor: string): number[] {
    return this.tasks.activeOn(executor);
  }

  /** Whether this master admits `hash` (rendezvous owner, or everyone under broadcast). */
  owns(hash: string): boolean {
    if (this.everyoneOwns) return true;
    // The shares this master serves: its own, and those it took over.
    return this.o.leases.partition?.mayHold(hash) ?? rendezvousOwner(hash, this.o.ranks) === this.o.rank;
  }

  // ---- discovery --------------------------------------------------------------------------------

  /**
   * Scans the input directory: new or changed regular files are published and, if owned, claimed.
   * At most `limit` of them per call: the rest wait in a backlog that the next calls work through
   * (while it lasts the master is not idle), so that a large input directory is admitted while the
   * first tasks already run. The directory is listed again once the backlog is empty, and always
   * with no limit, which admits everything there is (a fresh rescan for the idle decision).
   */
  admitInputs(limit = Number.POSITIVE_INFINITY): number {
    if (this.frozen) return 0;
    return this.admission.scan(limit);
  }

  /**
   * Finds public objects this master owns and has not considered yet: the first call, and one
   * every few seconds, lists the whole corpus; the others read only what other masters said they
   * published (discovery.ts). refresh() always lists.
   */
  scanCorpus(): number {
    if (this.frozen) return 0;
    return this.discovery.scan();
  }

  /** Takes over expired `leased` records (any master's: progress when an owner stalls). */
  recoverExpired(ttlMs = this.o.leaseTtlMs): number {
    if (this.frozen) return 0;
    const tookShare = takeOverShares(this.o.leases, this.o.log, this.o.wallNow());
    if (tookShare) {
      // A share taken over: its commits past their fence are finished, its leases run again.
      this.replayCommitting();
      ttlMs = 0;
    }
    const added = takeOverExpired(this.commits, {
      ttlMs,
      owner: this.ownerName,
      rank: this.o.rank,
      holds: (id) => this.tasks.holds(id),
      log: this.o.log,
      integrity: (m) => this.integrity(m),
    });
    for (const { id, fence } of added) {
      this.observed.add(id);
      this.tasks.hold(id, fence);
    }
    this.counters.recovered += added.length;
    if (tookShare) {
      // Content of the share this master saw but left to its owner (never claimed) is looked at again.
      for (const h of [...this.observed]) if (this.owns(h) && !this.tasks.holds(h)) this.observed.delete(h);
      this.discovery.scan(true);
    }
    return added.length;
  }

  /** Redoes commits that passed their fence but were not finished (a crashed master's). */
  replayCommitting(): number {
    return replayCommits(this.commits, (fence) => this.stagingOf(fence), (children, id) => {
      this.counters.replayedCommits++;
      this.ledger.add(id);
      for (const child of children) this.claimChild(child);
    });
  }

  /** The staging area of the master whose fence this is (fences begin `<epoch prefix>:<rank>:`): its executors staged the result. */
  private stagingOf(fence: string): StagingArea {
    const rank = Number(fence.split(":")[1]);
    if (rank === this.o.rank || !Number.isSafeInteger(rank) || !this.o.ranks.includes(rank)) return this.staging;
    let area = this.otherStaging.get(rank);
    if (area === undefined) this.otherStaging.set(rank, (area = new StagingArea(join(dirname(this.o.stagingRoot), `r${rank}`))));
    return area;
  }

  /** Everything a quiescence refresh looks at: inputs, the corpus, expired leases. Returns whether work appeared. */
  refresh(): boolean {
    const before = this.tasks.pendingCount;
    this.admitInputs();
    if (!this.frozen) this.discovery.scan(true);
    this.recoverExpired();
    // A file still settling is work in sight too: it is admitted once it stopped changing; a share
    // whose lease is not live (its master died or stalled) waits for a takeover: busy too.
    return this.tasks.pendingCount > before || this.admission.settlingCount > 0 || !sharesServed(this.o.leases);
  }

  /** Input files this master owns but never admitted (discovery was frozen): left for the next campaign. */
  countLateInputs(): number {
    return this.admission.countLate();
  }

  /** Renews every held fence (one batch); lost ones are dropped. */
  heartbeat(): void {
    const lostShares = this.o.leases.renewShares();
    if (lostShares.length > 0) {
      this.o.log(`the share(s) of rank ${lostShares.join(", ")} were taken over by another master: this master commits nothing more of them`);
      const lost = [...this.tasks.fences.keys()].filter((id) => !this.owns(id));
      this.counters.lostLeases += lost.length;
      this.tasks.dropLost(lost);
    }
    if (this.tasks.fences.size === 0) return;
    const { lost } = this.o.leases.heartbeatMany(this.tasks.fences, this.o.wallNow());
    this.counters.lostLeases += lost.length;
    this.tasks.dropLost(lost);
  }

  /** Whether the lease table is partitioned (several masters, each serving its share). */
  get partitioned(): boolean {
    return this.o.leases.partition !== null;
  }

  /** The lease table (a partitioned one: the records of the shares this master serves). */
  get leaseTable(): LeaseTable {
    return this.o.leases;
  }

  /** How this epoch's masters are named in lease and partition records (`<prefix>:<rank>`). */
  get epochPrefix(): string {
    return this.o.epoch.slice(0, 16);
  }

  /** The target build this master records under, and what it was computed from when known. */
  get target(): { build: string; identity: TargetIdentity | null } {
    return { build: this.o.build, identity: this.o.targetIdentity ?? null };
  }

  /** Content earlier campaigns completed that this master passed over. */
  get skippedExplored(): number { return this.skipped.size; }

  /** Content earlier campaigns completed under another build (or an unrecorded one) that this master ran again. */
  get rerunOtherBuild(): number { return this.rerun.size; }

  /** Why content earlier campaigns explored runs again under this build (ledger.ts); null when nothing does. */
  get targetChange(): TargetChange | null {
    return targetChange(this.earlier, this.o.build);
  }

  /** Closes the explored ledger (its last lines are fsynced). */
  close(): void {
    this.batches.drainSync();
    this.o.leases.sync();
    this.discovery.close();
    this.ledger.close();
  }

  private claim(hash: string, origin: Origin): boolean {
    if (!this.owns(hash) || this.tasks.holds(hash)) return false;
    if (this.earlier.same.has(hash)) {
      this.skipped.add(hash);
      this.counters.skippedExplored = this.skipped.size;
      return false;
    }
    const fence = this.o.leases.claim(hash, { hash, origin }, this.ownerName, {
      now: this.o.wallNow(),
      ttlMs: this.o.leaseTtlMs,
      worker: this.o.rank,
    });
    if (!fence) return false;
    this.tasks.hold(hash, fence);
    if (this.earlier.other.has(hash)) this.rerun.add(hash);
    if (origin === "generated") this.counters.claimedChildren++;
    return true;
  }

  private claimChild(hash: string): void {
    this.verified.add(hash);
    // Most children are duplicates of inputs already considered: no lease read for those.
    if (this.observed.has(hash)) return;
    this.observed.add(hash);
    this.claim(hash, this.external.has(hash) ? "initial" : "generated");
  }

  // ---- dispatch ---------------------------------------------------------------------------------

  /** The next task for `executor`, if it may work and there is one under a current fence. */
  nextTask(executor: string): Task | null {
    if (this.quarantined.has(executor)) return null;
    return this.tasks.next(executor);
  }

  /** The executor is gone or interrupted: its tasks go back to the front under the same fence. */
  release(executor: string): number {
    let n = 0;
    for (const t of this.tasks.takeAll(executor)) if (this.requeueFront(t)) n++;
    return n;
  }

  private requeueFront(t: ActiveTask): boolean {
    if (!this.tasks.requeueFront(t)) {
      this.counters.staleResults++;
      return false;
    }
    this.counters.requeued++;
    return true;
  }

  // ---- results ----------------------------------------------------------------------------------

  /** Where an executor's stages live: derived from the executor key the master chose, never from the worker. */
  stageRoot(executor: string): string {
    return this.staging.executorRoot(executor);
  }

  /**
   * Consumes one result (also during shutdown: late results are never dropped). Returns the note
   * for the worker's ack.
   */
  consumeResult(executor: string, r: TaskResult): string {
    const stageId = STAGE_ID_RE.test(r.stagingId) ? r.stagingId : null;
    // Before the stage is opened it is removed through a fresh walk, after that through its pin.
    let stage: OpenStage | null = null;
    const removeStage = () => {
      if (stage) stage.remove();
      else if (stageId) this.staging.remove(executor, stageId);
    };
    const task = this.tasks.take(r.taskId, executor);
    if (!task) {
      removeStage();
      this.invalid(executor, `result for task ${r.taskId}, which it does not hold`);
      return "unknown task";
    }
    if (r.failure === "interrupted") {
      removeStage();
      this.requeueFront(task);
      return "requeued";
    }
    if (r.failure === "result-budget-exceeded" || r.failure === "input-budget-exceeded") {
      removeStage();
      return this.budgetFailure(task, r);
    }
    const why = resultProblem(task, r, this.o.budgets);
    if (why !== null) return this.refuseResult(executor, task, why, removeStage);
    if (stageId) {
      try {
        stage = this.staging.open(executor, stageId);
      } catch (err) {
        if (!(err instanceof FileProblem)) throw err;
        return this.refuseResult(executor, task, `stage ${stageId}: ${err.message}`, removeStage);
      }
    }
    try {
      if (stage) {
        const verdict = verifyStage(stage.dir, r.children, r.stagedBytes, this.o.budgets.maxInputBytes);
        if (!verdict.ok) return this.refuseResult(executor, task, `stage ${stageId}: ${verdict.reason}`, removeStage);
        if (r.children.length > 0 && batchable(executor, this.onCommitted !== null)) {
          // Committed with the other results of this turn (commit-batch.ts), which now owns the stage.
          const manifest = canonicalManifest({ worker: executor, staging_id: r.stagingId, hashes: r.children, num_generated: r.generated });
          this.batches.add({ task, result: r, stage, manifest });
          stage = null;
          return "committed";
        }
      }
      const outcome = commitResult(this.commits, { executor, task, result: r, stage: stage?.dir ?? null, removeStage, isVerified: (h) => this.verified.has(h) });
      return this.settle(task, r, outcome);
    } finally {
      stage?.close();
    }
  }

  /** What the master holds and counts after the commit of `r` came out as `outcome`; the note for the ack. */
  private settle(task: ActiveTask, r: TaskResult, outcome: CommitOutcome): string {
    this.tasks.forget(task.hash);
    switch (outcome.kind) {
      case "committed":
        this.counters.observations++;
        this.counters.generated += r.generated;
        this.ledger.add(task.hash);
        this.recordFinding(task, r);
        for (const child of outcome.children) this.claimChild(child);
        if (!this.everyoneOwns) this.discovery.hint(outcome.children, (h) => rendezvousOwner(h, this.o.ranks));
        return "committed";
      case "stale":
        this.counters.staleResults++;
        return outcome.note;
      case "deferred":
        // The record stays `committing`: any master (or --resume) redoes it from the manifest.
        // Its fence passed, so the run counts: its finding is recorded now.
        this.recordFinding(task, r);
        this.problem(`promoting the children of ${task.hash.slice(0, 12)} failed: ${outcome.error.message}`);
        return "commit deferred";
    }
  }

  /**
   * Records the finding of a committed run, once per fence (the store refuses a repeated fence);
   * a run of a recorded input without one, under a new build, marks the record not reproduced.
   */
  private recordFinding(task: ActiveTask, r: TaskResult): void {
    const m = { findings: this.findings, found: this.found, build: this.o.build, wallNow: this.o.wallNow, log: this.o.log, problem: (msg: string) => this.problem(msg) };
    if (r.finding) {
      recordRunFinding(m, task, r);
      this.recordedFindings.add(task.hash);
    } else if (this.recordedFindings.has(task.hash)) recordNotReproduced(m, task.hash);
  }

  private refuseResult(executor: string, task: ActiveTask, why: string, removeStage: () => void): string {
    removeStage();
    this.invalid(executor, why);
    // The content itself must still be what its name says, or nobody can execute it.
    try {
      verifyPublic(this.o.corpusDir, task.hash, this.o.budgets.maxInputBytes);
    } catch (err) {
      if (err instanceof IntegrityError) {
        this.integrity(err.message);
        this.tasks.drop(task.hash);
        return "refused";
      }
    }
    this.requeueFront(task);
    return "refused";
  }

  private budgetFailure(task: ActiveTask, r: TaskResult): string {
    this.counters.budgetErrors++;
    this.problems.push(problem("budget", completeOverBudget(this.commits, task, r)));
    this.ledger.add(task.hash);
    this.tasks.forget(task.hash);
    return "budget exceeded";
  }

  private invalid(executor: string, why: string): void {
    this.counters.invalidResults++;
    this.problems.push(problem("invalid-result", `invalid result from ${executor}: ${why}`));
    if (!this.quarantined.has(executor)) {
      this.quarantined.set(executor, why);
      this.o.log(`executor ${executor} quarantined: ${printable(why)}`);
    }
  }

  private integrity(message: string): void {
    this.counters.integrityErrors++;
    this.problems.push(problem("integrity", message));
    this.o.log(message);
  }

  private problem(message: string): void {
    this.problems.push(problem("master", message));
    this.o.log(message);
  }
}
