// `fuzzfleet report --corpus CORPUS_DIR -o DIR`: an explore campaign's dashboard page as one
// self-contained HTML file, read from the files beside its corpus alone (the same reader as
// `ui --corpus`): totals, findings by signature with their output tails, and the growth plots
// (unique, generated, redundancy) where an unfinished epoch's lease records still tell them. uPlot
// and the data are inlined; the page loads nothing and works from file://.
//
// Nothing is written into the corpus: a DIR that is, or lies below, the corpus directory (also by
// way of a symbolic link) is refused before anything is created.
import { lstatSync } from "node:fs";
import { UsageError } from "../../errors.ts";
import { refuseKeptOut } from "../../files/output-file.ts";
import { ExploreDashboardSource } from "./dashboard-source.ts";
import { exploreKeptOut, stateDir } from "../state/work-dir.ts";
import { pageHtml } from "../../ui/page.ts";
import type { FailureDetail } from "../../ui/source.ts";
import { ExploreCampaignFiles } from "./campaign-files.ts";
import { inlinedUplot } from "../../ui/uplot.ts";

/** Signatures whose detail (input, output tail) is embedded; the table lists them all up to the page's cap. */
const DETAILS_EMBEDDED = 50;

/**
 * Refuses a corpus no explore campaign ran in: its state directory must be a real directory
 * (never a link). The corpus itself is checked by the caller (a real directory, never a link).
 */
export function refuseNonExploreCorpus(corpusDir: string, flag = "--corpus"): void {
  const state = stateDir(corpusDir);
  let st;
  try {
    st = lstatSync(state);
  } catch {
    throw new UsageError(`${flag} ${corpusDir}: no explore campaign ran here (no ${state}); point ${flag} at the -o directory of an explore campaign`);
  }
  if (!st.isDirectory()) {
    throw new UsageError(`${flag} ${corpusDir}: ${state} is not a directory${st.isSymbolicLink() ? " but a symbolic link, which is never followed" : ""}; point ${flag} at the -o directory of an explore campaign`);
  }
}

/** Refuses an output directory that is, or lies below, the corpus or its state (even by way of a link). */
export function refuseOutputInCorpus(outDir: string, corpusDir: string): void {
  refuseKeptOut(outDir, outDir, { flag: "-o", what: "the report", keepOut: exploreKeptOut(corpusDir) }, true);
}

/** The page for the explore campaign whose corpus is `corpusDir`, everything embedded. */
export function exploreStaticReportHtml(corpusDir: string, title: string): string {
  const source = new ExploreDashboardSource({ title, live: null, files: new ExploreCampaignFiles(corpusDir) });
  const snapshot = source.snapshot();
  const details: FailureDetail[] = (snapshot.explore?.findings ?? []).slice(0, DETAILS_EMBEDDED).flatMap((f) => {
    const d = source.failureDetail(f.id);
    return d ? [d] : [];
  });
  return pageHtml({ title, embedded: { snapshot, details, ...inlinedUplot() } });
}
