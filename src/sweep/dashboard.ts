// The dashboard of a running sweep (`run --ui`, and `coordinate --ui`): the sweep source over the
// session's store connection and engine, served where --ui says, and the banner lines that name
// it. Off loopback the campaign token guards it (created in <out> like a coordinator's).
import { hostname } from "node:os";
import type { SweepEngine } from "../engine/sweep-engine.ts";
import { serverToken } from "../net/token.ts";
import { SweepDashboardSource } from "../report/dashboard-sweep.ts";
import type { UiAddress } from "../ui/address.ts";
import { isLoopbackHost, startDashboard, type Dashboard } from "../ui/server.ts";
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
}

export async function serveSweepDashboard(o: SweepDashboardOptions): Promise<{ server: Dashboard; banner: string[] }> {
  const now = o.now ?? (() => performance.now());
  const loopback = isLoopbackHost(o.address.host);
  const token = loopback ? null : serverToken({ outDir: o.session.outDir, env: process.env }).token;
  const source = new SweepDashboardSource({
    db: o.session.db,
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
    },
  });
  const server = await startDashboard({ host: o.address.host, port: o.address.port, source, token, log: o.log });
  const banner = [`dashboard: ${server.url}  (metrics: ${server.url}metrics)`];
  if (server.loginUrl) banner.push(`  off loopback: open ${server.loginUrl} once to log this browser in (scrapers send Authorization: Bearer <campaign token>)`);
  return { server, banner };
}
