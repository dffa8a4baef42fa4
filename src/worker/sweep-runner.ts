// Sweep units: generator chunks, run with the same child execution as `run`.
import { rmSync } from "node:fs";
import { formatDuration } from "../config/duration.ts";
import { formatInt } from "../config/format.ts";
import { runChild } from "../exec/run-child.ts";
import type { AssignedChunk, CoordinatorReplyT, Frame } from "../net/messages.ts";
import type { UnitRunner } from "./loop.ts";

export class SweepRunner implements UnitRunner<AssignedChunk> {
  unitsFrom(reply: CoordinatorReplyT): AssignedChunk[] | null {
    return reply.type === "assign" ? reply.chunks : null;
  }

  id(c: AssignedChunk): number {
    return c.chunk_id;
  }

  started(c: AssignedChunk): string {
    return `  chunk ${c.chunk_id}: ${c.lane} seeds ${formatInt(c.seed_from)}..${formatInt(c.seed_to)} (${formatInt(c.seed_to - c.seed_from + 1)})`;
  }

  async run(c: AssignedChunk, signal: AbortSignal): Promise<Frame> {
    rmSync(c.scratch_dir, { recursive: true, force: true });
    try {
      const r = await runChild({
        argv: c.argv,
        cwd: c.cwd,
        logPath: c.log_path,
        hardTimeoutMs: c.hard_timeout * 1000,
        nice: c.nice,
        idleIo: c.idle_io,
        signal,
      });
      return { type: "done", chunk_id: c.chunk_id, elapsed: r.seconds, rc: r.exitCode, outcome: r.outcome, error: r.error ?? null };
    } catch (err) {
      return { type: "done", chunk_id: c.chunk_id, elapsed: 0, rc: null, outcome: "error", error: String(err).slice(0, 2000) };
    }
  }

  finished(c: AssignedChunk, report: Frame, note: string): string {
    const d = report as Extract<Frame, { type: "done" }>;
    return `  chunk ${c.chunk_id} ${d.outcome}${d.rc !== null ? ` (rc ${d.rc})` : ""} in ${formatDuration(d.elapsed)} (${note})`;
  }

  cleanup(c: AssignedChunk): void {
    rmSync(c.scratch_dir, { recursive: true, force: true });
  }
}
