// The dashboard of a running sweep (`run --ui`, and `coordinate --ui`): the sweep source over the
// session's store and engine, served where --ui says, and the banner lines that name
// it. Off loopback the campaign token guards it (created in <out> like a coordinator's), and the
// read-only scrape credential is kept beside it while the dashboard serves.
import { hostname } from "node:os";
import type { SweepEngine } from "../engine/sweep-engine.ts";
import { serverToken } from "../../net/token.ts";
import { SweepDashboardSource } from "../views/dashboard-source.ts";
import type { UiAddress } from "../../ui/address.ts";
import { accessLines, isLoopbackHost, startDashboard, type Dashboard } from "../../ui/server.ts";
import type { SweepSession } from "./session.ts";

export interface SweepDashboardOptions {
  address: UiAddress;
  session: SweepSession;
  engine: SweepEngine;
  budgetSeconds: number;
  /** The engine's monotonic clock (ms); performance.now() unless a test says otherwise. */
  now?: () => number;
  startMs: number;
  log: (line: string) => void;
  /** Failure entries a running chunk has written so far, where this host sees them (run's chunks). */
  chunkFinds?: (f: { scratchDir: string }) => number | null;
}

export async function serveSweepDashboard(o: SweepDashboardOptions): Promise<{ server: Dashboard; banner: string[] }> {
  const now = o.now ?? (() => performance.now());
  const loopback = isLoopbackHost(o.address.host);
  const found = loopback ? null : serverToken({ outDir: o.session.outDir, env: process.env });
  const source = new SweepDashboardSource({
    store: o.session.store,
    outDir: o.session.outDir,
    leaseSeconds: o.session.config.distributed.leaseSeconds,
    title: `fuzzfleet — ${o.session.config.dir}`,
    live: {
      sessionId: o.session.sessionId,
      host: hostname(),
      budgetSeconds: o.budgetSeconds,
      now,
      elapsedSeconds: () => (now() - o.startMs) / 1000,
      engine: o.engine,
      chunkFinds: o.chunkFinds,
    },
  });
  const server = await startDashboard({ host: o.address.host, port: o.address.port, source, token: found?.token ?? null, scrapeTokenDir: o.session.outDir, log: o.log });
  const banner = [`dashboard: ${server.url}  (metrics: ${server.url}metrics)`, ...accessLines(server)];
  return { server, banner };
}
