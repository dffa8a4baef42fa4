// Sweep units on a worker: generator chunks, and minimize units (`[generator] minimize` over a
// few finds pending minimization), both run with the same child execution as `run`. A minimize
// unit is held and reported under its wire id (net/messages.ts, minimizeWireId), so the loop
// treats both kinds alike; what it wrote is read by the coordinator, which trusts none of it.
//
// A worker without the shared directory (OwnDirectory) runs each unit in a scratch directory of its
// own: the coordinator's {out} in the argv becomes that directory, an argument naming a path in the
// campaign directory names the same path below the worker's working directory (where its copy of
// the generator is), and the command runs there. The unit's failures/ and quarantine/ files then
// wait in its outbox until the loop has sent them (transfer.ts) ahead of its `done`.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, sep } from "node:path";
import { removeBelow } from "../files/pinned-dir.ts";
import { formatDuration } from "../config/duration.ts";
import { formatInt } from "../config/format.ts";
import { runChild } from "../exec/run-child.ts";
import { minimizeWireId, type AssignedChunk, type AssignedMinimize, type CoordinatorReplyT, type Frame, type PutFrame, type TransferTermsT } from "../net/messages.ts";
import type { UnitRunner } from "./loop.ts";
import { collectOutbox, putFrames, type Outbox } from "./transfer.ts";

/** How a worker without the shared directory runs units: its working directory, and the welcome's transfer terms. */
export interface OwnDirectory {
  /** Where its copy of the generator is: stands for the campaign directory. */
  workDir: string;
  terms: TransferTermsT;
}

export type SweepUnit = AssignedChunk | AssignedMinimize;

const isMinimize = (u: SweepUnit): u is AssignedMinimize => "unit_id" in u;

export class SweepRunner implements UnitRunner<SweepUnit> {
  /** The root of the units' own scratch directories (own directory only); removed by dispose(). */
  private readonly root: string | null;
  /** Files waiting to be sent ahead of their unit's report, by wire id. */
  private readonly outboxes = new Map<number, { outbox: Outbox; dir: string }>();

  constructor(private readonly own: OwnDirectory | null = null) {
    this.root = own ? mkdtempSync(join(tmpdir(), "fuzzfleet-worker-")) : null;
  }

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
    const place = this.placeOf(u);
    this.removeScratch(u);
    try {
      const r = await runChild({
        argv: place.argv,
        cwd: place.cwd,
        logPath: place.logPath,
        hardTimeoutMs: u.hard_timeout * 1000,
        nice: u.nice,
        idleIo: u.idle_io,
        signal,
      });
      const done = { type: "done" as const, chunk_id: chunkId, elapsed: r.seconds, rc: r.exitCode, outcome: r.outcome, error: r.error ?? null };
      if (!this.own) return done;
      return { ...done, ...this.fillOutbox(u, place.scratch, r.outcome === "complete" && (r.exitCode === 0 || r.exitCode === 1)) };
    } catch (err) {
      return { type: "done", chunk_id: chunkId, elapsed: 0, rc: null, outcome: "error", error: String(err).slice(0, 2000) };
    }
  }

  /** Where the unit runs: as assigned (shared directory), or relocated into this worker's own directories. */
  private placeOf(u: SweepUnit): { argv: string[]; cwd: string; logPath: string; scratch: string } {
    if (!this.own) return { argv: u.argv, cwd: u.cwd, logPath: u.log_path, scratch: u.scratch_dir };
    const name = isMinimize(u) ? `minimize-${u.unit_id}` : `chunk-${u.chunk_id}`;
    const scratch = join(this.root!, name);
    return { argv: relocate(u.argv, u.scratch_dir, scratch, u.cwd, this.own.workDir), cwd: this.own.workDir, logPath: join(this.root!, `${name}.log`), scratch };
  }

  /** Lists what the unit left to send (only a run that may have finds sends anything); the done's `files` accounts for it. */
  private fillOutbox(u: SweepUnit, scratch: string, sends: boolean): Partial<Extract<Frame, { type: "done" }>> {
    const id = this.id(u);
    if (!sends) {
      this.removeScratch(u);
      return { files: null };
    }
    const kinds = isMinimize(u) ? ["failures"] : ["failures", "quarantine"];
    const found = collectOutbox(scratch, isMinimize(u) ? "" : this.own!.terms.results, kinds, this.own!.terms);
    if ("over" in found) {
      this.removeScratch(u);
      return { outcome: "error", error: found.over.slice(0, 2000), files: null };
    }
    const { outbox } = found;
    if (outbox.files.length > 0) this.outboxes.set(id, { outbox, dir: scratch });
    else this.removeScratch(u);
    return { files: { count: outbox.files.length, bytes: outbox.bytes, wrote: outbox.wrote } };
  }

  /** The put frames to send before the report of unit `id`, or null when it has none. Its scratch goes once they are all read. */
  outbox(id: number): AsyncIterable<PutFrame> | null {
    const entry = this.outboxes.get(id);
    if (!entry) return null;
    this.outboxes.delete(id);
    async function* sendThenRemove(frames: AsyncGenerator<PutFrame>): AsyncGenerator<PutFrame> {
      try {
        yield* frames;
      } finally {
        rmSync(entry!.dir, { recursive: true, force: true });
      }
    }
    return sendThenRemove(putFrames(id, entry.outbox, this.own!.terms.piece_bytes));
  }

  /** Removes this worker's own scratch directories (own directory only). */
  dispose(): void {
    if (this.root) rmSync(this.root, { recursive: true, force: true });
  }

  finished(u: SweepUnit, report: Frame, note: string): string {
    const d = report as Extract<Frame, { type: "done" }>;
    const what = isMinimize(u) ? `minimize unit ${u.unit_id}` : `chunk ${u.chunk_id}`;
    // Under a minute to a tenth of a second: a log read afterwards (benchmarks do) can place the run.
    const took = d.elapsed < 60 ? `${d.elapsed.toFixed(1)}s` : formatDuration(d.elapsed);
    const sent = d.files && d.files.count > 0 ? `, ${formatInt(d.files.count)} file(s) ${formatInt(d.files.bytes)} bytes sent` : "";
    return `  ${what} ${d.outcome}${d.rc !== null ? ` (rc ${d.rc})` : ""} in ${took}${sent} (${note})`;
  }

  cleanup(u: SweepUnit): void {
    this.outboxes.delete(this.id(u));
    this.removeScratch(u);
  }

  /**
   * The shared scratch directory is <out>/tmp/chunk-N (or minimize-N); it is removed without
   * following a symlink below <out> (a planted `tmp` link loses the link, not its target). An own
   * one lies in this worker's own temporary directory.
   */
  private removeScratch(u: SweepUnit): void {
    if (this.own) {
      rmSync(this.placeOf(u).scratch, { recursive: true, force: true });
      return;
    }
    const out = dirname(dirname(u.scratch_dir));
    try {
      removeBelow(out, relative(out, u.scratch_dir));
    } catch {
      // A directory the worker cannot remove is the coordinator's to clean at its next start.
    }
  }
}

/**
 * The argv of a unit relocated to a worker's own directories: the coordinator's {out} becomes
 * `ownScratch` wherever it appears; an argument that is a path in the campaign directory becomes the
 * same path below `workDir`.
 */
export function relocate(argv: readonly string[], scratch: string, ownScratch: string, campaignDir: string, workDir: string): string[] {
  return argv.map((arg) => {
    const moved = arg.split(scratch).join(ownScratch);
    if (moved !== arg) return moved;
    if (arg === campaignDir) return workDir;
    return arg.startsWith(campaignDir + sep) ? join(workDir, arg.slice(campaignDir.length + 1)) : arg;
  });
}
