// What keeps a campaign from ending complete (exit 70): one typed value built in one way, whoever
// finds it (a master's checks, a local slot, the endings, the stop of remote workers, the final
// statistics), and rendered once for the console.
export type ProblemKind =
  /** A result broke a budget (bytes, files); its input is completed without children. */
  | "budget"
  /** A result failed its checks; the executor that sent it is quarantined. */
  | "invalid-result"
  /** Shared state disagreed with itself (a record, a stage, the corpus). */
  | "integrity"
  /** A master could not do its own work (read the corpus, promote children, record a finding). */
  | "master"
  /** A local slot or the executors as a whole failed. */
  | "executor"
  /** A master was lost, gave up, or the quiescence protocol met a conflict. */
  | "masters"
  /** A remote worker did not acknowledge the stop. */
  | "shutdown"
  /** The final statistics exchange did not complete. */
  | "statistics";

export interface Problem {
  readonly kind: ProblemKind;
  readonly message: string;
}

export function problem(kind: ProblemKind, message: string): Problem {
  return { kind, message };
}

/** The console lines of a campaign that ended incomplete: a count, then at most `max` problems. */
export function renderProblems(problems: readonly Problem[], max = 20): string[] {
  const lines = [`campaign incomplete (${problems.length} problem(s)):`];
  for (const p of problems.slice(0, max)) lines.push(`  ${p.message}`);
  if (problems.length > max) lines.push(`  … ${problems.length - max} more`);
  return lines;
}
