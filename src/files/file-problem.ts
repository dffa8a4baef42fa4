// FileProblem: a file or directory that someone else wrote (a generator, a target, a worker, an
// input producer) cannot be used as it is. It is an answer about untrusted content, never about
// fuzzfleet's own state, so callers turn it into a refused result, a malformed entry or a skipped
// input instead of a failed command.
import { RuntimeFailure } from "../errors.ts";

export type ReadProblem =
  | "missing"
  | "symlink"
  | "not-regular"
  | "not-directory"
  | "changed"
  | "too-large"
  | "too-deep"
  | "unreadable";

export class FileProblem extends RuntimeFailure {
  readonly problem: ReadProblem;
  readonly path: string;
  readonly observed?: number;
  readonly limit?: number;
  /** The problem without the path ("a symbolic link to 'x'; …"), for a line that names the file already. */
  readonly detail: string;
  constructor(
    problem: ReadProblem,
    path: string,
    message: string,
    extra?: { observed?: number; limit?: number; cause?: unknown; detail?: string },
  ) {
    super(message, extra?.cause === undefined ? undefined : { cause: extra.cause });
    this.problem = problem;
    this.path = path;
    this.detail = extra?.detail ?? message;
    if (extra?.observed !== undefined) this.observed = extra.observed;
    if (extra?.limit !== undefined) this.limit = extra.limit;
  }
}
