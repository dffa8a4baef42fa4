// A sweep coordinator in-process, for tests that talk to it over 127.0.0.1: a real session (lock,
// SQLite store, generation, lanes) of the bundled planted generator, the SweepEngine and its
// CommitQueue as the session runner builds them, and the SweepWorkerProtocol serving it. No generator ever runs: the
// workers are doubles that report what they were given.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { CommitQueue } from "../../src/sweep/engine/commit-queue.ts";
import { SweepEngine, type EngineEvents, type EngineMark } from "../../src/sweep/engine/sweep-engine.ts";
import { SweepWorkerProtocol } from "../../src/sweep/fleet/worker-protocol.ts";
import type { ReadService } from "../../src/net/worker-server.ts";
import { closeSweepSession, openSweepSession, type SweepSession } from "../../src/sweep/session/session.ts";
import { Campaign, type CampaignOptions } from "../helpers/campaign.ts";

export interface ServedSweep {
  campaign: Campaign;
  session: SweepSession;
  engine: SweepEngine;
  books: CommitQueue<EngineMark>;
  protocol: SweepWorkerProtocol;
  nonce: { path: string; value: string };
  close(): Promise<void>;
}

export const READ: ReadService = { status: () => ({ type: "text", text: "status\n" }), failures: () => ({ type: "text", text: "failures\n" }) };

export async function servedSweep(o: {
  token: string;
  log: (line: string) => void;
  drainGraceSeconds?: number;
  budgetSeconds?: number;
  leaseSeconds?: number;
  campaign?: CampaignOptions;
}): Promise<ServedSweep> {
  const campaign = new Campaign(o.campaign);
  const session = await openSweepSession({
    paths: { configPath: campaign.configPath, dbPath: campaign.dbPath, outDir: campaign.outDir },
    command: "coordinate",
    requestedSeconds: 3600,
    laneNames: [],
    allowStaleApp: false,
    forceUnlock: false,
    confirm: async () => true,
    log: () => {},
  });
  const nonce = { path: join(session.outDir, "tmp", "nonce"), value: "sweep-nonce" };
  writeFileSync(nonce.path, `${nonce.value}\n`);
  const quiet = new Proxy({}, { get: () => () => undefined }) as EngineEvents;
  const engine = new SweepEngine({
    store: session.store,
    config: session.config,
    outDir: session.outDir,
    generationId: session.generationId,
    genHash: session.genHash,
    sessionId: session.sessionId,
    appBuild: session.appBuild,
    lanes: session.lanes,
    transport: "distributed",
    now: () => performance.now(),
    deadlineMs: performance.now() + (o.budgetSeconds ?? 3600) * 1000,
    events: quiet,
  });
  const books: CommitQueue<EngineMark> = new CommitQueue(session.store, engine, {
    giveUpMs: session.config.store.giveUpSeconds * 1000,
    now: () => performance.now(),
    log: o.log,
    path: campaign.dbPath,
    onFail: () => protocol.storeFailed(),
    durability: session.durability,
  });
  const protocol = new SweepWorkerProtocol({
    session,
    engine,
    books,
    token: o.token,
    leaseSeconds: o.leaseSeconds ?? 60,
    heartbeatSeconds: 5,
    drainGraceSeconds: o.drainGraceSeconds ?? 3600,
    stopGraceSeconds: 30,
    nonce,
    now: () => performance.now(),
    read: READ,
    log: o.log,
  });
  return {
    campaign,
    session,
    engine,
    books,
    protocol,
    nonce,
    async close() {
      protocol.close();
      books.close();
      await closeSweepSession(session, "interrupted");
      campaign.cleanup();
    },
  };
}
