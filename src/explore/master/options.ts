// What an explore master is made of (master.ts): its corpus, inputs and staging, the lease table
// it claims in, its place among the masters (rank, ranks, ownership), its budgets and clocks, and
// the target build it records results under.
import type { Budgets } from "../defaults.ts";
import type { Redact } from "../../exec/secrets.ts";
import type { LeaseTable } from "../state/lease-table.ts";
import type { TargetIdentity } from "../state/target-identity.ts";

export type Ownership = "rendezvous" | "broadcast";

export interface MasterOptions {
  corpusDir: string;
  /** The input directories (-i, one or several). */
  inputDir: string | readonly string[];
  /** <work>/staging: executor stages live in <stagingRoot>/<executor key>/<staging id>. */
  stagingRoot: string;
  leases: LeaseTable;
  epoch: string;
  rank: number;
  ranks: number[];
  ownership: Ownership;
  budgets: Budgets;
  /** Per-run timeout in seconds, carried by every task. */
  timeoutSeconds: number;
  leaseTtlMs: number;
  /** Wall-clock ms (lease records compare across processes). */
  wallNow: () => number;
  log: (line: string) => void;
  /** Run everything again, content earlier campaigns completed included (default false). */
  fresh?: boolean;
  /** The target build the campaign runs (state/target-identity.ts): what the ledger and findings record. */
  build: string;
  /** What `build` was computed from, for the statistics (default: the build alone is known). */
  targetIdentity?: TargetIdentity;
  /** Hides the campaign's secrets in the output tails of findings (default: nothing hidden). */
  redact?: Redact;
}
