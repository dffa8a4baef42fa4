// How an explore campaign's end is said: the words of its `ended:` line (and of --stats-json's
// `ended`), and its exit code (docs/exit-codes.md). The exit code is decided in one place, by
// precedence:
//
//   a submaster's final rendezvous timed out            71
//   problems (invalid results, lost master, …)          70
//   new crashes or hangs, with --fail-on-findings        1
//   the wall budget ran out                              5
//   interrupted by a signal                              6
//   the frontier was exhausted                           0
//
// Problems come first because they make every count suspect; new findings come before how the
// campaign ended because, as for `run`, a script alerting on 1 must see them even in a campaign
// cut short.
import { EXIT } from "../../exit-codes.ts";
import type { EndReason } from "../fleet/endings.ts";

/** How a campaign ended, in the words of its output and of --stats-json's `ended`. */
export const ENDED: Record<EndReason, string> = {
  idle: "frontier exhausted",
  quiescence: "frontier exhausted (every master agreed)",
  "wall budget": "wall budget reached",
  interrupted: "interrupted",
  "no usable executor": "no usable executor",
  conflict: "quiescence conflict",
  "master lost": "a master was lost",
};

/** The frontier was exhausted: the only ends after which the hidden state may be removed. */
export function exhausted(end: EndReason): boolean {
  return end === "idle" || end === "quiescence";
}

export interface Outcome {
  end: EndReason;
  /** Problems that make the campaign incomplete. */
  problems: number;
  /** Inputs that crashed or hung the target and were never recorded before this session. */
  newFindings: number;
  /** --fail-on-findings: new findings exit 1. */
  failOnFindings: boolean;
  /** A submaster whose final rendezvous timed out. */
  rendezvousTimedOut?: boolean;
}

export function exitCodeOf(o: Outcome): number {
  if (o.rendezvousTimedOut) return EXIT.rendezvousTimeout;
  if (o.problems > 0) return EXIT.lifecycle;
  if (o.failOnFindings && o.newFindings > 0) return EXIT.newFailures;
  if (o.end === "wall budget") return EXIT.budgetReached;
  if (o.end === "interrupted") return EXIT.interrupted;
  // Every other end without a problem is an exhausted frontier (the rest always bring one).
  return exhausted(o.end) ? EXIT.ok : EXIT.lifecycle;
}
