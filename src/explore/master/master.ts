// ExploreMaster: the frontier of one master. It admits inputs into the content-addressed corpus
// (admission.ts), claims the tasks it owns in the fenced lease table, hands them to executors
// (local slots or remote workers; dispatch.ts), and turns their results into commits (results.ts):
// check the result (result-checks.ts), verify the stage, pass the commit fence, promote the
// children, complete, then claim the children it owns (commits.ts; batched when the lease table is
// its own: commit-batch.ts). discovery.ts finds other masters' children; problems.ts keeps what
// went wrong. No socket I/O and no timers (a
// batch commits on the next turn of the event loop): the master loop (command/master-loop.ts) drives it.
//
// A task: pending (hash, fence) -> active on one executor -> committed | requeued (front, same
// fence) | dropped (fence lost). Only the current fence of a hash may be dispatched, committed
// or completed; a late result under an old fence changes nothing.
//
// Stages are never followed through a symlink (results.ts); inputs are read as admission.ts says.
//
// What outlives the campaign is recorded as tasks end, under the target's build: every completed
// task in the explored ledger (explored.ts: content earlier campaigns completed under the same
// build is skipped unless `fresh`; under another build it runs again), every committed run that
// crashed or hung in the findings store, and a recorded input that a new build ran without a crash
// or hang as not reproduced by it (results.ts, state/findings.ts, state/target-identity.ts).
import { join } from "node:path";
import { owner as rendezvousOwner } from "../../core/rendezvous.ts";
import { listCorpus } from "../state/corpus.ts";
import { FindingsStore, findingsDir } from "../state/findings.ts";
import { campaignBaseline, ledgerDir } from "../state/ledger.ts";
import { stateDir, workDir } from "../state/work-dir.ts";
import type { TargetIdentity } from "../state/target-identity.ts";
import type { LeaseTable, Origin } from "../state/lease-table.ts";
import type { MasterOptions } from "./options.ts";
import { StagingArea } from "../state/staging.ts";
import type { Task, TaskResult } from "../task.ts";
import { InputAdmission } from "./admission.ts";
import { CorpusDiscovery } from "./discovery.ts";
import { noCounts, type MasterCounters } from "./counters.ts";
import { replayCommits, type CommitContext } from "./commits.ts";
import { Dispatch, type ActiveTask } from "./dispatch.ts";
import { CommitBatches, type CommitBatchOptions } from "./commit-batch.ts";
import { takeOverExpired } from "./recovery.ts";
import { MasterShares } from "./shares.ts";
import { MasterProblems } from "./problems.ts";
import { ResultIntake } from "./results.ts";
import { ExploredHistory } from "./explored.ts";
import type { Problem } from "../../core/problems.ts";

export class ExploreMaster {
  readonly counters: MasterCounters = noCounts();
  private readonly report: MasterProblems;
  /** Executors that sent an invalid result, and why: they get no more tasks. */
  readonly quarantined: ReadonlyMap<string, string>;
  /** Problems that make the campaign end non-zero (integrity, invalid results…), in order. */
  readonly problems: Problem[];
  private readonly tasks: Dispatch;
  private readonly admission: InputAdmission;
  /** Corpus names already considered (claimed, or not ours to claim). */
  private readonly observed = new Set<string>();
  /** Public objects whose bytes this master verified or published itself. */
  private readonly verified = new Set<string>();
  private readonly staging: StagingArea;
  private readonly shares: MasterShares;
  private readonly commits: CommitContext;
  /** Group commit of remote results with children (and of local ones when the loop is woken per batch). */
  private readonly batches: CommitBatches;
  private readonly results: ResultIntake;
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
  /** What earlier campaigns explored (skipped, run again under a new build), and the ledger of what this one completes (explored.ts). */
  readonly explored: ExploredHistory;
  /** Findings this master recorded in this session, and how many of them were new inputs. */
  readonly found = { recorded: 0, newInputs: 0 };

  constructor(private readonly o: MasterOptions) {
    this.report = new MasterProblems(this.counters, o.log);
    this.quarantined = this.report.quarantined;
    this.problems = this.report.list;
    this.staging = new StagingArea(o.stagingRoot);
    this.ownerName = `${o.epoch.slice(0, 16)}:${o.rank}`;
    this.everyoneOwns = o.ownership === "broadcast" || new Set(o.ranks).size === 1;
    // The same condition makes this master the table's only writer (a lone master holds the
    // campaign lock; a broadcast master's table is its own): it journals instead of a file per write.
    if (this.everyoneOwns) o.leases.takeExclusive();
    // Several masters: each serves its share under a partition lease, in a journal of its own.
    else o.leases.takePartition({ rank: o.rank, ranks: o.ranks, holder: `${this.ownerName}:${process.pid}`, epoch: o.epoch, ttlMs: o.leaseTtlMs, wallNow: o.wallNow });
    this.shares = new MasterShares({ leases: o.leases, rank: o.rank, ranks: o.ranks, everyoneOwns: this.everyoneOwns, staging: this.staging, stagingRoot: o.stagingRoot, log: o.log, wallNow: o.wallNow });
    this.tasks = new Dispatch(o.timeoutSeconds);
    const state = stateDir(o.corpusDir);
    this.findings = new FindingsStore(findingsDir(state), { redact: o.redact });
    this.explored = new ExploredHistory({ dir: ledgerDir(state), epoch: o.epoch, rank: o.rank, syncAll: o.leases.durability === "all", build: o.build, fresh: o.fresh ?? false });
    this.baseline = campaignBaseline(workDir(state, o.epoch), () => listCorpus(o.corpusDir));
    this.commits = { leases: o.leases, corpusDir: o.corpusDir, maxInputBytes: o.budgets.maxInputBytes, wallNow: o.wallNow };
    const isVerified = (h: string) => this.verified.has(h);
    const settle: CommitBatchOptions["settle"] = (c, outcome) => this.results.settle(c.task, c.result, outcome);
    this.batches = new CommitBatches({ ctx: this.commits, isVerified, settle, problem: (m) => this.report.problem(m), settled: () => this.onCommitted?.() });
    this.results = new ResultIntake({
      tasks: this.tasks,
      staging: this.staging,
      commits: this.commits,
      batches: this.batches,
      budgets: o.budgets,
      counters: this.counters,
      problems: this.report,
      ledger: this.explored.ledger,
      findings: this.findings,
      found: this.found,
      build: o.build,
      wallNow: o.wallNow,
      log: o.log,
      woken: () => this.onCommitted !== null,
      isVerified,
      requeueFront: (t) => this.requeueFront(t),
      claimChild: (h) => this.claimChild(h),
      hint: (children) => {
        if (!this.everyoneOwns) this.discovery.hint(children, (h) => this.o.leases.partition?.shareOf(h) ?? rendezvousOwner(h, this.o.ranks));
      },
    });
    this.discovery = new CorpusDiscovery({
      corpusDir: o.corpusDir,
      hintDir: join(workDir(state, o.epoch), "discovered"),
      rank: o.rank,
      maxInputBytes: o.budgets.maxInputBytes,
      observed: this.observed,
      owns: (hash) => this.owns(hash),
      claim: (hash) => this.claim(hash, this.external.has(hash) ? "initial" : "generated"),
      integrity: (m) => this.report.integrity(m),
      problem: (m) => this.report.problem(m),
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
      problem: (m) => this.report.problem(m),
      integrity: (m) => this.report.integrity(m),
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
    return this.shares.owns(hash);
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
    const tookShare = this.shares.takeOver();
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
      integrity: (m) => this.report.integrity(m),
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

  /** Whether a share of a partitioned table waits for a takeover (its lease expired): recoverExpired() takes it. */
  get shareWaiting(): boolean {
    return !this.shares.allServed;
  }

  /** Redoes commits that passed their fence but were not finished (a crashed master's). */
  replayCommitting(): number {
    return replayCommits(this.commits, (fence) => this.shares.stagingOf(fence), (children, id) => {
      this.counters.replayedCommits++;
      this.explored.ledger.add(id);
      for (const child of children) this.claimChild(child);
    });
  }

  /** Everything a quiescence refresh looks at: inputs, the corpus, expired leases. Returns whether work appeared. */
  refresh(): boolean {
    const before = this.tasks.pendingCount;
    this.admitInputs();
    if (!this.frozen) this.discovery.scan(true);
    this.recoverExpired();
    // A file still settling is work in sight too: it is admitted once it stopped changing; a share
    // whose lease is not live (its master died or stalled) waits for a takeover: busy too.
    return this.tasks.pendingCount > before || this.admission.settlingCount > 0 || !this.shares.allServed;
  }

  /** Input files this master owns but never admitted (discovery was frozen): left for the next campaign. */
  countLateInputs(): number {
    return this.admission.countLate();
  }

  /** Renews every held fence (one batch); lost ones are dropped. */
  heartbeat(): void {
    if (this.shares.renew().length > 0) {
      const lost = [...this.tasks.fences.keys()].filter((id) => !this.owns(id));
      this.counters.lostLeases += lost.length;
      this.tasks.dropLost(lost);
    }
    if (this.tasks.fences.size === 0) return;
    const { lost } = this.o.leases.heartbeatMany(this.tasks.fences, this.o.wallNow());
    this.counters.lostLeases += lost.length;
    this.tasks.dropLost(lost);
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

  /** Closes the explored ledger (its last lines are fsynced). */
  close(): void {
    this.batches.drainSync();
    this.o.leases.sync();
    this.discovery.close();
    this.explored.ledger.close();
  }

  private claim(hash: string, origin: Origin): boolean {
    if (!this.owns(hash) || this.tasks.holds(hash)) return false;
    if (this.explored.passOver(hash)) {
      this.counters.skippedExplored = this.explored.skippedCount;
      return false;
    }
    const fence = this.o.leases.claim(hash, { hash, origin }, this.ownerName, {
      now: this.o.wallNow(),
      ttlMs: this.o.leaseTtlMs,
      worker: this.o.rank,
    });
    if (!fence) return false;
    this.tasks.hold(hash, fence);
    this.explored.claimed(hash);
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
   * for the worker's ack (results.ts).
   */
  consumeResult(executor: string, r: TaskResult): string {
    return this.results.consume(executor, r);
  }
}
