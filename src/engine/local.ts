// LocalExecutor: runs the engine's chunks one at a time in this process (the generator's own
// -j is where single-host parallelism belongs). Interruption (Ctrl-C) stops the running chunk;
// the engine books it as aborted:interrupted and the range is re-swept by a later session.
import { rmSync } from "node:fs";
import { runChild } from "../exec/run-child.ts";
import type { SweepEngine, WorkerView } from "./sweep-engine.ts";

export async function runLocal(engine: SweepEngine, worker: WorkerView, signal: AbortSignal): Promise<void> {
  for (;;) {
    if (signal.aborted) {
      engine.drain("interrupted");
      return;
    }
    const next = engine.assign(worker);
    if (next.kind !== "chunk") return;
    const a = next.assignment;
    rmSync(a.scratchDir, { recursive: true, force: true });
    const r = await runChild({
      argv: a.argv,
      cwd: a.cwd,
      logPath: a.logPath,
      hardTimeoutMs: a.hardTimeoutSeconds * 1000,
      nice: a.nice,
      idleIo: a.idleIo,
      signal,
    });
    engine.finish(worker, a.chunkId, { outcome: r.outcome, exitCode: r.exitCode, signal: r.signal, seconds: r.seconds, error: r.error });
  }
}
