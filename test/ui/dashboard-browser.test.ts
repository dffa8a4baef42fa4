// The live dashboard in a real browser: `run --ui` on a planted campaign, Debian's Chromium
// driven by playwright-core. The page loads without a console error, shows the lanes and a
// failure, changes over Server-Sent Events while the sweep runs, and a screenshot renders the page.
// Then `fuzzfleet ui` serves the finished campaign read-only, and off loopback refuses a request
// without the campaign token.
import { launchChromium } from "../helpers/browser.ts";
import assert from "node:assert/strict";
import { existsSync, lstatSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Campaign } from "../helpers/campaign.ts";
import { get, serve } from "./serve.ts";

const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

describe("the dashboard", () => {
  before(() => assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is not installed: apt-get install -y chromium (.ci/run does)`));
  const c = new Campaign({
    lanes: { small: 'base_seed = 1\nargs = ["--size", "small"]', large: 'base_seed = 5000000\nargs = ["--size", "large"]' },
    costMs: 1,
  });
  after(() => c.cleanup());

  test("run --ui: the page shows the lanes and a failure, moves over SSE, and logs no console error", async () => {
    // The browser starts first: it takes seconds, and the sweep's budget is short.
    const { context, profile, close } = await launchChromium(CHROMIUM, CHROMIUM_ARGS);
    const problems: string[] = [];
    let run: Awaited<ReturnType<typeof serve>> | null = null;
    try {
      run = await serve(c, ["run", "--for", "10s", "--ui", "127.0.0.1:0"], /^dashboard: (http:\/\/127\.0\.0\.1:\d+\/)/m);
      const page = await context.newPage();
      page.on("console", (m) => {
        if (m.type() === "error") problems.push(`console: ${m.text()}`);
      });
      page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
      page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()}`));
      await page.goto(run.url);
      await page.waitForSelector('#lanes .lane[data-lane="small"]');
      await page.waitForSelector('#lanes .lane[data-lane="large"]');
      const elapsed = await page.textContent("#elapsed");
      const snapshots = Number(await page.getAttribute("body", "data-snapshots"));
      // A value moves while the sweep runs: the elapsed time, pushed once a second.
      await page.waitForFunction((before) => document.getElementById("elapsed")!.textContent !== before, elapsed, { timeout: 5000 });
      assert.ok(Number(await page.getAttribute("body", "data-snapshots")) > snapshots, "more snapshots arrived over SSE");
      await page.waitForSelector("#failures tbody tr[data-id]", { timeout: 15_000 });
      const lane = await page.textContent('#lanes .lane[data-lane="small"] .lane-text');
      assert.match(lane!, /1\.\.[\d,]+ \([\d,]+ covered\)/, "the lane's prefix from base_seed to cursor is named");
      assert.ok(await page.$("#rate-chart canvas"), "the seeds/s plot is drawn");
      assert.ok(await page.$("#finds-chart canvas"), "the finds plot is drawn");
      await page.click("#failures tbody tr[data-id]");
      await page.waitForFunction(() => /repro: node /.test(document.getElementById("detail")!.textContent ?? ""), null, { timeout: 5000 });
      assert.match((await page.textContent("#detail"))!, /bucket:/, "the report text is shown");
      assert.equal(await page.textContent("#workers .na"), "not available for this campaign kind");
      const shot = join(profile, "dashboard.png");
      await page.screenshot({ path: shot, fullPage: true });
      assert.ok(statSync(shot).size > 10_000, "the screenshot holds a rendered page");
      assert.deepEqual(problems, []);
    } finally {
      await close();
    }
    assert.equal(await run!.done, 1, `run exits 1 for new failures\n${run!.stdout()}\n${run!.stderr()}`);
  });

  test("fuzzfleet ui serves the finished campaign read-only; off loopback a request without the token gets 401", async () => {
    const token = "dashboard-test-token-1";
    // Bound to 0.0.0.0 and asked over 127.0.0.1: the bind address decides, so the token is needed.
    const ui = await serve(c, ["ui", "--listen", "0.0.0.0:0", "--token", token], /^dashboard \(read-only\): (http:\/\/127\.0\.0\.1:\d+\/)/m);
    try {
      for (const path of ["", "snapshot.json", "metrics", "events", "app.js"]) {
        const r = await get(ui.url + path);
        assert.equal(r.status, 401, `/${path} without the token`);
        assert.doesNotMatch(r.body, /fuzzfleet_|"kind"/, "nothing of the campaign is sent");
      }
      assert.equal((await get(ui.url, { headers: { cookie: "fuzzfleet_ui=guess" } })).status, 401, "a made-up cookie");
      assert.equal((await get(ui.url + "metrics", { headers: { authorization: "Bearer wrong-token-here" } })).status, 401, "a wrong token");
      const scrape = await get(ui.url + "metrics", { headers: { authorization: `Bearer ${token}` } });
      assert.equal(scrape.status, 200);
      assert.match(scrape.body, /^fuzzfleet_up 0$/m, "read-only: nothing runs");
      assert.ok(ui.loginUrl, `the banner names a one-time link\n${ui.stdout()}`);
      const login = await get(ui.loginUrl!);
      assert.equal(login.status, 303);
      const cookie = String(login.headers["set-cookie"]);
      assert.match(cookie, /HttpOnly/);
      assert.match(cookie, /SameSite=Strict/);
      const page = await get(ui.url, { headers: { cookie: cookie.split(";")[0]! } });
      assert.equal(page.status, 200);
      assert.match(page.body, /<link rel="icon" href="data:,">/);
      assert.equal((await get(ui.loginUrl!)).status, 403, "the link works once");
      const snap = JSON.parse((await get(ui.url + "snapshot.json", { headers: { cookie: cookie.split(";")[0]! } })).body);
      const lanes = c.query<{ name: string; cursor: number }>("SELECT name, cursor FROM lane WHERE retired = 0 ORDER BY id");
      assert.deepEqual(
        snap.sweep.lanes.map((l: { name: string; cursor: number }) => ({ name: l.name, cursor: l.cursor })),
        lanes,
        "the read-only page shows the store's cursors",
      );
      assert.equal(snap.live, false);
    } finally {
      ui.child.kill("SIGINT");
      assert.equal(await ui.done, 0);
    }
    assert.ok(readFileSync(c.dbPath).length > 0);
  });

  test("two campaigns' dashboards on one host, logged in side by side in one browser, both stay logged in", async () => {
    // Browsers do not keep cookies apart by port: each dashboard's cookie is named for its campaign and port.
    const other = new Campaign({ costMs: 1 });
    try {
      const r = other.cli(["run", "--for", "4s"]);
      assert.ok(r.code === 0 || r.code === 1, `${r.stdout}\n${r.stderr}`);
      const banner = /^dashboard \(read-only\): (http:\/\/127\.0\.0\.1:\d+\/)/m;
      const one = await serve(c, ["ui", "--listen", "0.0.0.0:0", "--token", "side-by-side-token-one"], banner);
      const two = await serve(other, ["ui", "--listen", "0.0.0.0:0", "--token", "side-by-side-token-two"], banner);
      const { context, profile, close } = await launchChromium(CHROMIUM, CHROMIUM_ARGS);
      try {
        for (const ui of [one, two]) {
          for (const end = Date.now() + 10_000; !ui.loginUrl; await new Promise((r) => setTimeout(r, 50))) assert.ok(Date.now() < end, `no login link:\n${ui.stdout()}`);
        }
        const pageOne = await context.newPage();
        await pageOne.goto(one.loginUrl!);
        await pageOne.waitForSelector('#lanes .lane[data-lane="small"]');
        const pageTwo = await context.newPage();
        await pageTwo.goto(two.loginUrl!);
        await pageTwo.waitForSelector('#lanes .lane[data-lane="small"]');
        // Logged in to the second: the first still lets this browser in, and so does the second.
        for (const [page, ui] of [[pageOne, one], [pageTwo, two]] as const) {
          const reply = await page.goto(ui.url);
          assert.equal(reply!.status(), 200, `${ui.url} after both logins`);
          await page.waitForSelector('#lanes .lane[data-lane="small"]');
          const snap = await page.evaluate(async () => (await fetch("/snapshot.json")).status);
          assert.equal(snap, 200, `${ui.url}snapshot.json after both logins`);
        }
        const names = (await context.cookies()).map((k) => k.name);
        assert.equal(new Set(names).size, 2, `one cookie per dashboard: ${names.join(", ")}`);
      } finally {
        await close();
        for (const ui of [one, two]) {
          ui.child.kill("SIGINT");
          assert.equal(await ui.done, 0);
        }
      }
    } finally {
      other.cleanup();
    }
  });

  test("report -o DIR writes one static page with the same lanes, plots and failures, readable offline", async () => {
    const dir = join(c.dir, "report");
    const r = c.cli(["report", "-o", dir]);
    assert.equal(r.code, 0, r.stderr);
    const html = readFileSync(join(dir, "index.html"), "utf8");
    assert.doesNotMatch(html, /<script src=|<link rel="stylesheet" href=/, "nothing is loaded from elsewhere");
    const { context, close } = await launchChromium(CHROMIUM, CHROMIUM_ARGS);
    const problems: string[] = [];
    try {
      const page = await context.newPage();
      page.on("console", (m) => {
        if (m.type() === "error") problems.push(`console: ${m.text()}`);
      });
      page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
      page.on("request", (req) => {
        if (!req.url().startsWith("file:") && !req.url().startsWith("data:")) problems.push(`request: ${req.url()}`);
      });
      await page.goto(`file://${join(dir, "index.html")}`);
      const cursors = c.query<{ name: string; cursor: number }>("SELECT name, cursor FROM lane WHERE retired = 0 ORDER BY id");
      for (const l of cursors) {
        assert.match((await page.textContent(`#lanes .lane[data-lane="${l.name}"] .lane-text`))!, new RegExp(`\\.\\.${l.cursor.toLocaleString("en-US")} `), `${l.name}'s cursor`);
      }
      assert.ok(await page.$("#rate-chart canvas"));
      assert.equal(await page.$$eval("#failures tbody tr[data-id]", (rows) => rows.length), c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE minimize_state IS NULL").n, "one row per distinct failure");
      await page.click("#failures tbody tr[data-id]");
      assert.match((await page.textContent("#detail"))!, /repro: node /);
      assert.equal(await page.textContent("#mode"), "static report");
      assert.deepEqual(problems, []);
    } finally {
      await close();
    }
    // An index.html planted as a symlink is replaced by the page, never written through.
    const target = join(c.dir, "victim.txt");
    writeFileSync(target, "keep");
    rmSync(join(dir, "index.html"));
    symlinkSync(target, join(dir, "index.html"));
    const again = c.cli(["report", "-o", dir]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(readFileSync(target, "utf8"), "keep");
    assert.ok(lstatSync(join(dir, "index.html")).isFile());
  });
});
