// `fuzzfleet report -o DIR`: the dashboard's page as one self-contained HTML file, from a sweep's
// store alone — the snapshot, the first failures' reports and uPlot inlined, no server and no network —
// so it can be attached to a bug report or a paper, like afl-plot's output. An explore campaign's
// counterpart (`report --corpus`) is src/report/explore-static-report.ts.
import { closeSync, constants, mkdirSync, openSync, readFileSync, writeSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { RuntimeFailure } from "../errors.ts";
import type { Db } from "../store/db.ts";
import { pageHtml } from "../ui/page.ts";
import type { FailureDetail } from "../ui/source.ts";
import { SweepDashboardSource } from "./dashboard-sweep.ts";

/** Failures whose report text is embedded; the table lists them all up to the page's cap. */
const DETAILS_EMBEDDED = 50;

export function staticReportHtml(db: Db, outDir: string, title: string): string {
  const source = new SweepDashboardSource({ db, outDir, title, live: null });
  const snapshot = source.snapshot();
  const details: FailureDetail[] = (snapshot.sweep?.failures ?? [])
    .slice(0, DETAILS_EMBEDDED)
    .flatMap((f) => {
      const d = source.failureDetail(f.id);
      return d ? [d] : [];
    });
  return pageHtml({ title, embedded: { snapshot, details, ...inlinedUplot() } });
}

/** uPlot's script and stylesheet, to inline in a page that loads nothing from anywhere. */
export function inlinedUplot(): { uplotJs: string; uplotCss: string } {
  const uplot = dirname(createRequire(import.meta.url).resolve("uplot/dist/uPlot.iife.min.js"));
  return { uplotJs: readFileSync(join(uplot, "uPlot.iife.min.js"), "utf8"), uplotCss: readFileSync(join(uplot, "uPlot.min.css"), "utf8") };
}

/** Writes DIR/index.html (DIR created if missing); an index.html that is a symlink is refused, never followed. */
export function writeStaticReport(dir: string, html: string): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, "index.html");
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o644);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new RuntimeFailure(
      code === "ELOOP" ? `${path} is a symbolic link; nothing is written through one — remove it or choose another -o` : `cannot write ${path}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  try {
    writeSync(fd, html);
  } finally {
    closeSync(fd);
  }
  return path;
}
