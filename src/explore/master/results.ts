// Consuming one executor's result: the master's side of a task's end. The result is taken only
// for the task the executor holds under its current fence; an interrupted run goes back to the
// front, a budget failure completes the task, a result that fails its checks (result-checks.ts) or
// its stage verification is refused (the executor is quarantined, the task requeued unless its own
// content is corrupt). A good one is committed now (commits.ts) or queued with this turn's other
// commits (commit-batch.ts), then settled: the master forgets the task, records what outlives the
// campaign (the explored ledger, the finding) and claims the children it owns.
//
// Stages are never followed through a symlink: a stage is reached from the staging root this
// master created (StagingArea); before it is opened it is removed through a fresh walk, after
// that through its pin.
import { FileProblem, IntegrityError, STAGE_ID_RE, verifyPublic } from "../state/corpus.ts";
import type { FindingsStore } from "../state/findings.ts";
import type { ExploredLedger } from "../state/ledger.ts";
import { canonicalManifest } from "../state/lease-table.ts";
import { type OpenStage, type StagingArea, verifyStage } from "../state/staging.ts";
import type { Budgets } from "../defaults.ts";
import type { TaskResult } from "../task.ts";
import { problem } from "../../core/problems.ts";
import { commitResult, completeOverBudget, type CommitContext, type CommitOutcome } from "./commits.ts";
import { batchable, type CommitBatches } from "./commit-batch.ts";
import type { MasterCounters } from "./counters.ts";
import type { ActiveTask, Dispatch } from "./dispatch.ts";
import { recordNotReproduced, recordRunFinding } from "./finding-record.ts";
import type { MasterProblems } from "./problems.ts";
import { resultProblem } from "./result-checks.ts";

/** The master's parts a result touches. */
export interface ResultIntakeParts {
  tasks: Dispatch;
  staging: StagingArea;
  commits: CommitContext;
  batches: CommitBatches;
  budgets: Budgets;
  counters: MasterCounters;
  problems: MasterProblems;
  ledger: ExploredLedger;
  findings: FindingsStore;
  /** Findings this master recorded in this session, and how many of them were new inputs. */
  found: { recorded: number; newInputs: number };
  build: string;
  wallNow: () => number;
  log: (line: string) => void;
  /** Whether the master loop is woken per batch of commits (commit-batch.ts). */
  woken: () => boolean;
  isVerified: (hash: string) => boolean;
  /** Puts a task back at the front under its fence; false when the fence is no longer current. */
  requeueFront: (task: ActiveTask) => boolean;
  claimChild: (hash: string) => void;
  /** Tells the other masters about children they own (nothing when every hash is this master's). */
  hint: (children: readonly string[]) => void;
}

export class ResultIntake {
  /** Inputs with a finding record (any campaign's): a run of one without a finding may mean a new build fixed it. */
  private readonly recordedFindings: Set<string>;

  constructor(private readonly m: ResultIntakeParts) {
    this.recordedFindings = new Set(m.findings.list().map((f) => f.input_hash));
  }

  /**
   * Consumes one result (also during shutdown: late results are never dropped). Returns the note
   * for the worker's ack.
   */
  consume(executor: string, r: TaskResult): string {
    const m = this.m;
    const stageId = STAGE_ID_RE.test(r.stagingId) ? r.stagingId : null;
    // Before the stage is opened it is removed through a fresh walk, after that through its pin.
    let stage: OpenStage | null = null;
    const removeStage = () => {
      if (stage) stage.remove();
      else if (stageId) m.staging.remove(executor, stageId);
    };
    const task = m.tasks.take(r.taskId, executor);
    if (!task) {
      removeStage();
      m.problems.invalid(executor, `result for task ${r.taskId}, which it does not hold`);
      return "unknown task";
    }
    if (r.failure === "interrupted") {
      removeStage();
      m.requeueFront(task);
      return "requeued";
    }
    if (r.failure === "result-budget-exceeded" || r.failure === "input-budget-exceeded") {
      removeStage();
      return this.budgetFailure(task, r);
    }
    const why = resultProblem(task, r, m.budgets);
    if (why !== null) return this.refuse(executor, task, why, removeStage);
    if (stageId) {
      try {
        stage = m.staging.open(executor, stageId);
      } catch (err) {
        if (!(err instanceof FileProblem)) throw err;
        return this.refuse(executor, task, `stage ${stageId}: ${err.message}`, removeStage);
      }
    }
    try {
      if (stage) {
        const verdict = verifyStage(stage.dir, r.children, r.stagedBytes, m.budgets.maxInputBytes);
        if (!verdict.ok) return this.refuse(executor, task, `stage ${stageId}: ${verdict.reason}`, removeStage);
        if (r.children.length > 0 && batchable(executor, m.woken())) {
          // Committed with the other results of this turn (commit-batch.ts), which now owns the stage.
          const manifest = canonicalManifest({ worker: executor, staging_id: r.stagingId, hashes: r.children, num_generated: r.generated });
          m.batches.add({ task, result: r, stage, manifest });
          stage = null;
          return "committed";
        }
      }
      const outcome = commitResult(m.commits, { executor, task, result: r, stage: stage?.dir ?? null, removeStage, isVerified: m.isVerified });
      return this.settle(task, r, outcome);
    } finally {
      stage?.close();
    }
  }

  /** What the master holds and counts after the commit of `r` came out as `outcome`; the note for the ack. */
  settle(task: ActiveTask, r: TaskResult, outcome: CommitOutcome): string {
    const m = this.m;
    m.tasks.forget(task.hash);
    switch (outcome.kind) {
      case "committed":
        m.counters.observations++;
        m.counters.generated += r.generated;
        m.ledger.add(task.hash);
        this.recordFinding(task, r);
        for (const child of outcome.children) m.claimChild(child);
        m.hint(outcome.children);
        return "committed";
      case "stale":
        m.counters.staleResults++;
        return outcome.note;
      case "deferred":
        // The record stays `committing`: any master (or --resume) redoes it from the manifest.
        // Its fence passed, so the run counts: its finding is recorded now.
        this.recordFinding(task, r);
        m.problems.problem(`promoting the children of ${task.hash.slice(0, 12)} failed: ${outcome.error.message}`);
        return "commit deferred";
    }
  }

  /**
   * Records the finding of a committed run, once per fence (the store refuses a repeated fence);
   * a run of a recorded input without one, under a new build, marks the record not reproduced.
   */
  private recordFinding(task: ActiveTask, r: TaskResult): void {
    const { findings, found, build, wallNow, log, problems } = this.m;
    const recordedFindings = this.recordedFindings;
    const rec = { findings, found, build, wallNow, log, problem: (msg: string) => problems.problem(msg) };
    if (r.finding) {
      recordRunFinding(rec, task, r);
      recordedFindings.add(task.hash);
    } else if (recordedFindings.has(task.hash)) recordNotReproduced(rec, task.hash);
  }

  private refuse(executor: string, task: ActiveTask, why: string, removeStage: () => void): string {
    const m = this.m;
    removeStage();
    m.problems.invalid(executor, why);
    // The content itself must still be what its name says, or nobody can execute it.
    try {
      verifyPublic(m.commits.corpusDir, task.hash, m.budgets.maxInputBytes);
    } catch (err) {
      if (err instanceof IntegrityError) {
        m.problems.integrity(err.message);
        m.tasks.drop(task.hash);
        return "refused";
      }
    }
    m.requeueFront(task);
    return "refused";
  }

  private budgetFailure(task: ActiveTask, r: TaskResult): string {
    const m = this.m;
    m.counters.budgetErrors++;
    m.problems.list.push(problem("budget", completeOverBudget(m.commits, task, r)));
    m.ledger.add(task.hash);
    m.tasks.forget(task.hash);
    return "budget exceeded";
  }
}
