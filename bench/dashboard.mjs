#!/usr/bin/env node
// dashboard: what the live dashboard costs a sweep. Rounds alternate, side by side:
//   A. `fuzzfleet run --for S` with no dashboard;
//   B. `fuzzfleet run --for S --ui 127.0.0.1:PORT` with N Server-Sent-Event clients connected for
//      the whole session (each takes the once-a-second snapshot, as an open page does) and
//      /metrics scraped every second.
// Each run sweeps a fresh campaign of the planted generator. Result: seeds/s of each (distinct
// seeds of complete chunks over the session's wall time, from its store) and the ratio B / A.
//
// Runs against the compiled CLI: `npm run build && node bench/dashboard.mjs [--help]`.
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import Database from "better-sqlite3";
import { benchmarkMain, CLI, f1, f3, int, median, parseOptions, printTable, sleep } from "./common.mjs";
import { campaignToml } from "./planted.mjs";

const HELP = `usage: node bench/dashboard.mjs [options]

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
  },
  HELP,
);

/** One session in a fresh campaign; with `clients` > 0 the dashboard is served and watched. */
async function session(dir, withUi) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "fuzzfleet.toml"), campaignToml({ title: "dashboard", jobs: 1, chunkSeconds: o.chunkSeconds, bootstrapSeeds: 100 }));
  const args = [CLI, "--config", join(dir, "fuzzfleet.toml"), "run", "--for", `${o.seconds}s`, ...(withUi ? ["--ui", "127.0.0.1:0"] : [])];
  const child = spawn(process.execPath, args, { cwd: dir, env: { ...process.env, PLANTED_COST_MS: String(o.costMs) }, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d) => (out += d));
  const exited = new Promise((resolve) => child.on("close", resolve));
  const watchers = [];
  let events = 0;
  let scrapes = 0;
  if (withUi) {
    while (!/dashboard: (http:\S+)/.test(out)) {
      if (child.exitCode !== null) throw new Error(`run ended before its dashboard banner:\n${out}`);
      await sleep(20);
    }
    const url = /dashboard: (http:\S+)/.exec(out)[1];
    for (let i = 0; i < o.clients; i++) {
      const req = request(url + "events", (res) => res.setEncoding("utf8").on("data", (d) => (events += d.split("event: snapshot").length - 1)));
      req.on("error", () => {});
      req.end();
      watchers.push(req);
    }
    const scraper = setInterval(() => {
      const req = request(url + "metrics", (res) => {
        res.resume();
        scrapes++;
      });
      req.on("error", () => {});
      req.end();
    }, 1000);
    exited.then(() => clearInterval(scraper));
  }
  const code = await exited;
  for (const w of watchers) w.destroy();
  if (code !== 0 && code !== 1) throw new Error(`run exited ${code}:\n${out}`);
  const db = new Database(join(dir, "fuzzfleet.db"), { readonly: true });
  try {
    const s = db.prepare("SELECT started_at, ended_at FROM session").get();
    const seeds = db.prepare("SELECT COALESCE(SUM(seed_to - seed_from + 1), 0) AS n FROM chunk WHERE status = 'complete'").get().n;
    const wall = (Date.parse(s.ended_at) - Date.parse(s.started_at)) / 1000;
    return { seeds, wall, rate: seeds / wall, events, scrapes };
  } finally {
    db.close();
  }
}

benchmarkMain("dashboard", o, async (scratch) => {
  const a = [];
  const b = [];
  for (let r = 0; r < o.rounds; r++) {
    a.push(await session(join(scratch, `a${r}`), false));
    b.push(await session(join(scratch, `b${r}`), true));
    console.log(`round ${r + 1}: without ${f1(a[r].rate)} seeds/s, with ${f1(b[r].rate)} seeds/s (${b[r].events} snapshots to ${o.clients} clients, ${b[r].scrapes} scrapes)`);
  }
  const ra = median(a.map((x) => x.rate));
  const rb = median(b.map((x) => x.rate));
  printTable([
    ["", "seeds/s (median)", "seeds", "snapshots received", "scrapes"],
    ["A: no dashboard", f1(ra), int(median(a.map((x) => x.seeds))), "-", "-"],
    [`B: dashboard, ${o.clients} SSE clients`, f1(rb), int(median(b.map((x) => x.seeds))), int(median(b.map((x) => x.events))), int(median(b.map((x) => x.scrapes)))],
  ]);
  console.log(`ratio B / A: ${f3(rb / ra)}`);
  return { a, b, ratio: rb / ra };
});
