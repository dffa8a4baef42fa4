// What one master counts during a campaign: its share of the final statistics and the
// diagnostics that explain them (stale, invalid, recovered…). Only the master changes them.

export interface MasterCounters {
  /** Results whose commit this master won. */
  observations: number;
  generated: number;
  /** Tasks recovered from expired leases (any master's). */
  recovered: number;
  replayedCommits: number;
  /** Results refused: bad fields, failed stage verification, wrong input hash, unowned. */
  invalidResults: number;
  /** Results under a fence that is no longer current. */
  staleResults: number;
  requeued: number;
  lostLeases: number;
  budgetErrors: number;
  integrityErrors: number;
  /** External inputs dropped into the input directory after this master froze discovery. */
  lateInputs: number;
  /** Input entries refused because they are symlinks or special files (each name counted once), and input directory replacements. */
  refusedInputs: number;
  /** Input files that were symbolic links: never followed, counted and reported. */
  symlinkedInputs: number;
  /** Generated children this master claimed first (new to the campaign). */
  claimedChildren: number;
  /** Content completed by an earlier campaign on this corpus, passed over (unique hashes). */
  skippedExplored: number;
}

export function noCounts(): MasterCounters {
  return {
    observations: 0,
    generated: 0,
    recovered: 0,
    replayedCommits: 0,
    invalidResults: 0,
    staleResults: 0,
    requeued: 0,
    lostLeases: 0,
    budgetErrors: 0,
    integrityErrors: 0,
    lateInputs: 0,
    refusedInputs: 0,
    symlinkedInputs: 0,
    claimedChildren: 0,
    skippedExplored: 0,
  };
}
