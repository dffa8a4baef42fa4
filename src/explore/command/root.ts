// The root master, rank 0 of --masters N (needs --port): it owns the campaign, accepts the
// submasters on its port beside its workers, waits (bounded) until all joined, sends the roster,
// leads the two-phase quiescence, gathers every master's counts for the final statistics, and
// releases the submasters once the shared state is settled.
import { serverToken, type FoundToken } from "../../net/token.ts";
import { DEFAULT_JOIN_TIMEOUT_SECONDS } from "../defaults.ts";
import { RootEnding, type Ending } from "../fleet/endings.ts";
import type { RootHub } from "../fleet/peers.ts";
import { openEpoch } from "../state/work-dir.ts";
import { closeCampaign, ownExecutors } from "./campaign-end.ts";
import type { ExploreOptions } from "./options.ts";
import { serveWorkers, type Ended, type Links, type MasterRole, type Place, type PlaceContext, type StartedMaster } from "./role.ts";
import { computeStats } from "./stats.ts";

export class RootMaster implements MasterRole {
  readonly kind = "root" as const;
  readonly ownsCampaign = true;

  constructor(
    private readonly o: ExploreOptions,
    private readonly masters: number,
  ) {}

  async campaignToken(): Promise<FoundToken | null> {
    return null;
  }

  servingToken(state: string): FoundToken {
    return serverToken({ flag: this.o.token, file: this.o.tokenFile, outDir: state });
  }

  async place(c: PlaceContext): Promise<Place> {
    return { epoch: openEpoch(c.state, this.o.resumeEpoch), rank: 0, ranks: Array.from({ length: this.masters }, (_, i) => i) };
  }

  tag(rank: number): string {
    return `[explore r${rank}]`;
  }

  async startEnding(m: StartedMaster, links: Links): Promise<Ending> {
    let ending: RootEnding | null = null;
    const { RootHub } = await import("../fleet/peers.ts");
    const hub = new RootHub({
      token: m.found!.token,
      masters: this.masters,
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
    const { remote, port } = await serveWorkers(m, (conn, hello) => hub.accept(conn, hello));
    links.remote = remote;
    m.write(`  waiting for ${this.masters - 1} more master(s): fuzzfleet explore … --join <this host>:${port}${joinTokenHint(m.found!)}`);
    await hub.start((this.o.joinTimeoutSeconds ?? DEFAULT_JOIN_TIMEOUT_SECONDS) * 1000);
    ending = new RootEnding({ master: m.master, hub, maxIdleMs: this.o.maxIdleSeconds * 1000, follow: this.o.follow ?? false, now: m.now, log: m.log });
    return ending;
  }

  peers(links: Links): { rank: number; host: string | null; lost: boolean }[] {
    return links.hub ? links.hub.peers.map((p) => ({ rank: p.rank, host: p.host, lost: p.conn.closed })) : [];
  }

  /** The statistics exchange first (its problems join the campaign's): the fleet's counts and executors. */
  async finish(e: Ended, links: Links, removeState: () => void): Promise<number> {
    return leadFinish(e, links, links.hub!, 0, removeState);
  }
}

/**
 * How the master that leads the campaign ends it (the root, or the master that took over its role
 * when it was lost): the statistics exchange with every master on its hub (its problems join the
 * campaign's), the fleet's counts and executors printed, and the submasters released.
 */
export async function leadFinish(e: Ended, links: Links, hub: RootHub, rank: number, removeState: () => void): Promise<number> {
  const { master, graceMs, now, log, rounds } = e.started;
  const own = ownExecutors(e, links);
  const { rootStats } = await import("../fleet/stats-round.ts");
  const r = await rootStats({ hub, rank, master, late: e.late, graceMs, inbox: rounds.inbox, now, log, executors: { local_slots: own.local, remote_workers: own.remote } });
  e.problems.push(...r.problems);
  const stats = computeStats({
    leases: e.leases,
    master,
    corpusDir: e.corpusDir,
    elapsedSeconds: e.elapsed,
    // The fleet's executors: every slot and worker of every master that reported.
    executors: { local: r.executors.local_slots, remote: r.executors.remote_workers },
    masters: e.masters,
    exchanged: { ...r.totals, byMaster: r.byMaster },
  });
  return closeCampaign(e, stats, { role: "root", rank, removeState, release: () => hub.broadcast({ type: "release", token: e.started.epoch }) });
}
