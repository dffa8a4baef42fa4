// The explore dashboard built from the files a campaign leaves beside its corpus (`fuzzfleet ui
// --corpus DIR`, while nothing runs; src/explore/views/campaign-files.ts reads them), and the detail of one
// finding group, which the live dashboard (dashboard.ts) shows the same way.
//
// A large corpus or lease table takes a while to list: the files are read again at most every
// DISK_EVERY_MS, and never more than 1/DISK_SHARE of the time (the live source keeps the same pace
// for its disk reads).
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { findingsView, groupFindings, reproLine } from "./finding-groups.ts";
import { exploreDiscovery } from "./discovery.ts";
import type { DashboardSnapshot, ExploreFrontier, ExploreSeries, ExploreView, FailureDetail } from "../../ui/source.ts";
import { buildNote, type FindingRecord } from "../state/findings.ts";

/** Disk reads at most this often (ms), and never more than 1/DISK_SHARE of the time. */
export const DISK_EVERY_MS = 3000;
export const DISK_SHARE = 50;

/** A campaign's files, read while nothing runs (src/explore/views/campaign-files.ts reads them). */
export interface CampaignFiles {
  readonly corpusDir: string;
  findings(): FindingRecord[];
  /** `epochExecutions`: the executions of `epoch` (every master's, every session's). */
  read(): { headline: string; epoch: string | null; epochExecutions: number; frontier: ExploreFrontier; totals: ExploreView["totals"]; series: ExploreSeries; masters: number[] };
}

/** The dashboard snapshot of a campaign's files, read again at the pace above. */
export class CampaignFilesView {
  private cache: { at: number; tookMs: number; read: ReturnType<CampaignFiles["read"]>; records: FindingRecord[] } | null = null;

  constructor(readonly files: CampaignFiles) {}

  /** `wallNow`: when the snapshot is taken (read once the files were). */
  snapshot(title: string, wallNow: () => number): DashboardSnapshot {
    const at = performance.now();
    const c = this.cache;
    if (!c || at - c.at >= Math.max(DISK_EVERY_MS, c.tookMs * DISK_SHARE)) {
      this.cache = { at, tookMs: 0, read: this.files.read(), records: this.files.findings() };
      this.cache.tookMs = performance.now() - at;
    }
    const { read, records } = this.cache!;
    return {
      kind: "explore",
      title,
      takenMs: wallNow(),
      live: false,
      status: { headline: read.headline, elapsedSeconds: null, budgetSeconds: null, draining: null },
      sweep: null,
      workers: null,
      explore: {
        epoch: read.epoch,
        role: "read from the files",
        frontier: read.frontier,
        totals: read.totals,
        rates: { executionsPerSecond: null, generatedPerSecond: null },
        series: read.series,
        ...findingsView(records),
        discovery: read.epoch === null ? null : exploreDiscovery(records, read.epoch, read.epochExecutions),
        masters: read.masters.map((rank) => ({ rank, host: null, self: false, phase: "not running" })),
        idle: null,
        wall: null,
      },
    };
  }
}

/** The detail of finding group `id` (1-based, as findingsView numbers them) among `records`; null when there is none. */
export function findingDetail(records: readonly FindingRecord[], id: number, corpusDir: string, target: readonly string[] | null): FailureDetail | null {
    const g = groupFindings(records)[id - 1];
    if (!g) return null;
    const r = g.records[0]!;
    const input = join(corpusDir, r.input_hash);
    return {
      id,
      bucket: g.signature,
      repro: target ? reproLine(target, input) : `run the target on ${input}`,
      report:
        `${g.records.length} input(s) under this signature; this one: ${r.input_hash}\n` +
        `${r.kind}${r.signal !== null ? ` (signal ${r.signal})` : r.exit_code !== null ? ` (exit ${r.exit_code})` : " (timeout)"}, seen ${r.times_seen} time(s), first ${r.first_seen}, last ${r.last_seen}\n` +
        buildLines(g.records) +
        `\nthe end of its output:\n${r.stderr_tail}`,
    };
}

/**
 * The builds of a group's inputs, one line each (bounded): which build first and last saw it, and
 * which later build did not reproduce it. "" when no record names a build.
 */
function buildLines(records: readonly FindingRecord[]): string {
  const shown = 20;
  const lines = records.slice(0, shown).flatMap((r) => {
    const note = buildNote(r);
    return note ? [`  ${r.input_hash.slice(0, 16)}  ${note}`] : [];
  });
  if (lines.length === 0) return "";
  const notReproduced = records.filter((r) => r.not_reproduced_by !== null).length;
  const head = `target builds${notReproduced > 0 ? ` (${notReproduced} of ${records.length} input(s) not reproduced by a later build)` : ""}:\n`;
  return head + lines.join("\n") + (records.length > shown ? `\n  … ${records.length - shown} more input(s)` : "") + "\n";
}
