// The local slots, `run`'s executor (sweep/session/run.ts hands them to the session runner): the engine's
// chunks run one at a time in this process (the generator's own -j is where single-host
// parallelism belongs). Interruption (Ctrl-C) stops the running chunk; the engine books it as
// aborted:interrupted and the range is re-swept by a later session. Every change to the books
// goes through the session's CommitQueue: while the store refuses writes, the slots wait for it
// (the queue retries and says so) instead of running ahead of the disk.
//
// With `[generator] minimize`, a second slot runs minimize units beside the chunks, with its
// share of the jobs ({jobs} = round(share x jobs), at least 1); with share 0 it runs only while no
// chunk does. It never holds up the sweep: when the chunks end, a unit still running is
// interrupted and its finds wait for a later session.
import { runChild } from "../../exec/run-child.ts";
import type { CommitQueue } from "./commit-queue.ts";
import type { Assignment } from "./sweep-types.ts";
import type { EngineMark, SweepEngine, WorkerView } from "./sweep-engine.ts";

export async function runLocal(engine: SweepEngine, books: CommitQueue<EngineMark>, worker: WorkerView, signal: AbortSignal): Promise<void> {
  const stop = new AbortController();
  const slot = new MinimizeSlot(engine, books, worker, AbortSignal.any([signal, stop.signal]));
  let failed: { error: unknown } | null = null;
  const minimizing = slot.run().catch((error: unknown) => {
    failed = { error };
  });
  try {
    await runChunks(engine, books, worker, signal, slot);
  } finally {
    stop.abort();
    slot.nudge();
    await minimizing;
  }
  if (failed) throw (failed as { error: unknown }).error;
}

async function runChunks(engine: SweepEngine, books: CommitQueue<EngineMark>, worker: WorkerView, signal: AbortSignal, slot: MinimizeSlot): Promise<void> {
  {
    for (;;) {
      if (signal.aborted) {
        engine.drain("interrupted");
        return;
      }
      const next = await books.run(() => engine.assign(worker), "hold");
      if (next.kind !== "chunk") return;
      const a = next.assignment;
      engine.clearScratch(a);
      slot.chunkRunning = true;
      const report = await runPlaced(a, signal);
      await books.run(() => engine.finish(worker, a.chunkId, report), "hold");
      slot.chunkRunning = false;
      // The chunk may have left new finds pending: a waiting slot looks again.
      slot.nudge();
    }
  }
}

/** The single host's minimize slot: runs minimize units while there are finds pending. */
class MinimizeSlot {
  chunkRunning = false;
  private wake: (() => void) | null = null;

  constructor(
    private readonly engine: SweepEngine,
    private readonly books: CommitQueue<EngineMark>,
    private readonly worker: WorkerView,
    private readonly signal: AbortSignal,
  ) {}

  nudge(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  async run(): Promise<void> {
    const share = this.engine.minimize.share;
    if (share === null) return;
    const jobs = this.engine.minimize.localJobs();
    while (!this.signal.aborted) {
      const unit = share > 0 || !this.chunkRunning ? await this.books.run(() => this.engine.minimize.assign(this.worker, jobs), "hold") : null;
      if (unit === null) {
        await this.idle();
        continue;
      }
      this.engine.minimize.clearScratch(unit);
      const report = await runPlaced(unit, this.signal);
      await this.books.run(() => this.engine.minimize.finish(this.worker, unit.unitId, report), "hold");
    }
  }

  /** Until a chunk ends (new finds may be pending) or the sweep stops. */
  private idle(): Promise<void> {
    if (this.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.signal.removeEventListener("abort", done);
        resolve();
      };
      this.wake = done;
      this.signal.addEventListener("abort", done, { once: true });
    });
  }
}

/** Runs a chunk or a minimize unit where the engine placed it; what ended it, as the engine books it. */
async function runPlaced(p: Pick<Assignment, "argv" | "cwd" | "logPath" | "hardTimeoutSeconds" | "nice" | "idleIo">, signal: AbortSignal) {
  const r = await runChild({ argv: p.argv, cwd: p.cwd, logPath: p.logPath, hardTimeoutMs: p.hardTimeoutSeconds * 1000, nice: p.nice, idleIo: p.idleIo, signal });
  return { outcome: r.outcome, exitCode: r.exitCode, signal: r.signal, seconds: r.seconds, error: r.error };
}
