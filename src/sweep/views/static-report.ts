// `fuzzfleet report -o DIR`: the dashboard's page as one self-contained HTML file, from a sweep's
// store alone — the snapshot, the first failures' reports and uPlot inlined, no server and no network —
// so it can be attached to a bug report or a paper, like afl-plot's output. An explore campaign's
// counterpart (`report --corpus`) is src/explore/views/static-report.ts.
import { openOutputDir, writeOutputEntry, type KeptOut } from "../../files/output-file.ts";
import type { SweepStore } from "../../store/port.ts";
import { pageHtml } from "../../ui/page.ts";
import { inlinedUplot } from "../../ui/uplot.ts";
import type { FailureDetail } from "../../ui/source.ts";
import { SweepDashboardSource } from "./dashboard-source.ts";

/** Failures whose report text is embedded; the table lists them all up to the page's cap. */
const DETAILS_EMBEDDED = 50;

export function staticReportHtml(store: SweepStore, outDir: string, title: string): string {
  const source = new SweepDashboardSource({ store, outDir, title, live: null });
  const snapshot = source.snapshot();
  const details: FailureDetail[] = (snapshot.sweep?.failures ?? [])
    .slice(0, DETAILS_EMBEDDED)
    .flatMap((f) => {
      const d = source.failureDetail(f.id);
      return d ? [d] : [];
    });
  return pageHtml({ title, embedded: { snapshot, details, ...inlinedUplot() } });
}

/**
 * Writes DIR/index.html (DIR created if missing, its parent must exist). index.html is a new file
 * renamed in: a symlink or a hard link planted there is replaced, never written through; a FIFO or
 * a directory there, a dangling symlink as DIR, or a DIR inside `keepOut` is a UsageError.
 */
export function writeStaticReport(dir: string, html: string, keepOut: readonly KeptOut[] = []): string {
  const rules = { flag: "-o", what: "the report", keepOut, mode: 0o644 };
  const out = openOutputDir(dir, rules);
  try {
    return writeOutputEntry(out, "index.html", html, rules);
  } finally {
    out.close();
  }
}
