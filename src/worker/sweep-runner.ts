// Sweep units on a worker: generator chunks, and minimize units (`[generator] minimize` over a
// few finds pending minimization), both run with the same child execution as `run`. A minimize
// unit is held and reported under its wire id (net/messages.ts, minimizeWireId), so the loop
// treats both kinds alike; what it wrote is read by the coordinator, which trusts none of it.
import { dirname, relative } from "node:path";
import { removeBelow } from "../files/pinned-dir.ts";
import { formatDuration } from "../config/duration.ts";
import { formatInt } from "../config/format.ts";
import { runChild } from "../exec/run-child.ts";
import { minimizeWireId, type AssignedChunk, type AssignedMinimize, type CoordinatorReplyT, type Frame } from "../net/messages.ts";
import type { UnitRunner } from "./loop.ts";

export type SweepUnit = AssignedChunk | AssignedMinimize;

const isMinimize = (u: SweepUnit): u is AssignedMinimize => "unit_id" in u;

export class SweepRunner implements UnitRunner<SweepUnit> {
  unitsFrom(reply: CoordinatorReplyT): SweepUnit[] | null {
    return reply.type === "assign" ? [...reply.chunks, ...(reply.minimize ?? [])] : null;
  }

  id(u: SweepUnit): number {
    return isMinimize(u) ? minimizeWireId(u.unit_id) : u.chunk_id;
  }

  started(u: SweepUnit): string {
    if (isMinimize(u)) return `  minimize unit ${u.unit_id}: ${u.lane}, ${formatInt(u.seeds.length)} find(s) (seeds ${u.seeds.slice(0, 5).join(",")}${u.seeds.length > 5 ? ",…" : ""})`;
    return `  chunk ${u.chunk_id}: ${u.lane} seeds ${formatInt(u.seed_from)}..${formatInt(u.seed_to)} (${formatInt(u.seed_to - u.seed_from + 1)})`;
  }

  async run(u: SweepUnit, signal: AbortSignal): Promise<Frame> {
    const chunkId = this.id(u);
    removeScratch(u);
    try {
      const r = await runChild({
        argv: u.argv,
        cwd: u.cwd,
        logPath: u.log_path,
        hardTimeoutMs: u.hard_timeout * 1000,
        nice: u.nice,
        idleIo: u.idle_io,
        signal,
      });
      return { type: "done", chunk_id: chunkId, elapsed: r.seconds, rc: r.exitCode, outcome: r.outcome, error: r.error ?? null };
    } catch (err) {
      return { type: "done", chunk_id: chunkId, elapsed: 0, rc: null, outcome: "error", error: String(err).slice(0, 2000) };
    }
  }

  finished(u: SweepUnit, report: Frame, note: string): string {
    const d = report as Extract<Frame, { type: "done" }>;
    const what = isMinimize(u) ? `minimize unit ${u.unit_id}` : `chunk ${u.chunk_id}`;
    // Under a minute to a tenth of a second: a log read afterwards (benchmarks do) can place the run.
    const took = d.elapsed < 60 ? `${d.elapsed.toFixed(1)}s` : formatDuration(d.elapsed);
    return `  ${what} ${d.outcome}${d.rc !== null ? ` (rc ${d.rc})` : ""} in ${took} (${note})`;
  }

  cleanup(u: SweepUnit): void {
    removeScratch(u);
  }
}

/**
 * The scratch directory is <out>/tmp/chunk-N (or minimize-N) on the shared file system; it is
 * removed without following a symlink below <out> (a planted `tmp` link loses the link, not its target).
 */
function removeScratch(u: SweepUnit): void {
  const out = dirname(dirname(u.scratch_dir));
  try {
    removeBelow(out, relative(out, u.scratch_dir));
  } catch {
    // A directory the worker cannot remove is the coordinator's to clean at its next start.
  }
}
