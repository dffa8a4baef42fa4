#!/usr/bin/env node
// long-campaign: what the views of a sweep cost as the campaign ages. For each size it forges a
// store of N complete chunks (two lanes, 1,000 seeds a chunk, one every 0.6 s, ten minutes each:
// a hundred workers' pace) and F failing seeds (hits of ~2,000 distinct failures, Zipf-like, plus
// pending finds), as a schema-2 store an older fuzzfleet left; then one writer's open migrates it
// (building the aggregates, timed), and it measures, against the compiled CLI:
//   status          wall time of `fuzzfleet status` (a whole process, Node's start included)
//   failures        wall time of `fuzzfleet failures --state all` (the first page)
//   report          wall time of `fuzzfleet report -o DIR`
//   snapshot        GET /snapshot.json of `fuzzfleet ui`, median of requests spaced past its cache
//   metrics         GET /metrics of the same, spaced past its one-second cache (a fresh snapshot each)
//   ui RSS          the ui process's peak resident set after those requests
// and each figure's growth from the smallest size to the largest (the goal is flat).
//
// The explore rows do the same for an explore campaign's files: for each size a finished
// campaign's corpus of N objects (hard links to a few empty files: the views never read them),
// its explored ledger (N lines), 10,000 findings under 500 signatures and its growth history, and
// it measures `report --corpus -o` (wall), GET /snapshot.json and /metrics of `ui --corpus`, ui's
// RSS, and the CPU of the snapshot, /metrics and the report in one process, each from a fresh read.
//
//   npm run build && node bench/long-campaign.mjs [--sizes 10000,100000,1000000] [--failing 100000]
//                                                 [--explore 10000,100000,1000000] [--findings 10000] [--only sweep|explore]
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { closeSync, linkSync, mkdirSync, openSync, writeFileSync, writeSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import Database from "better-sqlite3";
import { benchmarkMain, CLI, f1, f2, int, median, parseOptions, peakRssMb, printTable, ROOT, sleep, startProcess } from "./common.mjs";

const HELP = `usage: node bench/long-campaign.mjs [options]

  --sizes N,N,...     complete chunks of each store                   default 10000,100000,1000000
  --failing F         failing seeds (hits) of each store              default 100000
  --requests R        HTTP requests of each kind against ui          default 5
  --explore N,N,...   corpus objects of each explore campaign         default 10000,100000,1000000
  --findings F        findings of each explore campaign               default 10000
  --only KIND         sweep or explore: only those rows               default both`;

const o = parseOptions(
  "long-campaign",
  process.argv.slice(2),
  {
    sizes: { default: "10000,100000,1000000", number: { min: 100, integer: true }, list: true },
    failing: { default: "100000", number: { min: 0, integer: true } },
    requests: { default: "5", number: { min: 1, integer: true } },
    explore: { default: "10000,100000,1000000", number: { min: 100, integer: true }, list: true },
    findings: { default: "10000", number: { min: 600, integer: true } },
    only: { default: "both", choices: ["both", "sweep", "explore"] },
  },
  HELP,
);

const dist = (path) => import(join(ROOT, "dist", ...path.split("/")));
const { openStore } = await dist("store/db.js");
const { openSweepStore } = await dist("store/sqlite/index.js");
const { statusData } = await dist("sweep/views/status.js");
const { failuresData } = await dist("sweep/views/failures.js");
const { staticReportHtml } = await dist("sweep/views/static-report.js");
const { SweepDashboardSource } = await dist("sweep/views/dashboard-source.js");
const { writeMetrics } = await dist("ui/metrics.js");
const { ExploreCampaignFiles } = await dist("explore/views/campaign-files.js");
const { ExploreDashboardSource } = await dist("explore/views/dashboard-source.js");
const { exploreStaticReportHtml } = await dist("explore/views/static-report.js");

/**
 * The same views in this process, on a read-only store: CPU ms of each (user + system, median of
 * `n`), which a loaded machine does not inflate as it does wall time. Snapshot and metrics are what
 * one scrape or one page update costs a live campaign's event loop.
 */
function inProcess(path, dir, n) {
  const store = openSweepStore(path, { readonly: true });
  try {
    const cpu = (fn) => {
      const runs = [];
      for (let i = 0; i < n; i++) {
        const c = process.cpuUsage();
        fn();
        const u = process.cpuUsage(c);
        runs.push((u.user + u.system) / 1000);
      }
      return median(runs);
    };
    const source = () => new SweepDashboardSource({ store, outDir: dir, title: "bench", live: null });
    return {
      statusCpuMs: cpu(() => statusData(store, { genHashNow: null, appBuildNow: null, outDir: dir })),
      failuresCpuMs: cpu(() => failuresData(store, dir, { state: "all", bucket: null, allGenerations: false })),
      reportCpuMs: cpu(() => staticReportHtml(store, dir, "bench")),
      snapshotCpuMs: cpu(() => JSON.stringify(source().snapshot())),
      metricsCpuMs: cpu(() => writeMetrics(source().metrics())),
    };
  } finally {
    store.close();
  }
}

const T0 = Date.parse("2026-01-05T00:00:00Z");
const iso = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
const SCHEMA_2 = new Set([
  "meta", "generation", "lane", "session", "chunk", "worker", "worker_rate", "failure", "failure_seed", "minimize_unit", "minimize_find", "quarantine_reason",
  "lane_active", "chunk_lane", "failure_minimize", "failure_signature",
]);
const SEEDS_PER_CHUNK = 1000;
const DISTINCT = 2000;

/** Forges the store at `path`: chunks, then failing seeds spread over them, then back to schema 2. Returns what it holds. */
function forge(path, chunks, failing) {
  openStore(path, { journal: "wal" }).close();
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = OFF");
  const lanes = ["small", "large"];
  const pending = Math.floor(failing / 50);
  // Zipf-like hits: failure i gets a share ~ 1/(i+1), at least one each.
  const weights = Array.from({ length: DISTINCT }, (_, i) => 1 / (i + 1));
  const total = weights.reduce((a, b) => a + b, 0);
  const hits = weights.map((w) => Math.max(1, Math.floor(((failing - pending) * w) / total)));
  db.transaction(() => {
    db.prepare("INSERT INTO generation (id, gen_hash, created_at, note) VALUES (1, ?, ?, 'initial')").run("ab".repeat(32), iso(T0 - 60_000));
    db.prepare("INSERT INTO session (id, generation_id, started_at, ended_at, requested_seconds, status, mode) VALUES (1, 1, ?, ?, ?, 'done', 'local')").run(iso(T0), iso(T0 + chunks * 600), 86_400 * 14);
    lanes.forEach((name, i) => {
      db.prepare("INSERT INTO lane (id, generation_id, name, params_json, base_seed, cursor, seeds_per_sec, retired, created_at) VALUES (?, 1, ?, ?, ?, ?, 50, 0, ?)").run(
        i + 1, name, JSON.stringify({ args: ["--size", name] }), 1 + i * 10_000_000_000, 1 + i * 10_000_000_000, iso(T0 - 60_000),
      );
    });
    const chunk = db.prepare(
      `INSERT INTO chunk (id, session_id, lane_id, seed_from, seed_to, started_at, ended_at, seconds, app_build, status, clean, finds, quarantine, unshrunk)
       VALUES (?, 1, ?, ?, ?, ?, ?, 600, 'build-1', 'complete', ?, ?, 0, 0)`,
    );
    const findsIn = new Uint32Array(chunks);
    const plan = [];
    let k = 0;
    hits.forEach((h, f) => {
      for (let j = 0; j < h; j++) plan.push([f, (k++ * 7919) % chunks]);
    });
    for (let p = 0; p < pending; p++) plan.push([-1 - p, (k++ * 7919) % chunks]);
    for (const [, c] of plan) findsIn[c]++;
    const firstSeed = (c) => 1 + (c % 2) * 10_000_000_000 + Math.floor(c / 2) * SEEDS_PER_CHUNK;
    for (let c = 0; c < chunks; c++) {
      const started = T0 + c * 600;
      const from = firstSeed(c);
      chunk.run(c + 1, 1 + (c % 2), from, from + SEEDS_PER_CHUNK - 1, iso(started), iso(started + 600_000), SEEDS_PER_CHUNK - findsIn[c], findsIn[c]);
    }
    for (let i = 0; i < 2; i++) db.prepare("UPDATE lane SET cursor = ? WHERE id = ?").run(1 + i * 10_000_000_000 + Math.ceil((chunks - i) / 2) * SEEDS_PER_CHUNK, i + 1);
    const failure = db.prepare(
      `INSERT INTO failure (generation_id, lane_id, dedup_key, bucket, first_seed, shrunk, message, first_seen, last_seen, hits, state, signature, minimize_state)
       VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?, ?)`,
    );
    const seed = db.prepare("INSERT INTO failure_seed (failure_id, seed, chunk_id) VALUES (?, ?, ?)");
    const used = new Uint32Array(chunks);
    const rows = new Map();
    for (const [f, c] of plan) {
      const s = firstSeed(c) + used[c]++;
      let row = rows.get(f);
      if (row === undefined) {
        const bucket = f < 0 ? "timeout" : ["crash", "wrong-code", "assert"][f % 3];
        const when = iso(T0 + c * 600 + 600_000);
        row = Number(failure.run(1 + (c % 2), `key-${f}`, bucket, s, f < 0 ? 0 : 1, `${bucket} ${f}`, when, when, f < 0 ? 1 : hits[f], `${bucket}: ${f}`, f < 0 ? "pending" : null).lastInsertRowid);
        rows.set(f, row);
      }
      seed.run(row, s, c + 1);
    }
  })();
  const added = db.prepare("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index') AND name NOT LIKE 'sqlite_%'").all().filter((r) => !SCHEMA_2.has(r.name));
  for (const r of added.filter((a) => a.type === "index")) db.exec(`DROP INDEX ${r.name}`);
  for (const r of added.filter((a) => a.type === "table")) db.exec(`DROP TABLE ${r.name}`);
  // Columns a newer schema added to a table of schema 2 (schema 4: worker.files; schema 5: failure.last_app_build).
  for (const [table, column] of [["worker", "files"], ["failure", "last_app_build"]]) {
    if (db.prepare(`SELECT COUNT(*) AS n FROM pragma_table_info('${table}') WHERE name = ?`).get(column).n > 0) db.exec(`ALTER TABLE ${table} DROP COLUMN ${column}`);
  }
  db.pragma("user_version = 2");
  db.close();
  return { distinct: DISTINCT, pending, failing: hits.reduce((a, b) => a + b, 0) + pending };
}

function wall(argv, cwd) {
  const t = performance.now();
  const r = spawnSync(process.execPath, [CLI, ...argv], { cwd, stdio: ["ignore", "ignore", "pipe"], encoding: "utf8" });
  if (r.status !== 0) throw new Error(`fuzzfleet ${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
  return (performance.now() - t) / 1000;
}

function get(url) {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    request(url, { agent: false }, (res) => {
      res.resume();
      res.on("end", () => (res.statusCode === 200 ? resolve((performance.now() - t) / 1000) : reject(new Error(`${url}: ${res.statusCode}`))));
    })
      .on("error", reject)
      .end();
  });
}

const SIGNATURES = 500;
const SINGLETONS = 120;
/** A file takes at most 65,000 links (ext4). */
const LINKS = 60_000;

/**
 * A finished explore campaign's files beside a corpus of `entries` objects (the layout of
 * src/explore/state/corpus.ts, ledger.ts, findings.ts and history.ts), as
 * test/report/long-explore-corpus.ts forges them for the test.
 */
function forgeExplore(corpus, entries, findings) {
  const hash = (s) => createHash("sha256").update(s).digest("hex");
  const epoch = hash("long explore epoch");
  const build = "0123456789ab";
  const state = join(corpus, ".fuzzfleet");
  for (const d of [corpus, state, join(state, "explored"), join(state, "findings"), join(state, "history")]) mkdirSync(d, { recursive: true, mode: 0o700 });
  const ledger = openSync(join(state, "explored", `${epoch}-r0.log`), "w", 0o600);
  let lines = [];
  for (let i = 0; i < entries; i++) {
    const h = hash(`object ${i}`);
    const blank = join(state, `blank-${Math.floor(i / LINKS)}`);
    if (i % LINKS === 0) writeFileSync(blank, "");
    linkSync(blank, join(corpus, h));
    lines.push(`${h} ${build}\n`);
    if (lines.length >= 10_000) {
      writeSync(ledger, lines.join(""));
      lines = [];
    }
  }
  writeSync(ledger, lines.join(""));
  closeSync(ledger);
  const shared = SIGNATURES - SINGLETONS;
  for (let i = 0; i < findings; i++) {
    const j = i < findings - SINGLETONS ? i % shared : shared + (i - (findings - SINGLETONS));
    const at = new Date(T0 + i * 1000).toISOString();
    const h = hash(`object ${i}`);
    const record = {
      schema: "fuzzfleet-finding-v1", input_hash: h, kind: "crash", signal: 11, exit_code: null, stderr_tail: `crash in function_${j}\n`,
      signature: `signal 11 | crash in function_${j}`, first_seen: at, last_seen: at, times_seen: 1,
      fences: [`${epoch.slice(0, 16)}:0:4242:${i.toString(16).padStart(16, "0")}`], first_build: build, last_build: build, not_reproduced_by: null,
    };
    writeFileSync(join(state, "findings", `${h}.json`), JSON.stringify(record) + "\n", { mode: 0o600 });
  }
  const points = [];
  for (let k = 1; k <= 600; k++) points.push([T0 / 1000 + k * 60, Math.round((entries * k) / 600), Math.round((3 * entries * k) / 600), Math.round(((entries - 1) * k) / 600)]);
  writeFileSync(join(state, "history", `${epoch}-r0.json`), JSON.stringify({ schema: "fuzzfleet-explore-history-v1", epoch, rank: 0, points, corpus: entries }) + "\n", { mode: 0o600 });
}

/** CPU ms (median of `n`) of the explore views in this process, each from a fresh read of the files. */
function exploreInProcess(corpus, n) {
  const cpu = (fn) => {
    const runs = [];
    for (let i = 0; i < n; i++) {
      const c = process.cpuUsage();
      fn();
      const u = process.cpuUsage(c);
      runs.push((u.user + u.system) / 1000);
    }
    return median(runs);
  };
  const source = () => new ExploreDashboardSource({ title: "bench", live: null, files: new ExploreCampaignFiles(corpus) });
  return {
    snapshotCpuMs: cpu(() => JSON.stringify(source().snapshot())),
    metricsCpuMs: cpu(() => writeMetrics(source().metrics())),
    reportCpuMs: cpu(() => exploreStaticReportHtml(corpus, "bench")),
  };
}


/**
 * `fuzzfleet ui` (with `args`) in `dir`: `requests` times, GET /snapshot.json then /metrics, each
 * `pauseMs` after the last (past the cache under test); their times and ui's peak resident set.
 */
async function servedViews(args, dir, requests, pauseMs, startMs) {
  const ui = startProcess([process.execPath, CLI, "ui", ...args, "--listen", "127.0.0.1:0"], { cwd: dir, env: process.env });
  const url = (await ui.waitFor(/dashboard \(read-only\): (http:\S+)/, startMs))[1];
  const snaps = [];
  const scrapes = [];
  for (let i = 0; i < requests; i++) {
    snaps.push(await get(url + "snapshot.json"));
    await sleep(pauseMs);
    scrapes.push(await get(url + "metrics"));
    await sleep(pauseMs);
  }
  const rss = peakRssMb(ui.child.pid);
  ui.child.kill("SIGINT");
  await ui.done;
  return { snaps, scrapes, rss };
}
async function exploreRows(scratch) {
  const results = [];
  for (const entries of o.explore) {
    const dir = join(scratch, `e${entries}`);
    const corpus = join(dir, "corpus");
    mkdirSync(dir);
    const t = performance.now();
    forgeExplore(corpus, entries, o.findings);
    const forgeSeconds = (performance.now() - t) / 1000;
    const report = median([0, 1, 2].map((i) => wall(["report", "--corpus", corpus, "-o", join(dir, `report-${i}`)], dir)));
    // Past the files cache (3 s, or 50 times the last read's time): each request reads the files again.
    const { snaps, scrapes, rss } = await servedViews(["--corpus", corpus], dir, o.requests, 3100, 120_000);
    const cpu = exploreInProcess(corpus, 3);
    const row = { entries, findings: o.findings, forgeSeconds, report, snapshotMs: median(snaps) * 1000, metricsMs: median(scrapes) * 1000, uiRssMb: rss, ...cpu };
    console.log(`${int(entries)} corpus objects: ${JSON.stringify(row)}`);
    results.push(row);
  }
  const first = results[0];
  const last = results[results.length - 1];
  const growth = (k) => f2(last[k] / first[k]);
  console.log(`\nexplore, ${int(o.findings)} findings under ${SIGNATURES} signatures; wall time through the CLI and over HTTP, CPU ms in one process (median of 3):`);
  printTable([
    ["corpus", "report s", "snapshot ms", "/metrics ms", "ui RSS MB", "snapshot CPU", "/metrics CPU", "report CPU"],
    ...results.map((r) => [int(r.entries), f2(r.report), f1(r.snapshotMs), f1(r.metricsMs), f1(r.uiRssMb), f1(r.snapshotCpuMs), f1(r.metricsCpuMs), f1(r.reportCpuMs)]),
    [`growth ${int(first.entries)}→${int(last.entries)}`, growth("report"), growth("snapshotMs"), growth("metricsMs"), growth("uiRssMb"), growth("snapshotCpuMs"), growth("metricsCpuMs"), growth("reportCpuMs")],
  ]);
  return results;
}

benchmarkMain("long-campaign", o, async (scratch) => {
  const explore = o.only === "sweep" ? [] : await exploreRows(scratch);
  if (o.only === "explore") return { explore };
  const results = [];
  for (const chunks of o.sizes) {
    const dir = join(scratch, `c${chunks}`);
    mkdirSync(dir);
    const path = join(dir, "fuzzfleet.db");
    let t = performance.now();
    const facts = forge(path, chunks, o.failing);
    const forgeSeconds = (performance.now() - t) / 1000;
    t = performance.now();
    openStore(path, { journal: "wal" }).close();
    const migrateSeconds = (performance.now() - t) / 1000;
    const status = median([0, 1, 2].map(() => wall(["status"], dir)));
    const failures = median([0, 1, 2].map(() => wall(["failures", "--state", "all"], dir)));
    const report = wall(["report", "-o", join(dir, "report")], dir);
    // Past the one-second snapshot cache: each request builds a fresh snapshot.
    const { snaps, scrapes, rss } = await servedViews([], dir, o.requests, 1100, 60_000);
    const cpu = inProcess(path, dir, 5);
    const row = { chunks, ...facts, forgeSeconds, migrateSeconds, status, failures, report, snapshotMs: median(snaps) * 1000, metricsMs: median(scrapes) * 1000, uiRssMb: rss, ...cpu };
    console.log(`${int(chunks)} chunks: ${JSON.stringify(row)}`);
    results.push(row);
  }
  const first = results[0];
  const last = results[results.length - 1];
  const growth = (k) => f2(last[k] / first[k]);
  console.log("\nwall time, through the CLI and over HTTP (Node's start included for the commands):");
  printTable([
    ["chunks", "migrate s", "status s", "failures s", "report s", "snapshot ms", "/metrics ms", "ui RSS MB"],
    ...results.map((r) => [int(r.chunks), f1(r.migrateSeconds), f2(r.status), f2(r.failures), f2(r.report), f1(r.snapshotMs), f1(r.metricsMs), f1(r.uiRssMb)]),
    [`growth ${int(first.chunks)}→${int(last.chunks)}`, growth("migrateSeconds"), growth("status"), growth("failures"), growth("report"), growth("snapshotMs"), growth("metricsMs"), growth("uiRssMb")],
  ]);
  console.log("\nCPU ms of the same views in one process (median of 5):");
  printTable([
    ["chunks", "status", "failures", "report", "snapshot", "/metrics"],
    ...results.map((r) => [int(r.chunks), f1(r.statusCpuMs), f1(r.failuresCpuMs), f1(r.reportCpuMs), f1(r.snapshotCpuMs), f1(r.metricsCpuMs)]),
    [`growth ${int(first.chunks)}→${int(last.chunks)}`, growth("statusCpuMs"), growth("failuresCpuMs"), growth("reportCpuMs"), growth("snapshotCpuMs"), growth("metricsCpuMs")],
  ]);
  return { results, explore };
});
