// The strict checks of a result against the task it answers (concolic-spec §7.4), before its
// stage is even opened: the fence, the worker's own report, the echoed input hash, the counts and
// the budgets. Pure: the stage's contents are verified afterwards (state/staging.ts verifyStage).
import { printable } from "../../core/log-lines.ts";
import { HEX64 } from "../../core/message-checks.ts";
import type { Budgets } from "../defaults.ts";
import { STAGE_ID_RE } from "../state/corpus.ts";
import { findingProblem } from "../state/findings.ts";
import type { TaskResult } from "../task.ts";

/** Why `r` cannot be committed for the task (hash, fence) it names, or null. */
export function resultProblem(task: { hash: string; fence: string }, r: TaskResult, budgets: Budgets): string | null {
  if (r.fence !== task.fence) return "the fence does not match the task's";
  if (r.failure !== null) return `the worker reported ${r.failure}${r.detail ? `: ${printable(r.detail, { max: 500 })}` : ""}`;
  if (r.inputHash !== task.hash) return `input hash ${r.inputHash ?? "(none)"} is not the assigned ${task.hash}`;
  if (r.children.length > budgets.maxChildren) return `${r.children.length} children exceed the budget of ${budgets.maxChildren}`;
  if (r.generated !== r.children.length) return `num_generated ${r.generated} differs from the ${r.children.length} hashes reported`;
  if (r.children.length === 0 && (r.stagingId !== "" || r.stagedBytes !== 0)) return "a stage without children";
  if (r.children.length > 0 && !STAGE_ID_RE.test(r.stagingId)) return "children without a stage id";
  if (r.stagedBytes > budgets.maxResultBytes) return `${r.stagedBytes} staged bytes exceed the budget of ${budgets.maxResultBytes}`;
  if (!r.children.every((h) => HEX64.test(h))) return "a child hash is not 64 lowercase hex";
  if (r.finding !== null) {
    const bad = findingProblem(r.finding);
    if (bad !== null) return bad;
  }
  return null;
}
