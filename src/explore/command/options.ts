// The options of the `explore` command, as the command line (cli/explore-command.ts) and the demo
// hand them over: read by the command's start (run.ts), its roles and its banner.
import type { UiAddress } from "../../ui/address.ts";
import type { DashboardSnapshot } from "../../ui/source.ts";
import type { Budgets } from "../defaults.ts";
import type { Ownership } from "../master/options.ts";

export interface ExploreOptions {
  /** One input directory, or several (`-i a -i b`): all admitted. */
  inputDir: string | readonly string[];
  corpusDir: string;
  target: string[];
  /** --target-file: files hashed into the target's identity beside its executable (a SymCC runtime, a config). */
  targetFiles?: readonly string[];
  slots: number;
  timeoutSeconds: number;
  maxIdleSeconds: number;
  wallTimeoutSeconds: number;
  simulate: boolean;
  port: number | null;
  bind: string | null;
  token: string | undefined;
  /** --token-file: the token is read from this file, never created or removed by the campaign. */
  tokenFile?: string;
  statsJson: string | null;
  resumeEpoch: string | null;
  leaseTtlSeconds: number | null;
  budgets?: Budgets;
  ownership?: Ownership;
  /** Several masters: the root's total (--masters N, with --port). */
  masters?: number;
  /** A submaster: the root's address (--join). */
  join?: { host: string; port: number } | null;
  /** Lost-master and shutdown grace (seconds); default max(120, 4 x timeout). */
  graceSeconds?: number | null;
  /** How long remote workers have to acknowledge the stop (seconds); default DEFAULT_STOP_GRACE_SECONDS. */
  stopGraceSeconds?: number;
  /** Run content that earlier campaigns on this corpus already explored again (their ledgers are ignored). */
  fresh?: boolean;
  /** How long the root waits for every master to join, and a submaster for the roster. */
  joinTimeoutSeconds?: number;
  /** Bound of the final rendezvous (seconds). */
  finalizeSeconds?: number;
  /** Which lease-record writes are fsynced (see LeaseTable): default "fence". */
  durability?: "fence" | "all";
  /** Keep following the inputs: an idle frontier never ends the campaign (--follow). */
  follow?: boolean;
  /** The mode of corpus files this process creates (--corpus-mode); default 0600. */
  corpusMode?: number | null;
  /** Export new inputs into this AFL++ sync directory (--afl-sync). */
  aflSync?: string | null;
  /** New crashes or hangs make the exit code 1 (--fail-on-findings). */
  failOnFindings?: boolean;
  write?: (line: string) => void;
  /** --ui: serve the live dashboard and /metrics there. */
  ui?: UiAddress | null;
  /** The terminal view: given the campaign's snapshot, it takes every line written from then on until it is closed. */
  view?: ((snapshot: () => DashboardSnapshot) => { line(text: string): void; close(): void }) | null;
  signal: AbortSignal;
}
