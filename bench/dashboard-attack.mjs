#!/usr/bin/env node
// dashboard-attack: how fast the dashboard answers its owner while someone without the
// credential attacks it. `fuzzfleet ui --listen 0.0.0.0:0 --token T` serves a small swept
// campaign (bound off loopback, so every request needs the credential, even over 127.0.0.1);
// an attacker process (test/ui/attacker.mjs) holds --slow slowloris sockets and --sse
// Server-Sent-Event attempts without a credential, reopening whatever the server closes. Meanwhile
// two clients ask for /snapshot.json one request after another for --seconds: one sends
// `Authorization: Bearer <scrape credential>`, one the cookie the one-time login link set; with
// --connections new each request opens its own connection (as a scraper whose interval is longer
// than the keep-alive does), with keep-alive they reuse one. An authenticated event stream stays
// open throughout and counts the snapshots it receives.
// Result: the clients' latency (p50, p99, max), failed requests, snapshots received, what the
// attacker saw, and the server's peak RSS; printed as JSON on the last line.
//
// Runs against the compiled CLI: `npm run build && node bench/dashboard-attack.mjs [--help]`.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { benchmarkMain, CLI, f1, parseOptions, peakRssMb, percentile, ROOT, startProcess } from "./common.mjs";
import { campaignToml } from "./planted.mjs";

const HELP = `usage: node bench/dashboard-attack.mjs [options]

  --slow N              slowloris sockets held by the attacker           default 60
  --sse M               unauthenticated /events attempts held            default 2000
  --reopen-ms T         the attacker reopens a closed socket after T ms   default 1000
  --seconds S           how long the clients measure under attack        default 20
  --connections C       new (a connection per request) or keep-alive     default new`;

const o = parseOptions(
  "dashboard-attack",
  process.argv.slice(2),
  {
    slow: { default: "60", number: { min: 0, integer: true } },
    sse: { default: "2000", number: { min: 0, integer: true } },
    seconds: { default: "20", number: { min: 1 } },
    "reopen-ms": { default: "1000", number: { min: 0 } },
    connections: { default: "new", choices: ["new", "keep-alive"] },
  },
  HELP,
);

const TOKEN = "dashboard-attack-bench-token";
const ATTACKER = join(ROOT, "test", "ui", "attacker.mjs");

/** One GET; resolves with the status and the milliseconds it took, or the error's code. */
function timedGet(url, headers, agent) {
  const at = performance.now();
  return new Promise((resolve) => {
    const req = request(url, { headers, agent }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode, ms: performance.now() - at }));
    });
    req.setTimeout(15_000, () => req.destroy(new Error("no answer within 15 s")));
    req.on("error", (err) => resolve({ status: err.code ?? err.message, ms: performance.now() - at }));
    req.end();
  });
}

/** Asks `url` again and again until `endAt`; every answer's latency and status. */
async function client(url, headers, endAt, keepAlive) {
  const agent = keepAlive ? new Agent({ keepAlive: true, maxSockets: 1 }) : false;
  const answers = [];
  while (performance.now() < endAt) {
    answers.push(await timedGet(url, headers, agent));
    await new Promise((r) => setTimeout(r, 20));
  }
  if (agent) agent.destroy();
  return answers;
}

/** An authenticated event stream: counts the snapshots it receives until closed. */
function stream(url, headers) {
  let snapshots = 0;
  let status = null;
  const req = request(url, { headers }, (res) => {
    status = res.statusCode;
    res.setEncoding("utf8").on("data", (d) => (snapshots += d.split("event: snapshot").length - 1));
  });
  req.on("error", () => {});
  req.end();
  return { close: () => req.destroy(), result: () => ({ status, snapshots }) };
}

benchmarkMain("dashboard-attack", o, async (scratch) => {
  writeFileSync(join(scratch, "fuzzfleet.toml"), campaignToml({ title: "dashboard-attack", jobs: 1, chunkSeconds: 1, bootstrapSeeds: 50 }));
  const env = { ...process.env, PLANTED_COST_MS: "0.5" };
  delete env.FUZZFLEET_TOKEN;
  const sweep = startProcess([process.execPath, CLI, "run", "--for", "3s"], { cwd: scratch, env });
  const swept = await sweep.done;
  if (swept.code !== 0 && swept.code !== 1) throw new Error(`the campaign's sweep exited ${swept.code}:\n${sweep.output()}`);

  const ui = startProcess([process.execPath, CLI, "ui", "--listen", "0.0.0.0:0", "--token", TOKEN], { cwd: scratch, env });
  const url = (await ui.waitFor(/^dashboard \(read-only\): (http:\/\/\S+\/)/m, 30_000))[1];
  const login = (await ui.waitFor(/open (http:\/\/\S+\/login\/[0-9a-f]+)/, 10_000))[1];
  // The read-only scrape credential where the banner names it (a build without one: the token).
  const scrapeFile = /credential in (\S+\.scrape-token)/.exec(ui.output())?.[1];
  const scrape = scrapeFile ? readFileSync(scrapeFile, "utf8").trim() : TOKEN;
  const cookie = await new Promise((resolve, reject) => {
    request(login, (res) => {
      res.resume();
      resolve(String(res.headers["set-cookie"]).split(";")[0]);
    })
      .on("error", reject)
      .end();
  });

  const attacker = startProcess([process.execPath, ATTACKER, "--url", url, "--slow", String(o.slow), "--sse", String(o.sse), "--reopen-ms", String(o.reopenMs)], { cwd: scratch, env });
  await attacker.waitFor(/^ready$/m, 60_000, "the attacker's sockets");
  console.log(`attacking ${url} with ${o.slow} slowloris sockets and ${o.sse} event-stream attempts; measuring for ${o.seconds}s`);
  const events = stream(url + "events", { authorization: `Bearer ${scrape}` });
  const endAt = performance.now() + o.seconds * 1000;
  let peakMb = 0;
  const rss = setInterval(() => (peakMb = Math.max(peakMb, peakRssMb(ui.pid) ?? 0)), 500);
  const keepAlive = o.connections === "keep-alive";
  const [bearer, cookied] = await Promise.all([
    client(url + "snapshot.json", { authorization: `Bearer ${scrape}` }, endAt, keepAlive),
    client(url + "snapshot.json", { cookie }, endAt, keepAlive),
  ]);
  clearInterval(rss);
  events.close();
  attacker.child.kill("SIGTERM");
  await attacker.done;
  const seen = JSON.parse(attacker.output().trim().split("\n").pop());
  ui.child.kill("SIGINT");
  await ui.done;

  const all = [...bearer, ...cookied];
  const ok = all.filter((a) => a.status === 200).map((a) => a.ms);
  const failed = all.filter((a) => a.status !== 200);
  const lifetimes = seen.slowLifetimesMs;
  const result = {
    requests: all.length,
    failed: failed.length,
    failures: failed.slice(0, 10).map((a) => String(a.status)),
    p50Ms: Number(f1(percentile(ok, 50))),
    p99Ms: Number(f1(percentile(ok, 99))),
    maxMs: Number(f1(Math.max(...ok))),
    stream: events.result(),
    serverPeakRssMb: peakMb,
    attacker: {
      slowOpened: seen.slowOpened,
      slowClosed: seen.slowClosed,
      slowLifetimeMedianMs: percentile(lifetimes, 50),
      slowLifetimeMaxMs: lifetimes.length ? Math.max(...lifetimes) : null,
      sseOpened: seen.sseOpened,
      answers: seen.status,
      errors: seen.errors,
    },
  };
  console.log(`authenticated requests: ${result.requests} (${result.failed} failed), p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, max ${result.maxMs} ms; stream: ${result.stream.snapshots} snapshots`);
  console.log(JSON.stringify(result));
  return result;
});
