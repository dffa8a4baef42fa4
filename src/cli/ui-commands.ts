// Commands that show a campaign while nothing runs: `ui` serves the dashboard read-only (a sweep
// from its store; an explore campaign, with --corpus, from the files beside its corpus),
// `report -o DIR` writes a sweep's as a static HTML file (with --corpus, an explore campaign's).
// They open the store read-only (never creating or migrating it) and take no lock; the one file
// `ui` writes is, off loopback, the read-only scrape credential beside the campaign's token file,
// removed again when it stops.
import { existsSync, lstatSync } from "node:fs";
import { resolve } from "node:path";
import type { Command } from "commander";
import { campaignPaths } from "../config/paths.ts";
import { ConfigError, UsageError } from "../errors.ts";
import type { DashboardSource } from "../ui/source.ts";
import { EXIT } from "../exit-codes.ts";
import { refuseIfRemoteCampaign } from "../lock/campaign-lock.ts";
import { clientToken } from "../net/token.ts";
import { tokenFileOption, tokenOption } from "./token-flags.ts";
import { ExploreDashboardSource } from "../explore/views/dashboard-source.ts";
import { stateDir } from "../explore/state/work-dir.ts";
import { SweepDashboardSource } from "../sweep/views/dashboard-source.ts";
import { ExploreCampaignFiles } from "../explore/views/campaign-files.ts";
import { openSweepStore } from "../store/sqlite/index.ts";
import { exploreStaticReportHtml, refuseNonExploreCorpus, refuseOutputInCorpus } from "../explore/views/static-report.ts";
import { staticReportHtml, writeStaticReport } from "../sweep/views/static-report.ts";
import { sweepKeptOut } from "../sweep/views/export.ts";
import { parseUiAddress } from "../ui/address.ts";
import { accessLines, isLoopbackHost, startDashboard } from "../ui/server.ts";
import { action } from "./action.ts";
import { withSignalStop } from "./stop-signals.ts";

function storeOrRefuse(dbPath: string): void {
  if (!existsSync(dbPath)) {
    throw new ConfigError(`no sweep store at ${dbPath}: nothing was swept here yet. Run 'fuzzfleet run', or point --config / --db at a campaign`);
  }
}

/** --corpus DIR: a real directory (never a link), the corpus of an explore campaign. */
function exploreCorpus(dir: string): string {
  const path = resolve(dir);
  let st;
  try {
    st = lstatSync(path);
  } catch {
    throw new UsageError(`--corpus ${dir}: no such directory; name the corpus directory an explore campaign wrote (its -o)`);
  }
  if (!st.isDirectory()) throw new UsageError(`--corpus ${dir} is not a directory${st.isSymbolicLink() ? " but a symbolic link, which is never followed; name the directory itself" : ""}`);
  return path;
}

export function registerUiCommands(program: Command): void {
  program
    .command("ui")
    .description("serve the dashboard read-only, while nothing runs: this sweep campaign's store, or with --corpus an explore campaign's files (Ctrl-C stops it)")
    .option("--listen <[host:]port>", "where to listen (a bare port is 127.0.0.1; 0 = a free port)", "127.0.0.1:8080")
    .addOption(tokenFileOption("off loopback: read the campaign token from this file (default: $FUZZFLEET_TOKEN, else <out>/fuzzfleet.token, or CORPUS_DIR/.fuzzfleet/fuzzfleet.token with --corpus)"))
    .addOption(tokenOption("off loopback: the campaign token itself"))
    .option("--corpus <corpus-dir>", "an explore campaign instead: read its corpus, findings, explored ledger and lease records (nothing is written)")
    .action(
      action<{ listen: string; token?: string; tokenFile?: string; corpus?: string }>(async (o) => {
        const address = parseUiAddress(o.listen, "--listen");
        const loopback = isLoopbackHost(address.host);
        let source: DashboardSource;
        let token: string | null = null;
        let tokenDir: string;
        let close = () => {};
        const tokenFrom = (outDir: string) => clientToken({ flag: o.token, file: o.tokenFile, env: process.env, outDir });
        if (o.corpus !== undefined) {
          const corpus = exploreCorpus(o.corpus);
          tokenDir = stateDir(corpus);
          if (!loopback) token = tokenFrom(tokenDir);
          source = new ExploreDashboardSource({ title: `fuzzfleet explore — ${corpus}`, live: null, files: new ExploreCampaignFiles(corpus) });
        } else {
          const paths = campaignPaths(o);
          refuseIfRemoteCampaign(paths.outDir, "ui");
          storeOrRefuse(paths.dbPath);
          tokenDir = paths.outDir;
          if (!loopback) token = tokenFrom(tokenDir);
          const store = openSweepStore(paths.dbPath, { readonly: true });
          close = () => store.close();
          source = new SweepDashboardSource({ store, outDir: paths.outDir, title: `fuzzfleet — ${paths.configPath.replace(/\/[^/]*$/, "")}`, live: null });
        }
        try {
          const server = await startDashboard({ host: address.host, port: address.port, source, token, scrapeTokenDir: tokenDir, log: (line) => process.stderr.write(`fuzzfleet: ${line}\n`) });
          const banner = [`dashboard (read-only): ${server.url}  (metrics: ${server.url}metrics); Ctrl-C stops it`, ...accessLines(server)];
          process.stdout.write(banner.map((line) => line + "\n").join(""));
          await withSignalStop(({ signal }) => new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true })));
          await server.close();
          return EXIT.ok;
        } finally {
          close();
        }
      }),
    );

  program
    .command("report")
    .description("write the dashboard's page and plots as one static HTML file: a sweep's from its store alone, or with --corpus an explore campaign's from its files")
    .requiredOption("-o, --output <dir>", "directory to write index.html into (created if missing; never inside the corpus)")
    .option("--corpus <corpus-dir>", "an explore campaign instead: read its corpus, findings, explored ledger and lease records (nothing is written there)")
    .action(
      action<{ output: string; corpus?: string }>((o) => {
        if (o.corpus !== undefined) {
          const corpus = exploreCorpus(o.corpus);
          refuseNonExploreCorpus(corpus);
          refuseOutputInCorpus(o.output, corpus);
          const path = writeStaticReport(o.output, exploreStaticReportHtml(corpus, `fuzzfleet explore report — ${corpus}`));
          process.stdout.write(`wrote ${path}\n`);
          return EXIT.ok;
        }
        const paths = campaignPaths(o);
        refuseIfRemoteCampaign(paths.outDir, "report");
        storeOrRefuse(paths.dbPath);
        const store = openSweepStore(paths.dbPath, { readonly: true });
        try {
          const keepOut = [...sweepKeptOut(paths.outDir), { dir: paths.dbPath, what: "the store" }];
          const path = writeStaticReport(o.output, staticReportHtml(store, paths.outDir, `fuzzfleet report — ${paths.configPath.replace(/\/[^/]*$/, "")}`), keepOut);
          process.stdout.write(`wrote ${path}\n`);
          return EXIT.ok;
        } finally {
          store.close();
        }
      }),
    );
}
