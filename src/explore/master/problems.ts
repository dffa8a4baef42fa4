// What goes wrong during one master's campaign, kept for the end: the problems that make the
// campaign end non-zero (in order), the executors quarantined for an invalid result (one log line
// each, the first reason kept), and their counters. Only the master reports into it.
import { printable } from "../../core/log-lines.ts";
import { problem, type Problem } from "../../core/problems.ts";
import type { MasterCounters } from "./counters.ts";

export class MasterProblems {
  /** Problems that make the campaign end non-zero (integrity, invalid results…), in order. */
  readonly list: Problem[] = [];
  /** Executors that sent an invalid result, and why: they get no more tasks. */
  readonly quarantined = new Map<string, string>();

  constructor(
    private readonly counters: MasterCounters,
    private readonly log: (line: string) => void,
  ) {}

  /** `executor` sent a result that cannot be taken: counted, and the executor is quarantined. */
  invalid(executor: string, why: string): void {
    this.counters.invalidResults++;
    this.list.push(problem("invalid-result", `invalid result from ${executor}: ${why}`));
    if (!this.quarantined.has(executor)) {
      this.quarantined.set(executor, why);
      this.log(`executor ${executor} quarantined: ${printable(why)}`);
    }
  }

  /** Content is not what its name says. */
  integrity(message: string): void {
    this.counters.integrityErrors++;
    this.list.push(problem("integrity", message));
    this.log(message);
  }

  /** A failure of the master's own work (a store it cannot write, a commit it cannot finish). */
  problem(message: string): void {
    this.list.push(problem("master", message));
    this.log(message);
  }
}
