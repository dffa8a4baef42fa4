// The dashboard off loopback under attack, and the credentials that open it. `fuzzfleet ui` is
// bound to 0.0.0.0 and asked over 127.0.0.1 (the bind decides, so every request needs a
// credential); an attacker without one runs in its own process (attacker.mjs). Connections
// without an authorized request have their own pool and a 10 s deadline, so slowloris sockets and
// a flood of event-stream attempts do not keep the owner out; the read-only scrape credential
// opens the dashboard but not the campaign.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { connect } from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Campaign, distributedTable, start } from "../helpers/campaign.ts";
import { get, serve, type Served } from "./serve.ts";

const TOKEN = "dashboard-attack-test-token";
const ATTACKER = fileURLToPath(new URL("./attacker.mjs", import.meta.url));
const UI_BANNER = /^dashboard \(read-only\): (http:\/\/127\.0\.0\.1:\d+\/)/m;

/** A socket that sends a request line and then a header line every 2 s, never ending its headers; resolves with when it closed and what it received. */
function slowHeaders(url: string): Promise<{ ms: number; received: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const at = performance.now();
    const socket = connect({ host: hostname, port: Number(port) });
    let received = "";
    let n = 0;
    const drip = setInterval(() => socket.write(`X-Slow-${n++}: a\r\n`), 2000);
    socket.on("connect", () => socket.write(`GET /metrics HTTP/1.1\r\nHost: ${hostname}:${port}\r\n`));
    socket.setEncoding("latin1").on("data", (d: string) => (received += d));
    socket.on("error", () => {});
    socket.on("close", () => {
      clearInterval(drip);
      clearTimeout(limit);
      resolve({ ms: performance.now() - at, received });
    });
    const limit = setTimeout(() => {
      clearInterval(drip);
      socket.destroy();
      reject(new Error(`a slow-header socket was still open after 20 s (it sent ${n} header lines)`));
    }, 20_000);
  });
}

/** GETs `url` one after another until `endAt` and at least `atLeast` answers; each answer's status (or error code) and latency. */
async function keepAsking(url: string, headers: Record<string, string>, endAt: number, agent: Agent | false, atLeast = 5): Promise<{ status: number | string; ms: number }[]> {
  const answers: { status: number | string; ms: number }[] = [];
  while (performance.now() < endAt || answers.length < atLeast) {
    const at = performance.now();
    answers.push(
      await new Promise((resolve) => {
        const req = request(url, { headers, agent }, (res) => {
          res.resume();
          res.on("end", () => resolve({ status: res.statusCode!, ms: performance.now() - at }));
        });
        req.setTimeout(10_000, () => req.destroy(new Error("no answer within 10 s")));
        req.on("error", (err: NodeJS.ErrnoException) => resolve({ status: err.code ?? err.message, ms: performance.now() - at }));
        req.end();
      }),
    );
    await new Promise((r) => setTimeout(r, 20));
  }
  return answers;
}

function p99(ms: number[]): number {
  const s = [...ms].sort((a, b) => a - b);
  return s[Math.ceil(0.99 * s.length) - 1]!;
}

describe("the dashboard off loopback", () => {
  const c = new Campaign({ costMs: 0.5 });
  let ui: Served;
  let scrapeFile: string;
  before(async () => {
    const r = c.cli(["run", "--for", "4s"]);
    assert.ok(r.code === 0 || r.code === 1, `${r.stdout}\n${r.stderr}`);
    ui = await serve(c, ["ui", "--listen", "0.0.0.0:0", "--token", TOKEN], UI_BANNER);
    for (const end = Date.now() + 10_000; !/credential in (\S+)>/.test(ui.stdout()); await new Promise((r) => setTimeout(r, 50))) {
      assert.ok(Date.now() < end, `the banner names no scrape credential:\n${ui.stdout()}`);
    }
    scrapeFile = /credential in (\S+)>/.exec(ui.stdout())![1]!;
  });
  after(async () => {
    ui?.child.kill("SIGINT");
    await ui?.done;
    c.cleanup();
  });

  test("the scrape credential is kept 0600 beside the token file, opens /metrics with the scheme in any case, and is not the token", async () => {
    assert.equal(scrapeFile, join(c.outDir, "fuzzfleet.scrape-token"));
    assert.equal(statSync(scrapeFile).mode & 0o777, 0o600);
    const scrape = readFileSync(scrapeFile, "utf8").trim();
    assert.match(scrape, /^[0-9a-f]{64}$/);
    assert.notEqual(scrape, TOKEN);
    for (const scheme of ["Bearer", "bearer", "BEARER"]) {
      const r = await get(ui.url + "metrics", { headers: { authorization: `${scheme} ${scrape}` } });
      assert.equal(r.status, 200, `${scheme} <scrape credential>`);
      assert.match(r.body, /^fuzzfleet_up 0$/m);
    }
    assert.equal((await get(ui.url + "snapshot.json", { headers: { authorization: `bearer ${TOKEN}` } })).status, 200, "the campaign token itself, lower case");
    assert.equal((await get(ui.url + "metrics", { headers: { authorization: `Basic ${scrape}` } })).status, 401, "another scheme");
    const refused = await get(ui.url + "metrics", { headers: { authorization: `Bearer ${scrape}x` }, fresh: true });
    assert.equal(refused.status, 401);
    assert.equal(refused.headers.connection, "close", "an unauthorized connection gets one answer");
  });

  test("a connection that never completes an authorized request is answered 408 and closed 10 s after its accept", async () => {
    // Two sockets 3 s apart: a periodic sweep closes them at one moment, not each 10 s after its own accept.
    const first = slowHeaders(ui.url);
    await new Promise((r) => setTimeout(r, 3000));
    const second = slowHeaders(ui.url);
    for (const [i, closed] of (await Promise.all([first, second])).entries()) {
      assert.ok(closed.ms >= 9_500 && closed.ms <= 12_000, `socket ${i + 1} closed after ${Math.round(closed.ms)} ms, not about 10 s`);
      assert.match(closed.received, /^HTTP\/1\.1 408 /, `socket ${i + 1} is told why`);
    }
  });

  test("60 slow-header sockets and 2,000 event-stream attempts without a credential: the owner's requests and stream are all served (latency: bench/dashboard-attack.mjs)", async () => {
    const login = await get(ui.loginUrl!);
    assert.equal(login.status, 303, "the one-time link");
    const cookie = String(login.headers["set-cookie"]).split(";")[0]!;
    const scrape = readFileSync(scrapeFile, "utf8").trim();
    const attacker = spawn(process.execPath, [ATTACKER, "--url", ui.url, "--slow", "60", "--sse", "2000", "--reopen-ms", "1000"], { stdio: ["ignore", "pipe", "inherit"] });
    let said = "";
    attacker.stdout.setEncoding("utf8").on("data", (d: string) => (said += d));
    const attackerDone = new Promise((resolve) => attacker.on("close", resolve));
    try {
      for (const end = Date.now() + 60_000; !/^ready$/m.test(said); await new Promise((r) => setTimeout(r, 50))) {
        assert.ok(Date.now() < end && attacker.exitCode === null, `the attacker never got its sockets open: ${said}`);
      }
      // Every connection of the owner is made while the attack runs.
      let snapshots = 0;
      let streamStatus: number | null = null;
      const events = request(ui.url + "events", { headers: { authorization: `Bearer ${scrape}` } }, (res) => {
        streamStatus = res.statusCode!;
        res.setEncoding("utf8").on("data", (d: string) => (snapshots += d.split("event: snapshot").length - 1));
      });
      events.on("error", () => {});
      events.end();
      const endAt = performance.now() + 6000;
      const bearerAgent = new Agent({ keepAlive: true, maxSockets: 1 });
      const cookieAgent = new Agent({ keepAlive: true, maxSockets: 1 });
      const [bearer, cookied, fresh] = await Promise.all([
        keepAsking(ui.url + "snapshot.json", { authorization: `Bearer ${scrape}` }, endAt, bearerAgent),
        keepAsking(ui.url + "snapshot.json", { cookie }, endAt, cookieAgent),
        // A scraper whose interval outlasts the keep-alive opens a new connection each time.
        keepAsking(ui.url + "metrics", { authorization: `bearer ${scrape}` }, endAt, false),
      ]);
      bearerAgent.destroy();
      cookieAgent.destroy();
      // Each interval sends one: three snapshots, however loaded the machine is, while the attack goes on.
      for (const end = Date.now() + 60_000; snapshots < 3 && (streamStatus === null || streamStatus === 200); await new Promise((r) => setTimeout(r, 50))) {
        assert.ok(Date.now() < end, `the owner's event stream received ${snapshots} snapshots in 60 s (status ${streamStatus})`);
      }
      events.destroy();
      // A slow socket is closed by its 10 s deadline (or pushed out by newer ones): wait for the first.
      for (const end = Date.now() + 60_000; !/^slow-closed$/m.test(said); await new Promise((r) => setTimeout(r, 50))) {
        assert.ok(Date.now() < end && attacker.exitCode === null, `no slow socket was closed within 60 s: ${said}`);
      }
      for (const [who, answers] of Object.entries({ bearer, cookie: cookied, "new connections": fresh })) {
        assert.deepEqual(answers.filter((a) => a.status !== 200), [], `${who}: every request answered 200`);
      }
      const worst = p99([...bearer, ...cookied].map((a) => a.ms));
      console.log(`# under attack: ${bearer.length + cookied.length} keep-alive requests, p99 ${worst.toFixed(1)} ms; ${fresh.length} on new connections, slowest ${Math.max(...fresh.map((a) => a.ms)).toFixed(1)} ms`);
      assert.equal(streamStatus, 200, "the owner's event stream was admitted");
      assert.ok(snapshots >= 3, `the owner's event stream received ${snapshots} snapshots`);
    } finally {
      attacker.kill("SIGTERM");
      await attackerDone;
    }
    const seen = JSON.parse(said.trim().split("\n").pop()!) as { slowClosed: number; status: Record<string, number> };
    assert.ok(seen.slowClosed > 0, "the slow sockets were closed, not left to hold their slots");
    assert.ok((seen.status["sse 401"] ?? 0) > 0, "the event-stream attempts were refused");
    assert.equal(seen.status["sse 200"], undefined, "no event stream without the credential");
  });

  test("ui --token-file reads the token from the file; --help says --token shows in the process list", async () => {
    const file = join(c.dir, "other.token");
    writeFileSync(file, "token-from-a-file-1\n", { mode: 0o600 });
    const other = await serve(c, ["ui", "--listen", "0.0.0.0:0", "--token-file", file], UI_BANNER);
    try {
      assert.equal((await get(other.url + "metrics", { headers: { authorization: "Bearer token-from-a-file-1" }, fresh: true })).status, 200);
      assert.equal((await get(other.url + "metrics", { headers: { authorization: `Bearer ${TOKEN}` }, fresh: true })).status, 401, "the flag's token is not this one's");
    } finally {
      other.child.kill("SIGINT");
      assert.equal(await other.done, 0);
    }
    const both = c.cli(["ui", "--listen", "0.0.0.0:0", "--token", TOKEN, "--token-file", file]);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--token and --token-file exclude each other/);
    const help = c.cli(["ui", "--help"]);
    assert.match(help.stdout, /--token-file <path>/);
    assert.match(help.stdout, /--token <t>\s+off loopback: the campaign token itself; visible to\s+other\s+local\s+users\s+in\s+`ps`/);
  });
});

test("the scrape credential opens a coordinator's /metrics but is refused as a worker's token at the handshake", async () => {
  const c = new Campaign({ extra: distributedTable(), costMs: 1 });
  try {
    const coord = await serve(c, ["coordinate", "--for", "20s", "--port", "0", "--ui", "0.0.0.0:0"], /dashboard: (http:\/\/127\.0\.0\.1:\d+\/)/);
    try {
      for (const end = Date.now() + 10_000; !/credential in (\S+)>/.test(coord.stdout()); await new Promise((r) => setTimeout(r, 50))) {
        assert.ok(Date.now() < end, `the banner names no scrape credential:\n${coord.stdout()}`);
      }
      const file = /credential in (\S+)>/.exec(coord.stdout())![1]!;
      assert.equal(file, join(c.outDir, "fuzzfleet.scrape-token"));
      const scrape = readFileSync(file, "utf8").trim();
      const metrics = await get(coord.url + "metrics", { headers: { authorization: `Bearer ${scrape}` } });
      assert.equal(metrics.status, 200);
      assert.match(metrics.body, /^fuzzfleet_up 1$/m);
      const port = Number(/listening on [^:\s]+:(\d+)/.exec(coord.stdout())![1]);
      const worker = start(c, ["worker", "--master", `127.0.0.1:${port}`, "-j", "1", "--token", scrape, "--wait", "5"]);
      const r = await worker.result;
      assert.equal(r.code, 3, `refused by the master\n${r.stdout}\n${r.stderr}`);
      assert.match(r.stdout + r.stderr, /refused this worker:[\s\S]*token/);
      assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM worker").n, 0, "no worker was admitted");
    } finally {
      coord.child.kill("SIGINT");
      await coord.done;
    }
    assert.ok(!existsSync(join(c.outDir, "fuzzfleet.scrape-token")), "the credential's file goes with the dashboard");
  } finally {
    c.cleanup();
  }
});
