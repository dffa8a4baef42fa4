// The explore defaults, in one place for the command line (its --help shows them) and for callers
// of explore() that leave an option out (the demo). Loads nothing: the CLI reads it at start-up.

/** The per-run budgets (concolic-spec §8): children and their bytes per execution, bytes per input. */
export interface Budgets {
  /** Children one execution may produce. */
  maxChildren: number;
  /** Total bytes of one execution's children, duplicates counted. */
  maxResultBytes: number;
  /** Bytes of one corpus object. */
  maxInputBytes: number;
}

export const DEFAULT_BUDGETS: Budgets = Object.freeze({
  maxChildren: 4096,
  maxResultBytes: 256 * 1024 * 1024,
  maxInputBytes: 256 * 1024 * 1024,
});

/** How long the root waits for every master to join, and a submaster for the roster. */
export const DEFAULT_JOIN_TIMEOUT_SECONDS = 120;

/** How long a submaster waits for the root's final release. */
export const DEFAULT_FINALIZE_SECONDS = 30;
