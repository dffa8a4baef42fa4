// The one table from error codes to process exit codes (docs/exit-codes.md documents it).
import type { ErrorCode } from "../errors.ts";

export const EXIT = {
  ok: 0,
  /** `run`/`coordinate` recorded at least one newly distinct failure (cron alerts on it). */
  newFailures: 1,
  usage: 2,
  refused: 3,
  runtime: 4,
  /** explore: the lifecycle did not complete (invalid results, unacknowledged stop, control failure). */
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
  runtime: EXIT.runtime,
};

export function exitCodeFor(code: ErrorCode): number {
  return BY_CODE[code];
}
