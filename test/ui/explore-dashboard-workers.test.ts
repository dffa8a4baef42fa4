// The explore dashboard's workers: a master with no local slot serves its port in-process, a real
// `fuzzfleet worker` joins and runs the maze's tasks. While it works the dashboard shows it alive,
// heard from moments ago and holding its tasks, and /metrics counts it; once the campaign is over
// and the worker stopped, it is shown as left.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { test } from "node:test";
import { serveExploreDashboard } from "../../src/explore/command/serve-dashboard.ts";
import { MasterLoop } from "../../src/explore/command/master-loop.ts";
import { DEFAULT_BUDGETS } from "../../src/explore/defaults.ts";
import { IdleWindow } from "../../src/explore/fleet/endings.ts";
import { serveWorkers } from "../../src/explore/fleet/listen.ts";
import { LeaseTable } from "../../src/explore/state/lease-table.ts";
import { removeNonce, writeNonce } from "../../src/net/worker-service.ts";
import type { DashboardSnapshot } from "../../src/ui/source.ts";
import { CLI } from "../helpers/campaign.ts";
import { loneMaster, MAZE, MAZE_SEEDS } from "../helpers/explore.ts";
import { targetIdentity } from "../../src/explore/state/target-identity.ts";
import { scratchDirs } from "../helpers/scratch.ts";
import { parseExposition } from "./exposition.ts";
import { get } from "./serve.ts";

const TOKEN = "explore-dashboard-workers-token-1";

test("a remote worker: alive and holding its tasks while it works, left once it stopped", async () => {
  const { freshDir } = scratchDirs("explore-ui-workers");
  const dir = freshDir();
  const inputDir = join(dir, "seeds");
  cpSync(MAZE_SEEDS, inputDir, { recursive: true });
  const corpusDir = join(dir, "corpus");
  mkdirSync(corpusDir);
  const target = join(dir, "maze.sh");
  // Each run takes a little while, so the worker is seen holding a task.
  writeFileSync(target, `#!/bin/sh\nMAZE_DEPTH=4 MAZE_COST_MS=150 exec "${process.execPath}" "${MAZE}" "$1"\n`);
  chmodSync(target, 0o755);
  const leases = new LeaseTable({ root: join(dir, "leases"), durability: "fence" });
  // The build the worker will see too: it refuses to serve a master that runs another.
  const build = targetIdentity({ argv: [target, "@@"], cwd: dir, files: [], path: process.env.PATH, simulate: false }).build;
  const master = loneMaster({ dir, corpusDir, inputDir }, { leases, leaseTtlMs: 20_000, build });
  const now = () => performance.now();
  const startMs = now();
  const ac = new AbortController();
  const loop = new MasterLoop({
    master,
    local: { slots: 0, corpusDir, target: [target, "@@"], targetCwd: dir, simulate: false, budgets: DEFAULT_BUDGETS, scratchDir: join(dir, "scratch") },
    signal: ac.signal,
    timeoutSeconds: 5,
    wallTimeoutSeconds: 0,
    leaseTtlMs: 20_000,
    stopGraceSeconds: 10,
    multiMaster: false,
    now,
    log: () => {},
  });
  const nonce = writeNonce(join(dir, "nonce"));
  const { remote, port } = await serveWorkers({
    master,
    found: { token: TOKEN, source: "--token", file: null },
    nonce,
    setup: { corpusDir, target: [target, "@@"], targetCwd: dir, targetBuild: build, targetFiles: [], simulate: false, budgets: DEFAULT_BUDGETS },
    leaseTtlMs: 20_000,
    bind: "127.0.0.1",
    port: 0,
    now,
    log: () => {},
    onProgress: () => loop.wake(),
    onPeer: null,
  });
  const ending = new IdleWindow(master, 1000, () => {});
  const served = await serveExploreDashboard({
    address: { host: "127.0.0.1", port: 0 },
    live: {
      master,
      leases,
      corpusDir,
      target: [target, "@@"],
      epoch: "e".repeat(64),
      rank: 0,
      ranks: [0],
      role: "single",
      ending: () => ending,
      slots: 0,
      remote: () => ({ workers: remote.server.workers.values(), everyone: remote.server.everyone }),
      maxIdleSeconds: 1,
      wallTimeoutSeconds: 0,
      leaseTtlMs: 20_000,
      heartbeatSeconds: 5,
      now,
      startMs,
    },
    found: null,
    stateDir: join(corpusDir, ".fuzzfleet"),
    log: () => {},
  });
  const worker = spawn(process.execPath, [CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", TOKEN, "-j", "1"], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  let wout = "";
  worker.stdout!.setEncoding("utf8").on("data", (d: string) => (wout += d));
  worker.stderr!.setEncoding("utf8").on("data", (d: string) => (wout += d));
  const workerDone = new Promise<number | null>((resolve) => worker.on("close", (code) => resolve(code)));
  const snapshot = async () => JSON.parse((await get(`${served.server.url}snapshot.json`)).body) as DashboardSnapshot;
  try {
    master.admitInputs();
    const running = loop.run(remote, ending);
    let seen: NonNullable<DashboardSnapshot["workers"]>[number] | undefined;
    for (const end = Date.now() + 60_000; !seen; await new Promise((r) => setTimeout(r, 50))) {
      assert.ok(Date.now() < end, `the worker was never seen holding a task\n${wout}`);
      seen = (await snapshot()).workers?.find((w) => w.holding.length > 0);
    }
    assert.match(seen.label, /#1$/);
    assert.equal(seen.liveness, "alive");
    assert.ok(seen.lastHeartbeatSeconds !== null && seen.lastHeartbeatSeconds < 5, `heard from ${seen.lastHeartbeatSeconds}s ago`);
    assert.match(seen.holding[0]!.text, /^task \d+$/);
    assert.match(seen.note!, /^-j 1, \d+ task\(s\) so far/);
    const fams = parseExposition((await get(`${served.server.url}metrics`)).body);
    assert.deepEqual(fams.get("fuzzfleet_explore_workers")!.samples, [{ labels: { liveness: "alive" }, value: 1 }]);
    const end = await running;
    assert.equal(end, "idle");
    await loop.shutdown(remote, end);
    assert.equal(await workerDone, 0, wout);
    const after = await snapshot();
    assert.deepEqual(after.workers?.map((w) => [w.label, w.liveness, w.holding.length]), [[seen.label, "left", 0]]);
    assert.ok(master.counters.observations > 5, `the worker ran the maze (${master.counters.observations} executions)`);
  } finally {
    ac.abort();
    worker.kill("SIGKILL");
    remote.server.close();
    await served.close();
    master.close();
    removeNonce(nonce);
  }
});
