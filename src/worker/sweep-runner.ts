// Sweep units: generator chunks, run with the same child execution as `run`.
import { dirname, relative } from "node:path";
import { removeBelow } from "../files/pinned-dir.ts";
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
    removeScratch(c);
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
    removeScratch(c);
  }
}

/**
 * The scratch directory is <out>/tmp/chunk-N on the shared file system; it is removed without
 * following a symlink below <out> (a planted `tmp` link loses the link, not its target).
 */
function removeScratch(c: AssignedChunk): void {
  const out = dirname(dirname(c.scratch_dir));
  try {
    removeBelow(out, relative(out, c.scratch_dir));
  } catch {
    // A directory the worker cannot remove is the coordinator's to clean at its next start.
  }
}
