// An explore task and what running it reports, in the campaign's own words: what the master hands
// to an executor, what the executor (a local slot, or a remote worker's runner) gives back, and
// what the master checks and commits. The worker wire carries both as frames (net/messages.ts);
// fleet/task-frames.ts translates at that edge, so the master, the executor and the local slots
// never see a frame, and a change of the wire stays in the codec and its tests.

/** One input to run: a corpus object under the lease this master holds on it. */
export interface Task {
  /** The master's id for this dispatch, never reused within a campaign. */
  id: number;
  /** The input's content hash (SHA-256, lowercase hex): its name in the corpus. */
  hash: string;
  /** The lease token the task was dispatched under; its result names it again. */
  fence: string;
  timeoutSeconds: number;
}

/** Why a run has no usable outcome, as its executor saw it. */
export type TaskFailure = "input-copy-error" | "input-budget-exceeded" | "result-budget-exceeded" | "execution-error" | "corpus-publication" | "interrupted";

/** A per-run budget the run went over (the failure says which kind). */
export interface BudgetOverrun {
  resource: string;
  observed: number;
  limit: number;
}

export type FindingKind = "crash" | "hang";

/**
 * What an executor reports about a run that crashed or hung (validated by the master). The field
 * names are those of a finding record (state/findings.ts), which keeps them on disk.
 */
export interface RunFinding {
  kind: FindingKind;
  /** The signal number that ended the target (crash), else null. */
  signal: number | null;
  /** The exit code of a sanitizer's error exit, else null. */
  exit_code: number | null;
  /** The last TAIL_BYTES (state/findings.ts) bytes of the run's output (stdout and stderr), as UTF-8 (invalid bytes replaced). */
  stderr_tail: string;
}

/**
 * What running a task produced. An executor is not trusted: the master checks every field against
 * the task and the budgets (master/result-checks.ts) before it opens the stage.
 */
export interface TaskResult {
  taskId: number;
  fence: string;
  /** SHA-256 of the bytes the executor actually ran (hashed while copying); null when none were copied. */
  inputHash: string | null;
  /** One hash per child file the run left, duplicates included. */
  children: string[];
  /** How many children the executor counted (children.length, from an honest one). */
  generated: number;
  /** Bytes of the staged children, duplicates counted. */
  stagedBytes: number;
  /** The stage holding the children: 32 lowercase hex, "" when there are none. */
  stagingId: string;
  /** The target's exit code; -1 when it ended without one (a signal, the timeout); null when it never ran. */
  retcode: number | null;
  seconds: number;
  /** null when the run completed and its children (if any) are staged. */
  failure: TaskFailure | null;
  budget: BudgetOverrun | null;
  detail: string | null;
  /** Set when the run crashed or hung the target; the master records it once the task commits. */
  finding: RunFinding | null;
}
