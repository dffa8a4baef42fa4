#!/usr/bin/env node
// live-scrape: what watching a live campaign costs the workers it serves. A real `fuzzfleet
// coordinate --ui` (the planted generator's campaign) serves 8 fake workers in this process: each
// speaks the real sweep protocol (handshake, want -> assign, then `done` after --pace-ms, as if it
// ran the chunk; its elapsed says 1,000 seeds/s, which keeps the chunks the same size) and times
// every done -> ack round trip. The run alternates windows without and
// with scrapers: 4 of them, each polling /metrics and /snapshot.json once a second (on loopback,
// which needs no credential), from a process of their own. Per kind of window it reports the ack p50/p99/max and the scrapes'
// own latency, and the coordinator's event-loop delay (a probe loaded into it samples
// monitorEventLoopDelay each second): the ack p99 moves with the machine's load as well, the loop
// delay says whether the scrapes themselves held the loop. The target is an ack p99 with
// scrapers within 1.1x of the p99 without.
// With --cpu-prof DIR the coordinator runs under Node's CPU profiler and the profile's top frames
// are printed (the event-loop cost of a scrape, if there is one to find).
//
// With --chunks N the campaign is an old one: a first `coordinate` makes its store, N complete
// chunks of its lane (a thousand seeds each) are forged into it, the store is set back to schema 2
// so that the coordinator's own migrations build the views' aggregates from the rows, and the
// measured coordinator continues that campaign.
//
//   npm run build && node bench/live-scrape.mjs [--workers 8] [--scrapers 4] [--window 20] [--rounds 2] [--chunks 150000]
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import Database from "better-sqlite3";
import { benchmarkMain, CLI, f1, f2, int, parseOptions, percentile, printCpuProfile, printTable, processCpuSeconds, sleep } from "./common.mjs";
import { fakeSweepWorker, loadSweepWire, newCampaign, startLoggedCoordinator, waitForLog } from "./sweep-fakes.mjs";

const TOKEN = "live-scrape-bench-token-0123456789abcdef";
const TARGET_RATIO = 1.1;
/** The rate a fake worker reports (its done's elapsed is the chunk's seeds at this rate), so that chunk sizes stay steady. */
const SEEDS_PER_SEC = 1000;

const HELP = `usage: node bench/live-scrape.mjs [options]

  --workers N         fake workers                                            default 8
  --scrapers N        scrapers in a window with scrapers                      default 4
  --scrape-ms MS      each scraper's period (one /metrics and one snapshot)   default 1000
  --pace-ms MS        how long a fake worker "runs" a chunk before its done   default 50
  --window S          seconds of each window                                  default 20
  --rounds N          pairs of windows (without, then with scrapers)          default 2
  --warmup S          seconds before the first window                         default 5
  --chunks N          complete chunks forged into the store first (an old campaign) default 0
  --cpu-prof DIR      run the coordinator under --cpu-prof, print its top frames`;

const o = parseOptions(
  "live-scrape",
  process.argv.slice(2),
  {
    workers: { default: "8", number: { min: 1, max: 64, integer: true } },
    scrapers: { default: "4", number: { min: 1, max: 64, integer: true } },
    "scrape-ms": { default: "1000", number: { min: 50, integer: true } },
    "pace-ms": { default: "50", number: { min: 0, integer: true } },
    window: { default: "20", number: { min: 2 } },
    rounds: { default: "2", number: { min: 1, integer: true } },
    warmup: { default: "5", number: { min: 0 } },
    chunks: { default: "0", number: { min: 0, integer: true } },
    "cpu-prof": { path: true },
  },
  HELP,
);

const wire = await loadSweepWire();

/** Which window is running: every sample is filed under it ("none" outside the windows). */
const clock = { kind: "none" };
const acks = { without: [], with: [] };
const scrapes = { metrics: [], snapshot: [], errors: [] };

/**
 * One fake worker (bench/sweep-fakes.mjs) that "runs" each chunk for --pace-ms, then sends its
 * done and times the done -> ack under the window it started in.
 */
function fakeWorker(port, index, stats) {
  return fakeSweepWorker(wire, port, {
    token: TOKEN,
    index,
    idlePollMs: 250,
    stats,
    runChunk: async (ch, done) => {
      mkdirSync(ch.scratch_dir, { recursive: true });
      if (o.paceMs > 0) await sleep(o.paceMs);
      const kind = clock.kind;
      const t = performance.now();
      const ack = await done((ch.seed_to - ch.seed_from + 1) / SEEDS_PER_SEC);
      if (kind !== "none" && kind === clock.kind) acks[kind].push(performance.now() - t);
      if (ack.note === "recorded") stats.completions++;
    },
  });
}

/**
 * The scrapers run in a process of their own, so that their HTTP work does not delay the fake
 * workers' round trips measured here: `count` of them, each GET /metrics then /snapshot.json
 * every `periodMs`, for `seconds`; then it prints every latency (ms) as JSON and exits.
 */
const SCRAPERS_SOURCE = `
const { request } = require("node:http");
const { performance } = require("node:perf_hooks");
const [base, count, periodMs, seconds] = process.argv.slice(1);
const out = { metrics: [], snapshot: [], errors: [] };
const end = performance.now() + Number(seconds) * 1000;
const get = (address) => new Promise((resolve, reject) => {
  const t = performance.now();
  request(address, { agent: false }, (res) => {
    res.resume();
    res.on("end", () => (res.statusCode === 200 ? resolve(performance.now() - t) : reject(new Error(address + ": " + res.statusCode))));
  }).on("error", reject).end();
});
async function scraper() {
  while (performance.now() < end) {
    const next = performance.now() + Number(periodMs);
    try {
      out.metrics.push(await get(base + "metrics"));
      out.snapshot.push(await get(base + "snapshot.json"));
    } catch (err) {
      out.errors.push(err.message);
    }
    await new Promise((r) => setTimeout(r, Math.max(0, next - performance.now())));
  }
}
Promise.all(Array.from({ length: Number(count) }, scraper)).then(() => process.stdout.write(JSON.stringify(out)));
`;

/** Loaded into the coordinator: its event loop's delay each second (p99, max, mean in ms), appended to the file named by LIVE_SCRAPE_PROBE. */
const PROBE_SOURCE = `"use strict";
const { appendFileSync } = require("node:fs");
const { monitorEventLoopDelay, performance } = require("node:perf_hooks");
const h = monitorEventLoopDelay({ resolution: 5 });
h.enable();
setInterval(() => {
  appendFileSync(process.env.LIVE_SCRAPE_PROBE, JSON.stringify({ at: performance.timeOrigin + performance.now(), p99: h.percentile(99) / 1e6, max: h.max / 1e6, mean: h.mean / 1e6 }) + "\\n");
  h.reset();
}, 1000).unref();
`;

function fetchText(address) {
  return new Promise((resolve, reject) => {
    request(address, { agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d) => (body += d));
      res.on("end", () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`${address}: ${res.statusCode}`))));
    })
      .on("error", reject)
      .end();
  });
}

/** Runs the scrapers for `seconds` in their own process; resolves with their latencies. */
function scrapeFor(base, seconds) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", SCRAPERS_SOURCE, base, String(o.scrapers), String(o.scrapeMs), String(seconds)], { stdio: ["ignore", "pipe", "inherit"] });
    let text = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (text += d));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`the scrapers exited ${code}`));
      const r = JSON.parse(text);
      scrapes.metrics.push(...r.metrics);
      scrapes.snapshot.push(...r.snapshot);
      scrapes.errors.push(...r.errors);
      resolve();
    });
  });
}

/** Tables and indexes of schema 2; what a newer schema added is dropped to make the store old again. */
const SCHEMA_2 = new Set([
  "meta", "generation", "lane", "session", "chunk", "worker", "worker_rate", "failure", "failure_seed", "minimize_unit", "minimize_find", "quarantine_reason",
  "lane_active", "chunk_lane", "failure_minimize", "failure_signature",
]);

/**
 * Forges `n` complete chunks of a thousand seeds into the current generation's first lane, ending
 * a minute ago at one every 0.6 s (a hundred workers' pace), moves its cursor past them, and sets
 * the store back to schema 2.
 */
function forgeHistory(path, n) {
  const db = new Database(path);
  try {
    db.pragma("synchronous = OFF");
    const gen = db.prepare("SELECT MAX(id) AS id FROM generation").get().id;
    const lane = db.prepare("SELECT id, cursor FROM lane WHERE generation_id = ? ORDER BY id LIMIT 1").get(gen);
    const session = db.prepare("SELECT MAX(id) AS id FROM session WHERE generation_id = ?").get(gen).id;
    if (db.prepare("SELECT COUNT(*) AS n FROM chunk WHERE lane_id = ?").get(lane.id).n > 0) throw new Error("the first coordinate booked chunks: nothing to forge behind them");
    const insert = db.prepare(
      `INSERT INTO chunk (session_id, lane_id, seed_from, seed_to, started_at, ended_at, seconds, status, clean, finds, quarantine, unshrunk)
       VALUES (?, ?, ?, ?, ?, ?, 600, 'complete', 1000, 0, 0, 0)`,
    );
    const iso = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
    const t0 = Date.now() - 60_000 - 600_000 - n * 600;
    db.transaction(() => {
      for (let i = 0; i < n; i++) {
        const from = lane.cursor + i * 1000;
        insert.run(session, lane.id, from, from + 999, iso(t0 + i * 600), iso(t0 + i * 600 + 600_000));
      }
      db.prepare("UPDATE lane SET cursor = ? WHERE id = ?").run(lane.cursor + n * 1000, lane.id);
    })();
    const added = db.prepare("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index') AND name NOT LIKE 'sqlite_%'").all().filter((r) => !SCHEMA_2.has(r.name));
    for (const r of added.filter((a) => a.type === "index")) db.exec(`DROP INDEX ${r.name}`);
    for (const r of added.filter((a) => a.type === "table")) db.exec(`DROP TABLE ${r.name}`);
    // Columns later migrations added to schema-2 tables (src/store/migrations.ts).
    for (const [table, column] of [["worker", "files"], ["failure", "last_app_build"]]) {
      if (db.prepare(`SELECT COUNT(*) AS n FROM pragma_table_info('${table}') WHERE name = ?`).get(column).n > 0) db.exec(`ALTER TABLE ${table} DROP COLUMN ${column}`);
    }
    db.pragma("user_version = 2");
  } finally {
    db.close();
  }
}

benchmarkMain("live-scrape", o, async (scratch) => {
  const { campaign, config, db } = newCampaign(scratch, { title: "live-scrape", jobs: 1, chunkSeconds: 1, bootstrapSeeds: 1000 });
  if (o.chunks > 0) {
    const firstLog = join(scratch, "first-coordinator.log");
    const first = startLoggedCoordinator(firstLog, [process.execPath, CLI, "--config", config, "coordinate", "--for", "1m", "--yes", "--token", TOKEN], { cwd: campaign, env: process.env });
    await waitForLog(firstLog, first, /listening on 127\.0\.0\.1:(\d+)/);
    first.child.kill("SIGINT");
    await first.done;
    const t = performance.now();
    forgeHistory(db, o.chunks);
    console.log(`  forged ${int(o.chunks)} complete chunks into the store in ${f1((performance.now() - t) / 1000)} s`);
  }
  const logPath = join(scratch, "coordinator.log");
  const prof = o.cpuProf ? ["--cpu-prof", "--cpu-prof-dir", o.cpuProf] : [];
  const probe = join(scratch, "loop-probe.cjs");
  const probeOut = join(scratch, "loop-probe.jsonl");
  writeFileSync(probe, PROBE_SOURCE);
  const argv = [process.execPath, ...prof, "--require", probe, CLI, "--config", config, "coordinate", "--for", "30m", "--yes", "--token", TOKEN, "--ui", "127.0.0.1:0"];
  const coord = startLoggedCoordinator(logPath, argv, { cwd: campaign, env: { ...process.env, LIVE_SCRAPE_PROBE: probeOut } });
  const windows = { without: [], with: [] };
  const epoch = () => performance.timeOrigin + performance.now();
  const port = Number((await waitForLog(logPath, coord, /listening on 127\.0\.0\.1:(\d+)/))[1]);
  const base = (await waitForLog(logPath, coord, /dashboard: (http:\/\/\S+\/)/))[1];
  const stats = { completions: 0, stopped: 0 };
  const workers = [];
  for (let i = 0; i < o.workers; i++) workers.push(fakeWorker(port, i, stats).catch((err) => ({ error: err })));
  await sleep(o.warmup * 1000);
  const cpu = { without: 0, with: 0 };
  const seconds = { without: 0, with: 0 };
  const completions = { without: 0, with: 0 };
  for (let r = 0; r < o.rounds; r++) {
    for (const kind of ["without", "with"]) {
      const c0 = processCpuSeconds(coord.pid);
      const n0 = stats.completions;
      const t0 = performance.now();
      const from = epoch();
      clock.kind = kind;
      if (kind === "with") await scrapeFor(base, o.window);
      else await sleep(o.window * 1000);
      clock.kind = "none";
      windows[kind].push([from, epoch()]);
      seconds[kind] += (performance.now() - t0) / 1000;
      cpu[kind] += processCpuSeconds(coord.pid) - c0;
      completions[kind] += stats.completions - n0;
      console.log(`  round ${r + 1}, ${kind} scrapers: ${int(acks[kind].length)} acks so far, p99 ${f1(percentile(acks[kind], 99))} ms`);
    }
  }
  // What the coordinator's views count: the forged history and what the fake workers added.
  const chunksComplete = JSON.parse(await fetchText(base + "snapshot.json")).sweep?.totals?.chunksComplete ?? null;
  coord.child.kill("SIGINT");
  const end = await coord.done;
  const outcomes = await Promise.all(workers);
  const failed = outcomes.filter((x) => x && x.error);
  const samples = readFileSync(probeOut, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
  // Each sample covers the second before it: those wholly inside a window of the kind.
  const loop = (kind) => samples.filter((x) => windows[kind].some(([a, b]) => x.at - 1000 >= a && x.at <= b));
  const row = (kind) => ({
    loopDelayP99Ms: percentile(loop(kind).map((x) => x.p99), 50),
    loopDelayMaxMs: Math.max(...loop(kind).map((x) => x.max)),
    acks: acks[kind].length,
    completionsPerSec: completions[kind] / seconds[kind],
    ackP50Ms: percentile(acks[kind], 50),
    ackP99Ms: percentile(acks[kind], 99),
    ackMaxMs: Math.max(...acks[kind]),
    coordinatorCpu: cpu[kind] / seconds[kind],
  });
  const result = {
    workers: o.workers,
    scrapers: o.scrapers,
    forgedChunks: o.chunks,
    chunksComplete,
    without: row("without"),
    with: row("with"),
    scrapeMetricsP50Ms: percentile(scrapes.metrics, 50),
    scrapeMetricsP99Ms: percentile(scrapes.metrics, 99),
    scrapeSnapshotP50Ms: percentile(scrapes.snapshot, 50),
    scrapeSnapshotP99Ms: percentile(scrapes.snapshot, 99),
    scrapeErrors: scrapes.errors.length,
    firstScrapeError: scrapes.errors[0] ?? null,
    coordinatorExit: end.code,
    workersStopped: stats.stopped,
    workerErrors: failed.map((f) => f.error.message),
  };
  result.p99Ratio = result.with.ackP99Ms / result.without.ackP99Ms;
  console.log(
    `\n${o.workers} fake workers (a chunk every ${o.paceMs} ms each)${o.chunks ? ` on a store of ${int(o.chunks)} forged chunks` : ""}, ${o.rounds} x ${o.window} s windows; with: ${o.scrapers} scrapers, /metrics + snapshot every ${o.scrapeMs} ms each`,
  );
  printTable([
    ["windows", "acks", "chunks/s", "ack p50 ms", "ack p99 ms", "ack max ms", "coordinator CPU", "loop delay p99 ms", "loop delay max ms"],
    ...["without", "with"].map((k) => [
      `${k} scrapers`, int(result[k].acks), f1(result[k].completionsPerSec), f2(result[k].ackP50Ms), f2(result[k].ackP99Ms), f1(result[k].ackMaxMs), `${f1(100 * result[k].coordinatorCpu)} %`,
      f1(result[k].loopDelayP99Ms), f1(result[k].loopDelayMaxMs),
    ]),
  ]);
  console.log(`complete chunks in the coordinator's snapshot at the end: ${chunksComplete === null ? "?" : int(chunksComplete)}`);
  console.log(`ack p99 with / without scrapers: ${f2(result.p99Ratio)} (target ≤ ${TARGET_RATIO}); scrapes: /metrics p50 ${f1(result.scrapeMetricsP50Ms)} ms, p99 ${f1(result.scrapeMetricsP99Ms)} ms; snapshot p50 ${f1(result.scrapeSnapshotP50Ms)} ms, p99 ${f1(result.scrapeSnapshotP99Ms)} ms`);
  if (end.code !== 0 || failed.length > 0 || stats.stopped !== o.workers || scrapes.errors.length > 0) {
    result.problem =
      `coordinator exit ${end.code ?? end.signal}, ${stats.stopped}/${o.workers} fake workers stopped${failed.length ? `; first worker error: ${failed[0].error.message}` : ""}` +
      (scrapes.errors.length ? `; ${scrapes.errors.length} scrape(s) failed, the first: ${scrapes.errors[0]}` : "");
    console.log(`PROBLEM: ${result.problem}\n${readFileSync(logPath, "utf8").split("\n").slice(-20).join("\n")}`);
  }
  if (o.cpuProf) result.profile = printCpuProfile(o.cpuProf, "coordinator CPU profile (whole run)", 30);
  return result;
});
