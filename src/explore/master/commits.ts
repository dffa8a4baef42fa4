// The commit of a verified result, in the lease table and the corpus: pass the commit fence with
// the result's manifest, promote the staged children, complete the task. Also the two other ways
// a task ends committed: redoing a commit a crashed master left `committing`, and completing an
// input that exceeds a budget without children.
//
//   no children:  commitEmpty (fence and completion in one step)            -> committed | stale
//   children:     beginCommit --> promote + complete (replayCommit) --------> committed | stale
//                 beginCommit refused ----------------------------------------> stale
//                 promote throws: the record stays `committing` -----------> deferred (redone by
//                                                          any master's replay, or by --resume)
// The stage is removed once the outcome is known, except for a deferred commit, whose replay
// still needs it. What the master holds and counts is the master's (master.ts).
import type { PinnedDir } from "../../files/pinned-dir.ts";
import { FileProblem } from "../state/corpus.ts";
import { canonicalManifest, type LeaseTable } from "../state/lease-table.ts";
import { promoteChildren } from "../state/promotion.ts";
import type { OpenStage, StagingArea } from "../state/staging.ts";
import type { TaskResult } from "../task.ts";

export interface CommitContext {
  leases: LeaseTable;
  corpusDir: string;
  maxInputBytes: number;
  /** Wall-clock ms (lease records compare across processes). */
  wallNow: () => number;
}

export type CommitOutcome =
  /** The task is done; `children` are the manifest's (unique, sorted), now public. */
  | { kind: "committed"; children: string[] }
  /** The fence was no longer current ("stale"), or the task was done already ("already"). */
  | { kind: "stale"; note: "stale" | "already" }
  /** The fence passed but promotion failed: the record stays `committing` for a replay. */
  | { kind: "deferred"; error: Error };

/**
 * Commits `r`, the verified result of the task (hash, fence) from `executor`, whose stage (if it
 * has children) is `stage`. `isVerified(h)`: the public object h is known to hold its bytes, so
 * promotion need not read it again.
 */
export function commitResult(
  ctx: CommitContext,
  c: { executor: string; task: { hash: string; fence: string }; result: TaskResult; stage: PinnedDir | null; removeStage: () => void; isVerified: (hash: string) => boolean },
): CommitOutcome {
  const { task, result: r, stage, removeStage } = c;
  const now = ctx.wallNow();
  const manifest = canonicalManifest({ worker: c.executor, staging_id: r.stagingId, hashes: r.children, num_generated: r.generated });
  if (manifest.hashes.length === 0) {
    const outcome = ctx.leases.commitEmpty(task.hash, task.fence, manifest, now);
    removeStage();
    return outcome === "completed" ? { kind: "committed", children: [] } : { kind: "stale", note: outcome };
  }
  if (!ctx.leases.beginCommit(task.hash, task.fence, manifest, now)) {
    removeStage();
    return { kind: "stale", note: "stale" };
  }
  let outcome: "completed" | "already" | "stale";
  try {
    outcome = ctx.leases.replayCommit(
      task.hash,
      task.fence,
      (m) => {
        if (stage) promoteChildren(stage, ctx.corpusDir, m.hashes, { maxBytes: ctx.maxInputBytes, trusted: c.isVerified });
      },
      ctx.wallNow(),
    );
  } catch (err) {
    return { kind: "deferred", error: err as Error };
  }
  removeStage();
  return outcome === "completed" ? { kind: "committed", children: manifest.hashes } : { kind: "stale", note: outcome };
}

/**
 * An input over a budget is completed without children: retrying it would fail again, since a
 * budget error is a property of the input, not of the worker. Nothing happens under a stale fence.
 * Returns the problem to report.
 */
export function completeOverBudget(ctx: CommitContext, task: { hash: string; fence: string }, r: TaskResult): string {
  const manifest = canonicalManifest({ worker: "budget", staging_id: "", hashes: [], num_generated: 0 });
  if (ctx.leases.beginCommit(task.hash, task.fence, manifest, ctx.wallNow())) {
    ctx.leases.complete(task.hash, task.fence, ctx.wallNow());
  }
  const b = r.budget;
  return `task ${task.hash.slice(0, 12)}: ${r.failure}${b ? ` (${b.resource}: ${b.observed} > ${b.limit})` : ""}; it is completed without children`;
}

/**
 * Redoes every commit that passed its fence but did not finish (a crashed master's): promotes
 * the manifest's children from the stage if it is still there (else they must be public already)
 * and completes the task. `onReplayed(children, id)` follows each completed one. Returns how many.
 */
export function replayCommits(ctx: CommitContext, staging: StagingArea | ((fence: string) => StagingArea), onReplayed: (children: string[], id: string) => void): number {
  let n = 0;
  for (const c of ctx.leases.recoverCommitting()) {
    let stage: OpenStage | null = null;
    // A share taken over: the stage is in the staging area of the master that issued the fence.
    const area = typeof staging === "function" ? staging(c.fence) : staging;
    try {
      stage = c.commit.staging_id === "" ? null : area.open(c.commit.worker, c.commit.staging_id);
    } catch (err) {
      // Gone (promoted, then removed) or refused (a symlink): only public children can complete it.
      if (!(err instanceof FileProblem)) throw err;
    }
    try {
      const r = ctx.leases.replayCommit(
        c.id,
        c.fence,
        (m) => promoteChildren(stage?.dir ?? null, ctx.corpusDir, m.hashes, { maxBytes: ctx.maxInputBytes }),
        ctx.wallNow(),
      );
      if (r === "completed") {
        n++;
        stage?.remove();
        onReplayed(c.commit.hashes, c.id);
      }
    } finally {
      stage?.close();
    }
  }
  return n;
}
