// How a master that owns the campaign (a lone master, or the root) ends it, once its statistics
// are computed: prints them with what they call for, removes the hidden state after a clean end,
// lets the submasters go, says what is left to do, and turns the outcome into the exit code.
import { report } from "./banner.ts";
import { ENDED, exhausted, exitCodeOf } from "./outcome.ts";
import type { Ended, Links } from "./role.ts";
import { renderStats, writeStatsJson, type ExploreStats } from "./stats.ts";

/** This master's executors: its local slots and every remote worker that attached. */
export function ownExecutors(e: Ended, links: Links): { local: number; remote: number } {
  return { local: e.started.options.slots, remote: links.remote?.server.everyone.length ?? 0 };
}

/**
 * Prints the final statistics; after a clean end (no problem, the frontier exhausted) removes the
 * hidden state; then `release` (the root lets its submasters exit). Returns the exit code.
 */
export function closeCampaign(e: Ended, stats: ExploreStats, c: { role: "root" | "single"; rank?: number; removeState: () => void; release: () => void }): number {
  const { write, epoch, options: o } = e.started;
  const ended = ENDED[e.end];
  write(renderStats(stats));
  write(`ended: ${ended}`);
  if (stats.symlinked_inputs > 0) write(`${stats.symlinked_inputs} symlinked input(s) skipped (never followed: put the files themselves into the input directory)`);
  if (e.newFindings > 0) write(`${e.newFindings} new crash(es) or hang(s) recorded in this session${o.failOnFindings ? " (--fail-on-findings: exit 1)" : ""}`);
  if (stats.observations > 0 && stats.generated === 0) {
    write(
      "warning: no run produced a child input — check that the target writes its children where fuzzfleet reads them " +
        "(every file it writes into $SYMCC_OUTPUT_DIR, docs/explore.md) and that its backend generates any (SymCC's simple backend may not)",
    );
  }
  if (o.statsJson) writeStatsJson(o.statsJson, e.corpusDir, stats, { ended, role: c.role, rank: c.rank ?? 0, new_findings: e.newFindings, afl_exported: e.exported });
  if (stats.late_inputs > 0) write(`${stats.late_inputs} input file(s) arrived after the frontier was declared exhausted: left for the next campaign`);
  const clean = e.problems.length === 0 && exhausted(e.end);
  if (clean) c.removeState();
  c.release();
  if (e.problems.length > 0) report(write, e.problems, e.workDir, epoch);
  else if (!clean) write(`the frontier is not exhausted (${e.end}); continue with: --resume ${epoch}`);
  return exitCodeOf({ end: e.end, problems: e.problems.length, newFindings: e.newFindings, failOnFindings: o.failOnFindings ?? false });
}
