// The shares a master serves when several masters split the content (a partitioned lease table):
// which hashes it may hold (its own share and those it took over), where a taken-over share's
// stages are, taking over the shares whose lease expired, and renewing the ones it holds. With a
// single master, or under broadcast, every hash is this master's and there is nothing to take.
import { dirname, join } from "node:path";
import { owner as rendezvousOwner } from "../../core/rendezvous.ts";
import type { LeaseTable } from "../state/lease-table.ts";
import { StagingArea } from "../state/staging.ts";
import { sharesServed, takeOverShares } from "./recovery.ts";

export interface SharesOptions {
  leases: LeaseTable;
  rank: number;
  ranks: readonly number[];
  /** Broadcast ownership, or a single master: every hash is this master's. */
  everyoneOwns: boolean;
  /** This master's own staging area; a taken-over share's are its siblings, `r<rank>`. */
  staging: StagingArea;
  stagingRoot: string;
  log: (line: string) => void;
  wallNow: () => number;
}

export class MasterShares {
  /** The staging areas of masters whose shares this one took over. */
  private readonly otherStaging = new Map<number, StagingArea>();

  constructor(private readonly o: SharesOptions) {}

  /** Whether this master admits `hash`: its rendezvous share and the shares it took over, or everything. */
  owns(hash: string): boolean {
    if (this.o.everyoneOwns) return true;
    return this.o.leases.partition?.mayHold(hash) ?? rendezvousOwner(hash, this.o.ranks) === this.o.rank;
  }

  /** The staging area of the master whose fence this is (fences begin `<epoch prefix>:<rank>:`): its executors staged the result. */
  stagingOf(fence: string): StagingArea {
    const rank = Number(fence.split(":")[1]);
    if (rank === this.o.rank || !Number.isSafeInteger(rank) || !this.o.ranks.includes(rank)) return this.o.staging;
    let area = this.otherStaging.get(rank);
    if (area === undefined) this.otherStaging.set(rank, (area = new StagingArea(join(dirname(this.o.stagingRoot), `r${rank}`))));
    return area;
  }

  /** Takes over every share whose lease expired (each logged with its duration); whether one was taken. */
  takeOver(): boolean {
    return takeOverShares(this.o.leases, this.o.log, this.o.wallNow());
  }

  /** Renews the shares this master holds; returns the ranks of those another master took over. */
  renew(): number[] {
    const lost = this.o.leases.renewShares();
    if (lost.length > 0) this.o.log(`the share(s) of rank ${lost.join(", ")} were taken over by another master: this master commits nothing more of them`);
    return lost;
  }

  /** Whether every share is served under a live lease (a share waiting for a takeover is work in sight). */
  get allServed(): boolean {
    return sharesServed(this.o.leases);
  }
}
