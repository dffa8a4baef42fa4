// The one table from error codes to process exit codes (docs/exit-codes.md documents it).
import type { ErrorCode } from "./errors.ts";

export const EXIT = {
  ok: 0,
  /**
   * `run`/`coordinate` recorded at least one newly distinct or reopened failure (cron alerts on it);
   * `explore --fail-on-findings`: the campaign recorded a crash or hang on an input never recorded before.
   */
  newFailures: 1,
  usage: 2,
  refused: 3,
  /** Also `run`/`coordinate` when every lane got disabled and nothing new was found: the sweep stopped sweeping. */
  runtime: 4,
  /** explore: the wall budget ran out before the frontier was exhausted (the state is kept for --resume). */
  budgetReached: 5,
  /** explore: stopped by a signal before the frontier was exhausted (the state is kept for --resume). */
  interrupted: 6,
  /**
   * Lifecycle incomplete. `coordinate`: a worker did not acknowledge the stop. `explore`: invalid
   * results, an unacknowledged stop, a control failure.
   */
  lifecycle: 70,
  /** explore: the final rendezvous timed out. */
  rendezvousTimeout: 71,
} as const;

const BY_CODE: Record<ErrorCode, number> = {
  usage: EXIT.usage,
  config: EXIT.usage,
  refused: EXIT.refused,
  store: EXIT.runtime,
  protocol: EXIT.runtime,
  // A lost or silent peer stops the command like any other runtime failure.
  "peer-closed": EXIT.runtime,
  "frame-timeout": EXIT.runtime,
  runtime: EXIT.runtime,
};

export function exitCodeFor(code: ErrorCode): number {
  return BY_CODE[code];
}
