// The explore dashboard and /metrics say how each remote worker's files reach the campaign: a
// real `fuzzfleet worker` in a mount namespace of its own (the campaign hidden under a tmpfs),
// with its own copy of the target, joins a master with no local slot; while it works the
// dashboard's row says "transfer" and "files over the connection", and fuzzfleet_worker_files
// labels it so. Needs root (unshare, mount), as CI runs.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
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
import { parseExposition } from "../ui/exposition.ts";
import { get } from "../ui/serve.ts";

const TOKEN = "explore-no-shared-dashboard-token-1";

test("a worker without the shared directory is shown as such on the explore dashboard and in fuzzfleet_worker_files", async () => {
  const { scratch, freshDir } = scratchDirs("explore-no-shared-ui");
  const dir = freshDir();
  const inputDir = join(dir, "seeds");
  cpSync(MAZE_SEEDS, inputDir, { recursive: true });
  const corpusDir = join(dir, "corpus");
  mkdirSync(corpusDir);
  const target = join(dir, "maze.sh");
  const own = mkdtempSync(join("/var/tmp", "fuzzfleet-own-"));
  // Each run takes a little while, so the worker is seen holding a task.
  writeFileSync(target, `#!/bin/sh\nMAZE_DEPTH=4 MAZE_COST_MS=150 exec "${process.execPath}" "${MAZE}" "$1"\n`);
  chmodSync(target, 0o755);
  copyFileSync(target, join(own, "maze.sh"));
  const leases = new LeaseTable({ root: join(dir, "leases"), durability: "fence" });
  // The build the worker will see too: it refuses to serve a master that runs another.
  const build = targetIdentity({ argv: ["./maze.sh", "@@"], cwd: dir, files: [], path: process.env.PATH, simulate: false }).build;
  const master = loneMaster({ dir, corpusDir, inputDir }, { leases, leaseTtlMs: 20_000, build });
  const now = () => performance.now();
  const startMs = now();
  const ac = new AbortController();
  const loop = new MasterLoop({
    master,
    local: { slots: 0, corpusDir, target: ["./maze.sh", "@@"], targetCwd: dir, simulate: false, budgets: DEFAULT_BUDGETS, scratchDir: join(dir, "scratch") },
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
    setup: { corpusDir, target: ["./maze.sh", "@@"], targetCwd: dir, targetBuild: build, targetFiles: [], simulate: false, budgets: DEFAULT_BUDGETS },
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
      target: ["./maze.sh", "@@"],
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
  const worker = spawn(
    "unshare",
    ["-m", "sh", "-c", 'mount -t tmpfs fuzzfleet-hidden "$1" && cd "$2" && shift 2 && exec "$@"', "sh", dirname(scratch), own, process.execPath, CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", TOKEN, "-j", "1"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
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
    assert.equal(seen.files, "transfer", "the row says the worker's files travel over the connection");
    assert.match(seen.note!, /^-j 1, \d+ task\(s\) so far, files over the connection$/);
    const fams = parseExposition((await get(`${served.server.url}metrics`)).body);
    assert.deepEqual(fams.get("fuzzfleet_worker_files")!.samples, [{ labels: { worker: seen.label, files: "transfer" }, value: 1 }]);
    const end = await running;
    assert.equal(end, "idle");
    await loop.shutdown(remote, end);
    assert.equal(await workerDone, 0, wout);
    assert.match(wout, /no shared directory \(nonce: ENOENT\): runs in its own, files sent over the connection/);
    assert.ok(master.counters.observations > 5, `the worker ran the maze over the connection (${master.counters.observations} executions)`);
  } finally {
    ac.abort();
    worker.kill("SIGKILL");
    remote.server.close();
    await served.close();
    master.close();
    removeNonce(nonce);
    rmSync(own, { recursive: true, force: true });
  }
});
