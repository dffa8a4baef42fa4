// What one master knows of the content earlier campaigns on this corpus explored, and what it adds
// for the next ones: every task it completes goes into the explored ledger under the target's
// build. Content earlier campaigns completed under the same build is passed over (unless `fresh`);
// under another build (or an unrecorded one) it runs again, and is counted as such (state/ledger.ts).
import { type EarlierExplored, ExploredLedger, targetChange, type TargetChange } from "../state/ledger.ts";

export interface ExploredHistoryOptions {
  /** The explored ledger's directory (ledgerDir). */
  dir: string;
  epoch: string;
  rank: number;
  /** Every ledger line fsynced (the lease table's durability is "all"). */
  syncAll: boolean;
  build: string;
  /** Run everything again: nothing earlier campaigns completed is passed over. */
  fresh: boolean;
}

export class ExploredHistory {
  readonly ledger: ExploredLedger;
  /** Content completed by earlier campaigns, by build (nothing when fresh). */
  private readonly earlier: EarlierExplored;
  /** Content of `earlier.same` this master passed over. */
  private readonly skipped = new Set<string>();
  /** Content of `earlier.other` this master claimed: run again under this build. */
  private readonly rerun = new Set<string>();

  constructor(private readonly o: ExploredHistoryOptions) {
    this.ledger = new ExploredLedger(o.dir, o.epoch, o.rank, o.syncAll, o.build);
    this.earlier = o.fresh ? { same: new Set(), other: new Map(), lastBuild: null } : this.ledger.loadEarlier(o.build);
  }

  /** Whether `hash` is passed over: an earlier campaign completed it under this build. */
  passOver(hash: string): boolean {
    if (!this.earlier.same.has(hash)) return false;
    this.skipped.add(hash);
    return true;
  }

  /** `hash` was claimed: counted when it runs again because another build explored it. */
  claimed(hash: string): void {
    if (this.earlier.other.has(hash)) this.rerun.add(hash);
  }

  /** Content earlier campaigns completed that this master passed over. */
  get skippedCount(): number {
    return this.skipped.size;
  }

  /** Content earlier campaigns completed under another build (or an unrecorded one) that this master ran again. */
  get rerunCount(): number {
    return this.rerun.size;
  }

  /** Why content earlier campaigns explored runs again under this build (ledger.ts); null when nothing does. */
  get targetChange(): TargetChange | null {
    return targetChange(this.earlier, this.o.build);
  }
}
