#!/usr/bin/env node
// dashboard: what the live dashboard costs a sweep. Rounds alternate, side by side:
//   A. `fuzzfleet run --for S` with no dashboard;
//   B. `fuzzfleet run --for S --ui 127.0.0.1:PORT` with N Server-Sent-Event clients connected for
//      the whole session (each takes the once-a-second snapshot, as an open page does) and
//      /metrics scraped every second.
// Each run sweeps a fresh campaign of the planted generator. Result: seeds/s of each (distinct
// seeds of complete chunks over the session's wall time, from its store) and the ratio B / A.
//
// With --kind explore the same A/B for an explore master: a lone master over the maze's seeds
// with --jobs local slots, run to the end of its frontier in a child process (this file again,
// with --explore-child), without and with its dashboard served, watched and scraped alike.
// Result: committed executions per second of the master's loop, and the ratio B / A.
//
// With --kind coordinate the same A/B for a distributed sweep: `fuzzfleet coordinate --for S` and
// two `fuzzfleet worker -j 1` on 127.0.0.1, without and with the coordinator's dashboard served,
// watched and scraped alike. Result: seeds/s of complete chunks over the session, and B / A.
//
// Runs against the compiled CLI: `npm run build && node bench/dashboard.mjs [--help]`.
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import Database from "better-sqlite3";
import { benchmarkMain, CLI, f1, f3, int, median, parseOptions, printTable, ROOT, sleep } from "./common.mjs";
import { campaignToml } from "./planted.mjs";

if (process.argv[2] === "--explore-child") {
  await exploreChild(process.argv[3], process.argv[4] === "ui", Number(process.argv[5]));
  process.exit(0);
}

const HELP = `usage: node bench/dashboard.mjs [options]

  --kind K            sweep (fuzzfleet run), coordinate (a coordinator and 2
                      loopback workers) or explore (a lone explore master)   default sweep
  --jobs J            explore: local slots                                   default 2
  --seconds S         each session's --for budget                            default 30
  --chunk-seconds C   target chunk length                                    default 5
  --clients N         SSE clients connected during B                         default 5
  --cost-ms M         PLANTED_COST_MS: ms of busy work per seed              default 2
  --rounds R          A/B pairs, run ABAB                                    default 2`;

const o = parseOptions(
  "dashboard",
  process.argv.slice(2),
  {
    seconds: { default: "30", number: { min: 10 } },
    "chunk-seconds": { default: "5", number: { min: 1 } },
    clients: { default: "5", number: { min: 0, integer: true } },
    "cost-ms": { default: "2", number: { min: 0.01 } },
    rounds: { default: "2", number: { min: 1, integer: true } },
    kind: { default: "sweep", choices: ["sweep", "coordinate", "explore"] },
    jobs: { default: "2", number: { min: 1, integer: true } },
  },
  HELP,
);

/** Watches a dashboard like `clients` open pages and a scraper, until `exited`. */
function watch(url, exited) {
  const w = { events: 0, scrapes: 0, requests: [] };
  for (let i = 0; i < o.clients; i++) {
    const req = request(url + "events", (res) => res.setEncoding("utf8").on("data", (d) => (w.events += d.split("event: snapshot").length - 1)));
    req.on("error", () => {});
    req.end();
    w.requests.push(req);
  }
  const scraper = setInterval(() => {
    const req = request(url + "metrics", (res) => {
      res.resume();
      w.scrapes++;
    });
    req.on("error", () => {});
    req.end();
  }, 1000);
  exited.then(() => {
    clearInterval(scraper);
    for (const r of w.requests) r.destroy();
  });
  return w;
}

/** The child of --kind explore: a lone master over the maze, to the end of its frontier; prints its banner and then one JSON line. */
async function exploreChild(dir, withUi, jobs) {
  const dist = (p) => import(join(ROOT, "dist", p));
  const [{ ExploreMaster }, { MasterLoop }, { IdleWindow }, { LeaseTable }, { DEFAULT_BUDGETS }, { serveExploreDashboard }] = await Promise.all([
    dist("explore/master/master.js"),
    dist("explore/command/master-loop.js"),
    dist("explore/fleet/endings.js"),
    dist("explore/state/lease-table.js"),
    dist("explore/defaults.js"),
    dist("explore/command/serve-dashboard.js"),
  ]);
  const inputDir = join(dir, "seeds");
  const corpusDir = join(dir, "corpus");
  cpSync(join(ROOT, "examples/maze/seeds"), inputDir, { recursive: true });
  mkdirSync(corpusDir);
  const target = [process.execPath, join(ROOT, "examples/maze/maze.mjs"), "@@"];
  const leases = new LeaseTable({ root: join(dir, "leases"), durability: "fence" });
  const epoch = "b".repeat(64);
  const master = new ExploreMaster({
    corpusDir, inputDir, stagingRoot: join(dir, "staging"), leases, epoch, rank: 0, ranks: [0], ownership: "rendezvous",
    budgets: DEFAULT_BUDGETS, timeoutSeconds: 30, leaseTtlMs: 120_000, wallNow: () => Date.now(), log: () => {},
  });
  const now = () => performance.now();
  const ending = new IdleWindow(master, 500, () => {});
  const loop = new MasterLoop({
    master, local: { slots: jobs, corpusDir, target, targetCwd: dir, simulate: false, budgets: DEFAULT_BUDGETS, scratchDir: join(dir, "scratch") },
    signal: new AbortController().signal, timeoutSeconds: 30, wallTimeoutSeconds: 0, leaseTtlMs: 120_000, stopGraceSeconds: 5, multiMaster: false, now, log: () => {},
  });
  const startMs = now();
  const served = withUi
    ? await serveExploreDashboard({
        address: { host: "127.0.0.1", port: 0 },
        live: { master, leases, corpusDir, target, epoch, rank: 0, ranks: [0], role: "single", ending: () => ending, slots: jobs, remote: () => null, maxIdleSeconds: 0.5, wallTimeoutSeconds: 0, leaseTtlMs: 120_000, heartbeatSeconds: 5, now, startMs },
        found: null, stateDir: join(corpusDir, ".fuzzfleet"), log: () => {},
      })
    : null;
  if (served) {
    console.log(`dashboard: ${served.server.url}`);
    await sleep(500); // the watchers connect before the campaign starts
  }
  const t0 = now();
  master.admitInputs();
  const end = await loop.run(null, ending);
  await loop.shutdown(null, end);
  const seconds = (now() - t0) / 1000 - 0.5; // the idle window is not work
  master.close();
  await served?.close();
  console.log(JSON.stringify({ executions: master.counters.observations, seconds, end }));
}

/** One explore campaign in a fresh directory, in a child process; with the dashboard, watched. */
async function exploreSession(dir, withUi) {
  mkdirSync(dir, { recursive: true });
  const child = spawn(process.execPath, [join(ROOT, "bench/dashboard.mjs"), "--explore-child", dir, withUi ? "ui" : "none", String(o.jobs)], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d) => (out += d));
  const exited = new Promise((resolve) => child.on("close", resolve));
  let w = { events: 0, scrapes: 0 };
  if (withUi) {
    while (!/dashboard: (http:\S+)/.test(out)) {
      if (child.exitCode !== null) throw new Error(`the explore child ended before its dashboard banner:\n${out}`);
      await sleep(20);
    }
    w = watch(/dashboard: (http:\S+)/.exec(out)[1], exited);
  }
  const code = await exited;
  if (code !== 0) throw new Error(`the explore child exited ${code}:\n${out}`);
  const r = JSON.parse(out.trim().split("\n").at(-1));
  if (r.end !== "idle") throw new Error(`the explore child ended ${r.end}, not with its frontier exhausted`);
  return { seeds: r.executions, wall: r.seconds, rate: r.executions / r.seconds, events: w.events, scrapes: w.scrapes };
}

/** One session in a fresh campaign; with `clients` > 0 the dashboard is served and watched. */
async function session(dir, withUi) {
  mkdirSync(dir, { recursive: true });
  const distributed = o.kind === "coordinate" ? "\n[distributed]\nport = 0\nbind = \"127.0.0.1\"\nlease_seconds = 120\ndrain_grace_minutes = 2\nstop_grace_seconds = 20\n" : "";
  writeFileSync(join(dir, "fuzzfleet.toml"), campaignToml({ title: "dashboard", jobs: 1, chunkSeconds: o.chunkSeconds, bootstrapSeeds: 100, tail: distributed }));
  const env = { ...process.env, PLANTED_COST_MS: String(o.costMs), FUZZFLEET_TOKEN: "dashboard-bench-token-0123456789" };
  const command = o.kind === "coordinate" ? ["coordinate", "--yes"] : ["run"];
  const args = [CLI, "--config", join(dir, "fuzzfleet.toml"), ...command, "--for", `${o.seconds}s`, ...(withUi ? ["--ui", "127.0.0.1:0"] : [])];
  const child = spawn(process.execPath, args, { cwd: dir, env, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d) => (out += d));
  const exited = new Promise((resolve) => child.on("close", resolve));
  const workers = [];
  if (o.kind === "coordinate") {
    while (!/listening on 127\.0\.0\.1:(\d+)/.test(out)) {
      if (child.exitCode !== null) throw new Error(`coordinate ended before listening:\n${out}`);
      await sleep(20);
    }
    const port = /listening on 127\.0\.0\.1:(\d+)/.exec(out)[1];
    for (let i = 0; i < 2; i++) {
      const wk = spawn(process.execPath, [CLI, "worker", "--master", `127.0.0.1:${port}`, "-j", "1"], { cwd: dir, env, stdio: "ignore" });
      workers.push(new Promise((resolve) => wk.on("close", resolve)));
    }
  }
  let w = { events: 0, scrapes: 0 };
  if (withUi) {
    while (!/dashboard: (http:\S+)/.test(out)) {
      if (child.exitCode !== null) throw new Error(`${command[0]} ended before its dashboard banner:\n${out}`);
      await sleep(20);
    }
    w = watch(/dashboard: (http:\S+)/.exec(out)[1], exited);
  }
  const code = await exited;
  const workerCodes = await Promise.all(workers);
  if (code !== 0 && code !== 1) throw new Error(`${command[0]} exited ${code}:\n${out}`);
  if (workerCodes.some((c) => c !== 0)) throw new Error(`a worker exited ${workerCodes.join(", ")}`);
  const db = new Database(join(dir, "fuzzfleet.db"), { readonly: true });
  try {
    const s = db.prepare("SELECT started_at, ended_at FROM session").get();
    const seeds = db.prepare("SELECT COALESCE(SUM(seed_to - seed_from + 1), 0) AS n FROM chunk WHERE status = 'complete'").get().n;
    const wall = (Date.parse(s.ended_at) - Date.parse(s.started_at)) / 1000;
    return { seeds, wall, rate: seeds / wall, events: w.events, scrapes: w.scrapes };
  } finally {
    db.close();
  }
}

benchmarkMain("dashboard", o, async (scratch) => {
  const a = [];
  const b = [];
  const run = o.kind === "explore" ? exploreSession : session;
  const unit = o.kind === "explore" ? "executions/s" : "seeds/s";
  for (let r = 0; r < o.rounds; r++) {
    a.push(await run(join(scratch, `a${r}`), false));
    b.push(await run(join(scratch, `b${r}`), true));
    console.log(`round ${r + 1}: without ${f1(a[r].rate)} ${unit}, with ${f1(b[r].rate)} ${unit} (${b[r].events} snapshots to ${o.clients} clients, ${b[r].scrapes} scrapes)`);
  }
  const ra = median(a.map((x) => x.rate));
  const rb = median(b.map((x) => x.rate));
  printTable([
    ["", `${unit} (median)`, o.kind === "explore" ? "executions" : "seeds", "snapshots received", "scrapes"],
    ["A: no dashboard", f1(ra), int(median(a.map((x) => x.seeds))), "-", "-"],
    [`B: dashboard, ${o.clients} SSE clients`, f1(rb), int(median(b.map((x) => x.seeds))), int(median(b.map((x) => x.events))), int(median(b.map((x) => x.scrapes)))],
  ]);
  console.log(`ratio B / A: ${f3(rb / ra)}`);
  return { a, b, ratio: rb / ra };
});
