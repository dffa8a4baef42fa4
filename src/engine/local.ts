// LocalExecutor: runs the engine's chunks one at a time in this process (the generator's own
// -j is where single-host parallelism belongs). Interruption (Ctrl-C) stops the running chunk;
// the engine books it as aborted:interrupted and the range is re-swept by a later session.
// Every change to the books goes through the CommitQueue: while the store refuses writes, the
// executor waits for it (the queue retries and says so) instead of running ahead of the disk.
import { runChild } from "../exec/run-child.ts";
import type { CommitQueue } from "./commit-queue.ts";
import type { EngineMark, SweepEngine, WorkerView } from "./sweep-engine.ts";

export async function runLocal(engine: SweepEngine, books: CommitQueue<EngineMark>, worker: WorkerView, signal: AbortSignal): Promise<void> {
  for (;;) {
    if (signal.aborted) {
      engine.drain("interrupted");
      return;
    }
    const next = await books.run(() => engine.assign(worker), "hold");
    if (next.kind !== "chunk") return;
    const a = next.assignment;
    engine.clearScratch(a);
    const r = await runChild({
      argv: a.argv,
      cwd: a.cwd,
      logPath: a.logPath,
      hardTimeoutMs: a.hardTimeoutSeconds * 1000,
      nice: a.nice,
      idleIo: a.idleIo,
      signal,
    });
    const report = { outcome: r.outcome, exitCode: r.exitCode, signal: r.signal, seconds: r.seconds, error: r.error };
    await books.run(() => engine.finish(worker, a.chunkId, report), "hold");
  }
}
