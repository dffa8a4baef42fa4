// A lone master (no --masters, no --join): it owns the campaign, ends after the precise idle
// window, serves remote workers with --port (and only then loads the network side), and prints
// the final statistics itself.
import { serverToken, type FoundToken } from "../../net/token.ts";
import { IdleWindow, type Ending } from "../fleet/endings.ts";
import { openEpoch } from "../state/work-dir.ts";
import { closeCampaign, ownExecutors } from "./campaign-end.ts";
import type { ExploreOptions } from "./options.ts";
import { serveWorkers, type Ended, type Links, type MasterRole, type Place, type PlaceContext, type StartedMaster } from "./role.ts";
import { computeStats } from "./stats.ts";

export class SingleMaster implements MasterRole {
  readonly kind = "single" as const;
  readonly ownsCampaign = true;

  constructor(private readonly o: ExploreOptions) {}

  async campaignToken(): Promise<FoundToken | null> {
    return null;
  }

  servingToken(state: string): FoundToken | null {
    return this.o.port === null ? null : serverToken({ flag: this.o.token, file: this.o.tokenFile, outDir: state });
  }

  async place(c: PlaceContext): Promise<Place> {
    return { epoch: openEpoch(c.state, this.o.resumeEpoch), rank: 0, ranks: [0] };
  }

  tag(): string {
    return "[explore]";
  }

  async startEnding(m: StartedMaster, links: Links): Promise<Ending> {
    if (this.o.port !== null) links.remote = (await serveWorkers(m, null)).remote;
    return new IdleWindow(m.master, this.o.maxIdleSeconds * 1000, m.log, this.o.follow ?? false);
  }

  peers(): { rank: number; host: string | null; lost: boolean }[] {
    return [];
  }

  async finish(e: Ended, links: Links, removeState: () => void): Promise<number> {
    const stats = computeStats({ leases: e.leases, master: e.started.master, corpusDir: e.corpusDir, elapsedSeconds: e.elapsed, executors: ownExecutors(e, links) });
    return closeCampaign(e, stats, { role: "single", removeState, release: () => {} });
  }
}
