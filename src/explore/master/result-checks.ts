// The strict checks of a result against the task it answers (concolic-spec §7.4), before its
// stage is even opened: the fence, the worker's own report, the echoed input hash, the counts and
// the budgets. Pure: the stage's contents are verified afterwards (state/staging.ts verifyStage).
import { printable } from "../../core/log-lines.ts";
import { HEX64 } from "../../core/message-checks.ts";
import type { ResultFrame } from "../../net/messages.ts";
import type { Budgets } from "../defaults.ts";
import { STAGE_ID_RE } from "../state/corpus.ts";
import { findingProblem } from "../state/findings.ts";

/** Why `r` cannot be committed for the task (hash, fence) it names, or null. */
export function resultProblem(task: { hash: string; fence: string }, r: ResultFrame & { finding?: unknown }, budgets: Budgets): string | null {
  if (r.fence !== task.fence) return "the fence does not match the task's";
  if (r.protocol_error !== "") return `the worker reported ${r.protocol_error}${r.detail ? `: ${printable(r.detail, { max: 500 })}` : ""}`;
  if (r.input_hash !== task.hash) return `input hash ${r.input_hash ?? "(none)"} is not the assigned ${task.hash}`;
  if (r.new_hashes.length > budgets.maxChildren) return `${r.new_hashes.length} children exceed the budget of ${budgets.maxChildren}`;
  if (r.num_generated !== r.new_hashes.length) return `num_generated ${r.num_generated} differs from the ${r.new_hashes.length} hashes reported`;
  if (r.new_hashes.length === 0 && (r.staging_id !== "" || r.staged_bytes !== 0)) return "a stage without children";
  if (r.new_hashes.length > 0 && !STAGE_ID_RE.test(r.staging_id)) return "children without a stage id";
  if (r.staged_bytes > budgets.maxResultBytes) return `${r.staged_bytes} staged bytes exceed the budget of ${budgets.maxResultBytes}`;
  if (!r.new_hashes.every((h) => HEX64.test(h))) return "a child hash is not 64 lowercase hex";
  if (r.finding !== undefined && r.finding !== null) {
    const bad = findingProblem(r.finding);
    if (bad !== null) return bad;
  }
  return null;
}
