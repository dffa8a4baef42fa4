// Serves a running explore master's dashboard where `explore --ui` says (loopback, or off loopback
// behind the campaign token, with the read-only scrape credential kept beside it), over the ExploreDashboardSource of dashboard.ts. Its own file, so the
// HTTP server and the page load only when a campaign serves them.
import { UsageError } from "../../errors.ts";
import { serverToken, type FoundToken } from "../../net/token.ts";
import type { UiAddress } from "../../ui/address.ts";
import { accessLines, isLoopbackHost, startDashboard, type Dashboard } from "../../ui/server.ts";
import { ExploreDashboardSource, type ExploreLive } from "../views/dashboard-source.ts";

export interface ExploreDashboardOptions {
  address: UiAddress;
  live: ExploreLive;
  /** The campaign token if the master has one (with --port, --masters, --join); off loopback one is made if not. */
  found: FoundToken | null;
  /** <corpus>/.fuzzfleet: where a token made for the dashboard is kept. */
  stateDir: string;
  log: (line: string) => void;
}

export interface ServedExploreDashboard {
  server: Dashboard;
  banner: string[];
  /** A token file this call created (off loopback, no token yet): the command removes it after a clean end like its own. */
  tokenFile: string | null;
  close(): Promise<void>;
}

/** Serves a running master's dashboard where --ui says; the banner lines name it. */
export async function serveExploreDashboard(o: ExploreDashboardOptions): Promise<ServedExploreDashboard> {
  const loopback = isLoopbackHost(o.address.host);
  let token: string | null = null;
  let tokenFile: string | null = null;
  if (!loopback) {
    if (o.found) token = o.found.token;
    else {
      const made = serverToken({ env: process.env, outDir: o.stateDir });
      token = made.token;
      tokenFile = made.file;
    }
    if (!token) throw new UsageError(`--ui ${o.address.host}:${o.address.port} is off loopback and needs the campaign token; pass --token or FUZZFLEET_TOKEN`);
  }
  const source = new ExploreDashboardSource({ title: `fuzzfleet explore — ${o.live.corpusDir}`, live: o.live, files: null });
  source.sample();
  const timer = setInterval(() => source.sample(), 1000);
  timer.unref();
  const server = await startDashboard({ host: o.address.host, port: o.address.port, source, token, scrapeTokenDir: o.stateDir, log: o.log });
  const banner = [`dashboard: ${server.url}  (metrics: ${server.url}metrics)`, ...accessLines(server)];
  return {
    server,
    banner,
    tokenFile,
    close: async () => {
      clearInterval(timer);
      await server.close();
    },
  };
}
