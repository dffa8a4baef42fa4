// The loop that drives one ExploreMaster from the start of dispatch to its end: on every turn it
// renews held leases, admits inputs (a batch at a time), scans the corpus for other masters'
// children, takes over expired leases, fills the local slots, and asks the ending whether the
// campaign is over; between turns it sleeps until a result, an exit or Ctrl-C wakes it, or the
// next scan is due. The same loop serves a lone master, the root and a submaster: only the
// ending differs (fleet/endings.ts). With --afl-sync the turn also exports new corpus inputs.
//
//   running --ending.step says why, or the wall budget, or no usable executor--> shutdown
//   shutdown: dispatch closed; local runs interrupted unless the frontier was exhausted; local
//             runs settled; remote workers stopped (exact ACKs); leases renewed once more.
import type { ExploreMaster } from "../master/master.ts";
import { IdleWindow, type EndReason, type Ending } from "../fleet/endings.ts";
import type { ExploreWorkerProtocol } from "../fleet/worker-protocol.ts";
import { stopOutcomeWords } from "../../net/worker-service.ts";
import { WakeablePause } from "../../util/pause.ts";
import { LocalSlots, type LocalSlotsOptions } from "./local-slots.ts";
import { problem, type Problem } from "../../core/problems.ts";

const INPUT_SCAN_MS = 1000;
/**
 * Input files admitted per turn of the loop (publish + claim, about 2 ms each on a small VM): a
 * large input directory (an AFL++ queue of thousands) is admitted a batch at a time between runs
 * instead of all before the first one. Batches much smaller than this cost throughput: in
 * bench/explore.mjs runs one after the other, 2 per turn gave 146 tasks/s against 162 for
 * admitting all 300 seeds first.
 */
export const ADMIT_BATCH = 256;
const CORPUS_SCAN_MS = 250;
/** How often a master of several looks for a share whose lease expired (a takeover waits for it). */
const SHARE_CHECK_MS = 1000;

export interface MasterLoopOptions {
  master: ExploreMaster;
  /** The local slots, but for the callbacks the loop provides. */
  local: Omit<LocalSlotsOptions, "master" | "dispatchOpen" | "onSettled">;
  signal: AbortSignal;
  /** Per-run timeout: a run that could not finish inside the wall budget is not started. */
  timeoutSeconds: number;
  /** 0: no wall budget. */
  wallTimeoutSeconds: number;
  leaseTtlMs: number;
  /** How long the shutdown waits for remote workers' exact ACKs (--stop-grace). */
  stopGraceSeconds: number;
  /** Other masters publish into the same corpus: scan it for their children. */
  multiMaster: boolean;
  /** The monotonic clock, in ms. */
  now: () => number;
  log: (line: string) => void;
  /** Called on every turn (--afl-sync: exports what is new, at its own pace). */
  exporter?: { step(now: number): void } | null;
}

export class MasterLoop {
  private readonly slots: LocalSlots;
  private readonly sleeper = new WakeablePause();
  private closing = false;
  /** When the loop started (the clock of the wall budget). */
  private loopStart = 0;

  constructor(private readonly o: MasterLoopOptions) {
    this.slots = new LocalSlots({ ...o.local, master: o.master, dispatchOpen: () => this.dispatchOpen(), onSettled: () => this.sleeper.wake() });
    o.signal.addEventListener("abort", () => this.sleeper.wake(), { once: true });
    // A batch of results committed: the slots it freed are given work at once, not at the next turn.
    o.master.onCommitted = () => this.sleeper.wake();
  }

  /** Ends the current pause at once (a result arrived, a worker left). */
  wake(): void {
    this.sleeper.wake();
  }

  async run(remote: ExploreWorkerProtocol | null, ending: Ending): Promise<EndReason> {
    const { master, leaseTtlMs } = this.o;
    this.loopStart = this.o.now();
    let lastInputs = this.o.now();
    let lastCorpus = this.o.now();
    let lastRecovery = this.o.now();
    let lastBeat = this.o.now();
    // Renew held leases well inside their TTL; leases can only expire a TTL after they were last
    // renewed, so looking for expired ones more often is waste (each look reads every record).
    // A share waiting for a takeover is looked for every second (a few small partition records),
    // so a dead master's share is taken over within its TTL + 2 s.
    const beatMs = Math.max(100, Math.min(30_000, leaseTtlMs / 3));
    const recoveryMs = Math.max(CORPUS_SCAN_MS, Math.min(5000, leaseTtlMs / 4));
    let lastShares = this.o.now();
    for (;;) {
      const t = this.o.now();
      if (this.o.signal.aborted) return "interrupted";
      if (t - lastBeat >= beatMs) {
        master.heartbeat();
        lastBeat = t;
      }
      let found = 0;
      // A backlog is worked through at once; a new listing waits for the scan interval.
      const relist = master.inputBacklogCount === 0;
      if (!relist || t - lastInputs >= INPUT_SCAN_MS) {
        found += master.admitInputs(ADMIT_BATCH);
        if (relist) lastInputs = t;
      }
      // With one master every child is claimed where it is committed; the corpus scan only
      // finds what other masters published.
      if (this.o.multiMaster && t - lastCorpus >= CORPUS_SCAN_MS) {
        found += master.scanCorpus();
        lastCorpus = t;
      }
      const sharesDue = this.o.multiMaster && t - lastShares >= SHARE_CHECK_MS;
      if (sharesDue) lastShares = t;
      if (t - lastRecovery >= recoveryMs || (sharesDue && master.shareWaiting)) {
        found += master.recoverExpired();
        lastRecovery = t;
      }
      this.o.exporter?.step(t);
      if (this.dispatchOpen()) this.slots.fill();
      else if (this.o.wallTimeoutSeconds > 0 && master.activeCount === 0) return "wall budget";
      if (!remote && this.slots.count > 0 && master.quarantined.size >= this.slots.count && master.pendingCount > 0) {
        master.problems.push(problem("executor", "every executor was quarantined: no usable executor left"));
        return "no usable executor";
      }
      const end = ending.step(t, found);
      if (end) return end;
      const untilEnd = ending instanceof IdleWindow ? ending.untilEnd(this.o.now()) : 50;
      // Inputs still to admit: come back as soon as the results and exits that arrived meanwhile
      // have been handled.
      const admitting = master.inputBacklogCount > 0;
      await this.sleeper.pause(admitting ? 0 : Math.max(0, Math.min(CORPUS_SCAN_MS, untilEnd)));
    }
  }

  /** Stops dispatch, settles local slots and remote workers. Returns the problems it saw. */
  async shutdown(remote: ExploreWorkerProtocol | null, end: EndReason): Promise<Problem[]> {
    this.closing = true;
    if (remote) remote.closing = end;
    if (end !== "idle" && end !== "quiescence") this.slots.abort();
    await this.slots.settled();
    const problems: Problem[] = [];
    if (remote) {
      const grace = this.o.stopGraceSeconds;
      const words = stopOutcomeWords(await remote.server.stopAll(grace * 1000), grace);
      remote.server.close();
      problems.push(...words.problems.map((m) => problem("shutdown", m)));
      if (words.summary !== null) this.o.log(`worker shutdown: ${words.summary}`);
    }
    this.o.master.heartbeat();
    this.slots.dispose();
    return problems;
  }

  private dispatchOpen(): boolean {
    if (this.closing) return false;
    const wall = this.o.wallTimeoutSeconds;
    // A run that could not finish inside the wall budget is not started.
    return wall <= 0 || wall - (this.o.now() - this.loopStart) / 1000 > this.o.timeoutSeconds;
  }
}
