// Commands that show a sweep campaign from its store alone, while nothing runs: `ui` serves the
// dashboard read-only, `report -o DIR` writes it as a static HTML file. Both open the store
// read-only (never creating or migrating it) and take no lock.
import { existsSync } from "node:fs";
import type { Command } from "commander";
import { campaignPaths } from "../config/paths.ts";
import { ConfigError } from "../errors.ts";
import { EXIT } from "../exit-codes.ts";
import { refuseIfRemoteCampaign } from "../lock/campaign-lock.ts";
import { clientToken } from "../net/token.ts";
import { SweepDashboardSource } from "../report/dashboard-sweep.ts";
import { openStore } from "../store/db.ts";
import { staticReportHtml, writeStaticReport } from "../report/static-report.ts";
import { parseUiAddress } from "../ui/address.ts";
import { isLoopbackHost, startDashboard } from "../ui/server.ts";
import { action } from "./action.ts";
import { withSignalStop } from "./stop-signals.ts";

function storeOrRefuse(dbPath: string): void {
  if (!existsSync(dbPath)) {
    throw new ConfigError(`no sweep store at ${dbPath}: nothing was swept here yet. Run 'fuzzfleet run', or point --config / --db at a campaign`);
  }
}

export function registerUiCommands(program: Command): void {
  program
    .command("ui")
    .description("serve the dashboard read-only for this campaign's store, while nothing runs (Ctrl-C stops it)")
    .option("--listen <[host:]port>", "where to listen (a bare port is 127.0.0.1; 0 = a free port)", "127.0.0.1:8080")
    .option("--token <t>", "off loopback: the campaign token (default: $FUZZFLEET_TOKEN, else <out>/fuzzfleet.token)")
    .action(
      action<{ listen: string; token?: string }>(async (o) => {
        const address = parseUiAddress(o.listen, "--listen");
        const paths = campaignPaths(o);
        refuseIfRemoteCampaign(paths.outDir, "ui");
        storeOrRefuse(paths.dbPath);
        const token = isLoopbackHost(address.host) ? null : clientToken({ flag: o.token, env: process.env, outDir: paths.outDir });
        const db = openStore(paths.dbPath, { readonly: true });
        try {
          const source = new SweepDashboardSource({ db, outDir: paths.outDir, title: `fuzzfleet — ${paths.configPath.replace(/\/[^/]*$/, "")}`, live: null });
          const server = await startDashboard({ host: address.host, port: address.port, source, token, log: (line) => process.stderr.write(`fuzzfleet: ${line}\n`) });
          process.stdout.write(`dashboard (read-only): ${server.url}  (metrics: ${server.url}metrics); Ctrl-C stops it\n`);
          if (server.loginUrl) process.stdout.write(`  off loopback: open ${server.loginUrl} once to log this browser in\n`);
          await withSignalStop(({ signal }) => new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true })));
          await server.close();
          return EXIT.ok;
        } finally {
          db.close();
        }
      }),
    );

  program
    .command("report")
    .description("write the dashboard's page and plots as one static HTML file, from the store alone")
    .requiredOption("-o, --output <dir>", "directory to write index.html into (created if missing)")
    .action(
      action<{ output: string }>((o) => {
        const paths = campaignPaths(o);
        refuseIfRemoteCampaign(paths.outDir, "report");
        storeOrRefuse(paths.dbPath);
        const db = openStore(paths.dbPath, { readonly: true });
        try {
          const path = writeStaticReport(o.output, staticReportHtml(db, paths.outDir, `fuzzfleet report — ${paths.configPath.replace(/\/[^/]*$/, "")}`));
          process.stdout.write(`wrote ${path}\n`);
          return EXIT.ok;
        } finally {
          db.close();
        }
      }),
    );
}
