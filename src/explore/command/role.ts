// What the three roles of an explore master have in common, and what the command (run.ts) asks of
// each: the role object is where single, root and participant differ; the command's steps are the
// same for all three.
//
//   before the campaign   campaignToken (a submaster waits for the root's) -> lock, export and
//                         temps if it ownsCampaign -> servingToken -> place (its epoch and rank)
//   while it runs         startEnding (its network side, if any, and how it decides the end);
//                         peers (for the dashboard)
//   at the end            finish (statistics exchanged, printed or reported; the exit code)
import { resolve } from "node:path";
import type { Problem } from "../../core/problems.ts";
import type { Connection } from "../../net/connection.ts";
import type { FoundToken } from "../../net/token.ts";
import type { Budgets } from "../defaults.ts";
import type { EndReason, Ending } from "../fleet/endings.ts";
import type { ListenOptions } from "../fleet/listen.ts";
import type { CampaignSetup, RootHub } from "../fleet/peers.ts";
import type { Inbox } from "../fleet/stats-round.ts";
import type { ExploreWorkerProtocol } from "../fleet/worker-protocol.ts";
import type { ExploreMaster } from "../master/master.ts";
import type { LeaseTable } from "../state/lease-table.ts";
import type { MasterLoop } from "./master-loop.ts";
import type { ExploreOptions } from "./options.ts";

/** Where this master stands in the campaign once its epoch is known. */
export interface Place {
  epoch: string;
  rank: number;
  ranks: number[];
}

/** Frames that belong to the end-of-campaign rounds, collected while the loop still runs. */
export interface EndRounds {
  inbox: Inbox;
  /** Why the link to the root was lost (a submaster), once it was. */
  lost: string | null;
}

/** What the command closes in the end, however the campaign ends: set as soon as each exists. */
export interface Links {
  hub: RootHub | null;
  remote: ExploreWorkerProtocol | null;
  rootLink: Connection | null;
}

/** One master, started: everything a role needs to start its ending. */
export interface StartedMaster {
  options: ExploreOptions;
  budgets: Budgets;
  master: ExploreMaster;
  loop: MasterLoop;
  /** The campaign token (null: a single master without --port). */
  found: FoundToken | null;
  nonce: { path: string; value: string };
  setup: CampaignSetup;
  epoch: string;
  /** The campaign's work directory (the epoch's hidden state). */
  workDir: string;
  rank: number;
  /** Every rank of the campaign. */
  ranks: number[];
  graceMs: number;
  leaseTtlMs: number;
  now: () => number;
  log: (line: string) => void;
  write: (line: string) => void;
  rounds: EndRounds;
}

/** How the loop ended, and what it left to report. */
export interface Ended {
  started: StartedMaster;
  end: EndReason;
  elapsed: number;
  problems: Problem[];
  late: number;
  workDir: string;
  corpusDir: string;
  /** Findings recorded (fleet-wide) during this session on inputs never recorded before. */
  newFindings: number;
  /** Inputs exported to the AFL++ sync directory (null: no --afl-sync). */
  exported: number | null;
  leases: LeaseTable;
  /** Masters of the campaign. */
  masters: number;
}

/** What a role is given to find its place: the campaign token, the setup, the state directory. */
export interface PlaceContext {
  token: FoundToken | null;
  setup: CampaignSetup;
  state: string;
  /** The monotonic ms the join's wait began (a submaster's token wait counts against it). */
  joinWaitStart: number;
  now: () => number;
  /** A submaster's link to the root is set here as soon as it exists (closed in the end however the campaign ends). */
  links: Links;
  write: (line: string) => void;
}

export interface MasterRole {
  readonly kind: "single" | "root" | "participant";
  /**
   * Whether this master owns the campaign state: it holds the campaign lock, clears the
   * publication temps, exports to AFL++ and removes the hidden state after a clean end (a
   * submaster borrows the root's).
   */
  readonly ownsCampaign: boolean;
  /** The campaign token needed before anything else starts (a submaster waits for the root's), or null. */
  campaignToken(t: { flag: string | undefined; file?: string; state: string; signal: AbortSignal; write: (line: string) => void }): Promise<FoundToken | null>;
  /** A token of its own to serve with, kept in the state directory (null: none; a submaster serves with the root's). */
  servingToken(state: string): FoundToken | null;
  /** Its epoch, rank and the campaign's ranks: a new or resumed epoch, or the root's. */
  place(c: PlaceContext): Promise<Place>;
  /** The prefix of its log lines. */
  tag(rank: number): string;
  /** Starts its network side (if any) and returns how it decides the end. */
  startEnding(m: StartedMaster, links: Links): Promise<Ending>;
  /** The other masters it is linked with, for the dashboard. */
  peers(links: Links): { rank: number; host: string | null; lost: boolean }[];
  /**
   * The end: the statistics (reported to the root, or exchanged and printed), what is left to say,
   * and the exit code. `removeState` removes the hidden state of a clean end.
   */
  finish(e: Ended, links: Links, removeState: () => void): Promise<number>;
}

/**
 * Serves this master's remote workers on --port (and, on the root, its submasters), or at `at`
 * (a submaster without --port that took over the root's role listens on a port of its own).
 */
export async function serveWorkers(m: StartedMaster, onPeer: ListenOptions["onPeer"], at?: { bind: string; port: number }): Promise<{ remote: ExploreWorkerProtocol; port: number }> {
  const { serveWorkers: serve } = await import("../fleet/listen.ts");
  const { options: o, budgets } = m;
  return serve({
    master: m.master,
    found: m.found!,
    nonce: m.nonce,
    setup: {
      corpusDir: resolve(o.corpusDir),
      target: o.target,
      targetCwd: process.cwd(),
      targetBuild: m.master.target.build,
      targetFiles: o.targetFiles ?? [],
      simulate: o.simulate,
      budgets,
    },
    leaseTtlMs: m.leaseTtlMs,
    bind: at?.bind ?? o.bind,
    port: at?.port ?? o.port!,
    now: m.now,
    log: m.log,
    onProgress: () => m.loop.wake(),
    onPeer,
  });
}
