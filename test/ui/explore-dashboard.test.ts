// The explore dashboard against a real running master: an ExploreMaster over the maze's seeds,
// driven by its MasterLoop with two local slots running the maze target, served by
// serveExploreDashboard. The snapshot shows the frontier moving, the treasure's crash as a finding
// and the idle window counting down; /metrics is strict text format and, once the campaign is
// over, agrees with the master's counters, the lease records and the findings store; headless
// Chromium loads the page with no console error, shows the frontier and the finding, and sees a
// value change over Server-Sent Events.
import { launchChromium } from "../helpers/browser.ts";
import assert from "node:assert/strict";
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { after, before, describe, test } from "node:test";
import { serveExploreDashboard, type ServedExploreDashboard } from "../../src/explore/command/serve-dashboard.ts";
import { MasterLoop } from "../../src/explore/command/master-loop.ts";
import { DEFAULT_BUDGETS } from "../../src/explore/defaults.ts";
import { IdleWindow, type EndReason } from "../../src/explore/fleet/endings.ts";
import { LeaseTable } from "../../src/explore/state/lease-table.ts";
import type { DashboardSnapshot } from "../../src/ui/source.ts";
import { loneMaster, MAZE, MAZE_SEEDS } from "../helpers/explore.ts";
import { scratchDirs } from "../helpers/scratch.ts";
import { parseExposition } from "./exposition.ts";
import { get } from "./serve.ts";

const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const MAX_IDLE_MS = 3000;

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("the explore dashboard on a running master", () => {
  const { freshDir } = scratchDirs("explore-ui");
  let dir: string;
  let corpusDir: string;
  let leases: LeaseTable;
  let master: ReturnType<typeof loneMaster>;
  let served: ServedExploreDashboard;
  let running: Promise<EndReason>;
  const ac = new AbortController();
  const depthBefore = process.env.MAZE_DEPTH;
  let target: string[];

  before(async () => {
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is not installed: apt-get install -y chromium (.ci/run does)`);
    // A shallower maze: a few seconds of exploration, long enough to be watched.
    process.env.MAZE_DEPTH = "6";
    dir = freshDir();
    // The maze exits 134 at the treasure; a finding is a run a signal ended, so the wrapper aborts.
    const wrapper = join(dir, "maze.sh");
    writeFileSync(wrapper, `#!/bin/sh\n"${process.execPath}" "${MAZE}" "$1"\nrc=$?\nif [ $rc -ge 128 ]; then echo "maze: the treasure" >&2; kill -ABRT $$; fi\nexit $rc\n`);
    chmodSync(wrapper, 0o755);
    target = [wrapper, "@@"];
    const inputDir = join(dir, "seeds");
    cpSync(MAZE_SEEDS, inputDir, { recursive: true });
    corpusDir = join(dir, "corpus");
    mkdirSync(corpusDir);
    leases = new LeaseTable({ root: join(dir, "leases"), durability: "fence" });
    master = loneMaster({ dir, corpusDir, inputDir }, { leases });
    const now = () => performance.now();
    const startMs = now();
    const loop = new MasterLoop({
      master,
      local: { slots: 2, corpusDir, target, targetCwd: dir, simulate: false, budgets: DEFAULT_BUDGETS, scratchDir: join(dir, "scratch") },
      signal: ac.signal,
      timeoutSeconds: 5,
      wallTimeoutSeconds: 0,
      leaseTtlMs: 60_000,
      stopGraceSeconds: 1,
      multiMaster: false,
      now,
      log: () => {},
    });
    const ending = new IdleWindow(master, MAX_IDLE_MS, () => {});
    served = await serveExploreDashboard({
      address: { host: "127.0.0.1", port: 0 },
      live: {
        master,
        leases,
        corpusDir,
        target,
        epoch: "e".repeat(64),
        rank: 0,
        ranks: [0],
        role: "single",
        ending: () => ending,
        slots: 2,
        remote: () => null,
        maxIdleSeconds: MAX_IDLE_MS / 1000,
        wallTimeoutSeconds: 0,
        leaseTtlMs: 60_000,
        heartbeatSeconds: 5,
        now,
        startMs,
      },
      found: null,
      stateDir: join(corpusDir, ".fuzzfleet"),
      log: (line) => console.log(`# ${line}`),
    });
    assert.deepEqual(served.banner, [`dashboard: ${served.server.url}  (metrics: ${served.server.url}metrics)`]);
    master.admitInputs();
    running = loop.run(null, ending).then(async (end) => {
      await loop.shutdown(null, end);
      return end;
    });
  });

  after(async () => {
    ac.abort();
    await running;
    await served?.close();
    master?.close();
    if (depthBefore === undefined) delete process.env.MAZE_DEPTH;
    else process.env.MAZE_DEPTH = depthBefore;
  });

  const snapshot = async (): Promise<DashboardSnapshot> => JSON.parse((await get(served.server.url + "snapshot.json")).body) as DashboardSnapshot;

  test("the page loads in Chromium with no console error, shows the frontier and a finding, and moves over SSE", async () => {
    const { context, profile, close } = await launchChromium(CHROMIUM, CHROMIUM_ARGS);
    const problems: string[] = [];
    try {
      const page = await context.newPage();
      page.on("console", (m) => {
        if (m.type() === "error") problems.push(`console: ${m.text()}`);
      });
      page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
      page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()}`));
      await page.goto(served.server.url);
      await page.waitForSelector("body[data-kind=explore]");
      assert.equal(await page.isVisible("#lanes"), false, "the sweep's sections are hidden");
      const frontier = await page.textContent("#frontier .frontier-text");
      assert.match(frontier!, /^pending \d+ · running \d+ · leased \d+ · committing \d+ · expired \d+ · done \d+/);
      // A value moves over SSE while the campaign runs: the totals line (executions, generated…).
      const totals = await page.textContent("#explore-totals .explore-totals-text");
      await page.waitForFunction((before) => document.querySelector("#explore-totals .explore-totals-text")!.textContent !== before, totals, { timeout: 15_000 });
      await page.waitForSelector("#findings tbody tr[data-id]", { timeout: 60_000 });
      assert.match((await page.textContent("#findings tbody tr[data-id] td:nth-child(3)"))!, /^crash$/, "the treasure crashes the maze");
      await page.click("#findings tbody tr[data-id]");
      await page.waitForFunction(() => /repro: .*maze\.sh /.test(document.getElementById("detail")!.textContent ?? ""), null, { timeout: 5000 });
      assert.match((await page.textContent("#detail"))!, /the end of its output:/);
      assert.match((await page.textContent('#workers .worker[data-worker="local-0"]'))!, /local-0 alive/);
      assert.match((await page.textContent('#masters .master[data-rank="0"]'))!, /this one/);
      assert.ok(await page.$("#exec-chart canvas"), "the executions/s plot is drawn");
      assert.ok(await page.$("#growth-chart canvas"), "the growth plot is drawn");
      const shot = join(profile, "explore-dashboard.png");
      await page.screenshot({ path: shot, fullPage: true });
      assert.ok(statSync(shot).size > 10_000, "the screenshot holds a rendered page");
      assert.deepEqual(problems, []);
    } finally {
      await close();
    }
  });

  test("the snapshot shows the frontier, the finding and the idle window counting down", async () => {
    const busy = await until("tasks on the frontier", async () => {
      const s = await snapshot();
      return s.explore!.frontier.done > 0 || s.explore!.totals.executions > 0 ? s : undefined;
    });
    assert.equal(busy.kind, "explore");
    assert.equal(busy.live, true);
    assert.equal(busy.sweep, null);
    assert.equal(busy.workers!.length, 2, "two local slots");
    const first = await until("the idle window", async () => {
      const s = await snapshot();
      return s.explore!.idle?.remainingSeconds !== null && s.explore!.idle?.remainingSeconds !== undefined ? s : undefined;
    });
    const left = first.explore!.idle!.remainingSeconds!;
    assert.ok(left <= MAX_IDLE_MS / 1000 && left >= 0, `${left}s left of ${MAX_IDLE_MS / 1000}s`);
    assert.match(first.explore!.masters[0]!.phase, /^idle window: ends in /);
    assert.equal(first.explore!.frontier.pending, 0);
    assert.equal(first.explore!.frontier.running, 0);
    // The countdown moves: a later snapshot, still in the window, shows less time left.
    const later = await until("the countdown to move", async () => {
      const r = (await snapshot()).explore!.idle?.remainingSeconds;
      return r !== null && r !== undefined && r < left ? r : undefined;
    });
    assert.ok(later >= 0 && later < left, `the countdown moves: ${left} -> ${later}`);
    assert.equal(await running, "idle", "the frontier was exhausted");
  });

  test("after the end, /metrics agrees with the master, the lease records and the findings store", async () => {
    await running;
    const counts = leases.counts(Date.now(), 60_000);
    // The lease counts are read from disk every few seconds: wait for the reading after the end.
    const fams = await until("/metrics to count the lease records as they ended", async () => {
      const r = await get(served.server.url + "metrics");
      assert.equal(r.status, 200);
      const f = parseExposition(r.body);
      const done = f.get("fuzzfleet_explore_frontier_tasks")?.samples.find((x) => x.labels.state === "done")?.value;
      return done === counts.done ? f : undefined;
    });
    const v = (name: string, labels: Record<string, string> = {}) =>
      fams.get(name)?.samples.find((s) => JSON.stringify(Object.entries(s.labels).sort()) === JSON.stringify(Object.entries(labels).sort()))?.value;
    const c = master.counters;
    assert.ok(c.observations > 10, `the maze was explored (${c.observations} executions)`);
    assert.equal(v("fuzzfleet_explore_executions_total", { master: "0" }), c.observations);
    assert.equal(v("fuzzfleet_explore_generated_inputs_total", { master: "0" }), c.generated);
    assert.equal(v("fuzzfleet_explore_unique_inputs_total", { master: "0" }), c.claimedChildren);
    assert.equal(v("fuzzfleet_explore_frontier_tasks", { state: "done" }), counts.done);
    assert.equal(v("fuzzfleet_explore_frontier_tasks", { state: "leased" }), 0);
    assert.equal(v("fuzzfleet_explore_frontier_tasks", { state: "pending" }), 0);
    const findings = readdirSync(join(corpusDir, ".fuzzfleet", "findings")).filter((n) => n.endsWith(".json")).length;
    assert.ok(findings >= 1);
    assert.equal((v("fuzzfleet_explore_findings", { kind: "crash" }) ?? NaN) + (v("fuzzfleet_explore_findings", { kind: "hang" }) ?? NaN), findings);
    assert.equal(v("fuzzfleet_explore_corpus_inputs"), readdirSync(corpusDir).filter((n) => /^[0-9a-f]{64}$/.test(n)).length);
    assert.equal(v("fuzzfleet_up"), 1);
    assert.equal(fams.get("fuzzfleet_explore_executions_total")!.type, "counter");
  });
});
