// The three roles of an explore master and how each one starts its ending:
//
//   single       one master (no --masters, no --join): ends after the precise idle window; serves
//                remote workers with --port
//   root         rank 0 of --masters N (needs --port): accepts the submasters on its port, waits
//                (bounded) until all joined, sends the roster, leads the two-phase quiescence
//   participant  a submaster (--join ROOT:PORT): joins the root's epoch, votes in the quiescence,
//                serves its own workers with --port
//
// The network side (the worker server, the masters' channel, the statistics round) is loaded only
// by a master that serves workers or has peers: a lone master starts faster without it.
import { resolve } from "node:path";
import { RuntimeFailure, UsageError } from "../../errors.ts";
import type { Connection } from "../../net/connection.ts";
import { awaitToken, type FoundToken } from "../../net/token.ts";
import { DEFAULT_JOIN_TIMEOUT_SECONDS, type Budgets } from "../defaults.ts";
import { IdleWindow, ParticipantEnding, RootEnding, type Ending } from "../fleet/endings.ts";
import type { CampaignSetup, JoinedRoot, RootHub } from "../fleet/peers.ts";
import type { ExploreWorkerProtocol } from "../fleet/worker-protocol.ts";
import type { Inbox } from "../fleet/stats-round.ts";
import type { ListenOptions } from "../fleet/listen.ts";
import type { ExploreMaster } from "../master/master.ts";
import { epochVisible, workDir } from "../state/work-dir.ts";
import type { MasterLoop } from "./master-loop.ts";
import type { ExploreOptions } from "./run.ts";

/**
 * The environment variable by which a launched submaster (fuzzfleet launch) asks the root for its
 * launcher rank; unset, the root gives the next free rank in join order.
 */
export const MASTER_RANK_ENV = "FUZZFLEET_MASTER_RANK";

/** The rank this submaster asks for, from MASTER_RANK_ENV: null when unset, refused when not a rank. */
export function requestedRank(env: NodeJS.ProcessEnv = process.env): number | null {
  const raw = env[MASTER_RANK_ENV];
  if (raw === undefined) return null;
  const n = Number(raw.trim());
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(`${MASTER_RANK_ENV} wants a submaster rank, an integer >= 1 (got '${raw}'); unset it to take the next free rank`);
  }
  return n;
}

/** How long a submaster waits for the root's token file and then the root, together. */
export const JOIN_WAIT_SECONDS = 60;

export type Role = { kind: "single" } | { kind: "root"; masters: number } | { kind: "participant"; join: { host: string; port: number } };

export function roleOf(o: { join?: { host: string; port: number } | null; masters?: number; port: number | null }): Role {
  const role: Role = o.join ? { kind: "participant", join: o.join } : (o.masters ?? 1) > 1 ? { kind: "root", masters: o.masters! } : { kind: "single" };
  if (role.kind === "root" && o.port === null) throw new UsageError("--masters needs --port: the other masters join the root on that port");
  return role;
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
  rank: number;
  graceMs: number;
  leaseTtlMs: number;
  now: () => number;
  log: (line: string) => void;
  write: (line: string) => void;
  rounds: EndRounds;
}

/**
 * A submaster takes the root's token from the shared state directory, waiting for it if the root
 * is not up yet; it checks the root's host name first, which no wait could fix.
 */
export async function rootToken(
  role: Extract<Role, { kind: "participant" }>,
  t: { flag: string | undefined; state: string; signal: AbortSignal; write: (line: string) => void },
): Promise<FoundToken> {
  const { checkHostName } = await import("../../net/dial-wait.ts");
  await checkHostName(role.join.host, role.join.port);
  const found = await awaitToken(
    { flag: t.flag, outDir: t.state },
    { waitSeconds: JOIN_WAIT_SECONDS, signal: t.signal, log: t.write, creator: "the root master", fix: "start the root master with the same -o, or pass --token or FUZZFLEET_TOKEN" },
  );
  if (!found) throw new RuntimeFailure("interrupted while waiting for the campaign token");
  return found;
}

/** A submaster joins the root: its rank, the ranks, and the root's epoch, which must be visible here. */
export async function joinRootEpoch(
  role: Extract<Role, { kind: "participant" }>,
  j: { token: string; setup: CampaignSetup; state: string; waitSeconds: number; options: ExploreOptions; write: (line: string) => void },
): Promise<JoinedRoot> {
  const rank = requestedRank();
  j.write(`fuzzfleet explore: joining the root master at ${role.join.host}:${role.join.port}${rank !== null ? ` as rank ${rank}` : ""}`);
  const { joinRoot } = await import("../fleet/peers.ts");
  const joined = await joinRoot({
    ...role.join,
    token: j.token,
    setup: j.setup,
    waitSeconds: Math.max(0, j.waitSeconds),
    joinTimeoutMs: (j.options.joinTimeoutSeconds ?? DEFAULT_JOIN_TIMEOUT_SECONDS) * 1000,
    signal: j.options.signal,
    log: j.write,
    rank,
  });
  if (!epochVisible(j.state, joined.epoch)) {
    joined.conn.destroy();
    throw new RuntimeFailure(`the root's campaign state ${workDir(j.state, joined.epoch)} is not visible here: every master must mount the corpus directory at the same path`);
  }
  return joined;
}

/** Starts the role's network side (if any) and returns its ending. */
export async function startEnding(role: Role, m: StartedMaster, links: Links): Promise<Ending> {
  if (role.kind === "root") return startRoot(role.masters, m, links);
  if (m.options.port !== null) links.remote = (await serve(m, null)).remote;
  if (role.kind === "single") return new IdleWindow(m.master, m.options.maxIdleSeconds * 1000, m.log, m.options.follow ?? false);
  const p = new ParticipantEnding(m.master, links.rootLink!, m.rank, m.log);
  const { readRoot } = await import("../fleet/peers.ts");
  void readRoot(
    links.rootLink!,
    m.graceMs,
    (f) => {
      if (f.type === "stats_ack" || f.type === "release") m.rounds.inbox.push({ rank: 0, frame: f });
      else p.onFrame(f);
    },
    (why) => {
      m.rounds.lost = why;
      p.onLost(why);
    },
  );
  return p;
}

async function startRoot(masters: number, m: StartedMaster, links: Links): Promise<Ending> {
  let ending: RootEnding | null = null;
  const { RootHub } = await import("../fleet/peers.ts");
  const hub = new RootHub({
    token: m.found!.token,
    masters,
    setup: m.setup,
    nonce: m.nonce,
    epoch: m.epoch,
    graceMs: m.graceMs,
    log: m.log,
    onFrame: (peer, f) => {
      if (f.type === "stats") m.rounds.inbox.push({ rank: peer.rank, frame: f });
      else ending?.onFrame(peer, f);
    },
    onLost: (peer, why) => (ending ? ending.onLost(peer, why) : m.log(`master rank ${peer.rank} was lost before the campaign started: ${why}`)),
  });
  links.hub = hub;
  const { joinTokenHint } = await import("../fleet/listen.ts");
  const { remote, port } = await serve(m, (conn, hello) => hub.accept(conn, hello));
  links.remote = remote;
  m.write(`  waiting for ${masters - 1} more master(s): fuzzfleet explore … --join <this host>:${port}${joinTokenHint(m.found!)}`);
  await hub.start((m.options.joinTimeoutSeconds ?? DEFAULT_JOIN_TIMEOUT_SECONDS) * 1000);
  ending = new RootEnding({ master: m.master, hub, maxIdleMs: m.options.maxIdleSeconds * 1000, follow: m.options.follow ?? false, now: m.now, log: m.log });
  return ending;
}

async function serve(m: StartedMaster, onPeer: ListenOptions["onPeer"]): Promise<{ remote: ExploreWorkerProtocol; port: number }> {
  const { serveWorkers } = await import("../fleet/listen.ts");
  const { options: o, budgets } = m;
  return serveWorkers({
    master: m.master,
    found: m.found!,
    nonce: m.nonce,
    setup: { corpusDir: resolve(o.corpusDir), target: o.target, targetCwd: process.cwd(), simulate: o.simulate, budgets },
    leaseTtlMs: m.leaseTtlMs,
    bind: o.bind,
    port: o.port!,
    now: m.now,
    log: m.log,
    onProgress: () => m.loop.wake(),
    onPeer,
  });
}
