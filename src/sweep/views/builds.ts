// Coverage per app build: for each lane, which seed ranges were swept under which build (in seed
// order, merged where contiguous, the latest RANGES_SHOWN of them) and how much of the covered
// prefix the current build swept. One view for status, the dashboard, /metrics and the report;
// it reads the store's ranges (one per build change), never the chunks.
import { printable } from "../../core/log-lines.ts";
import { counted, formatInt } from "../../config/format.ts";
import type { SweepStore } from "../../store/port.ts";

/** Ranges shown per lane; the ones below are counted ("… 3 earlier ranges"). */
export const RANGES_SHOWN = 8;

export interface BuildRangeView {
  /** null: chunks that named no app build ([app] not configured then). */
  app_build: string | null;
  /** Inclusive. */
  seed_from: number;
  seed_to: number;
  /** At or above the cursor: swept, but not coverage yet (done ahead). */
  ahead: boolean;
}

export interface LaneBuildsView {
  /** The latest ranges in seed order, lowest first. */
  ranges: BuildRangeView[];
  /** Ranges below those shown. */
  earlier_ranges: number;
  /** Seeds of the covered prefix [base_seed, cursor) swept under the current build. */
  current_build_covered: number;
}

/** The lane's builds as a view shows them, against `currentBuild`. */
export function laneBuildsView(store: SweepStore, lane: { id: number; base_seed: number; cursor: number }, currentBuild: string | null): LaneBuildsView {
  const b = store.laneBuilds(lane, currentBuild, RANGES_SHOWN);
  return {
    ranges: b.ranges.map((r) => ({ ...r, ahead: r.seed_from >= lane.cursor })),
    earlier_ranges: b.earlier,
    current_build_covered: b.current_build_covered,
  };
}

/** The build the campaign runs under now, as the store knows it: that of the running (or last) session. */
export function lastSessionBuild(store: SweepStore): string | null {
  return store.recentSessions(1)[0]?.app_build ?? null;
}

/** A build id as shown: printable, with a name for chunks that named none. */
export function buildName(build: string | null): string {
  return build === null ? "(no build named)" : printable(build, { max: 80 });
}

/** "55.6%" of the prefix, or "-" for an empty prefix. */
export function prefixShare(part: number, covered: number): string {
  return covered > 0 ? `${((100 * part) / covered).toFixed(1)}%` : "-";
}

/** Whether builds are worth a section: some range or the current build names one. */
export function buildsNamed(lanes: readonly { builds: LaneBuildsView | null }[], currentBuild: string | null): boolean {
  return currentBuild !== null || lanes.some((l) => l.builds?.ranges.some((r) => r.app_build !== null));
}

/** One lane's ranges on one line: "… 2 earlier ranges, 1..400 3f2a91c0d4e5, 401..900 9b1c22aa0f13 (current)". */
export function rangesText(b: LaneBuildsView, currentBuild: string | null): string {
  const shown = b.ranges.map(
    (r) => `${formatInt(r.seed_from)}..${formatInt(r.seed_to)} ${buildName(r.app_build)}${r.app_build === currentBuild ? " (current)" : ""}${r.ahead ? " (ahead, not coverage)" : ""}`,
  );
  if (b.earlier_ranges > 0) shown.unshift(`… ${counted(b.earlier_ranges, "earlier range")}`);
  return shown.length > 0 ? shown.join(", ") : "nothing swept";
}

/** status's section: per lane a line of its ranges, and one of the current build's part of the prefix. */
export function buildLines(lanes: readonly { name: string; covered: number; builds: LaneBuildsView | null }[], currentBuild: string | null): string[] {
  const out = [`seed ranges by app build (current build: ${buildName(currentBuild)}):`];
  for (const l of lanes) {
    if (!l.builds) continue;
    out.push(
      `  ${printable(l.name, { max: 64 }).padEnd(16)} ${rangesText(l.builds, currentBuild)}`,
      `  ${"".padEnd(16)} current build: ${formatInt(l.builds.current_build_covered)} of ${formatInt(l.covered)} covered seeds (${prefixShare(l.builds.current_build_covered, l.covered)})`,
    );
  }
  return out;
}
