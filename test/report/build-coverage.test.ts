// Results bound to the build that produced them, on the sweep side: two `run`s of the planted
// generator over the same two lanes, the app rebuilt in between, as a user runs them. Every view
// — status (text and --json), the static report (in Chromium), the dashboard's snapshot (live
// during the second run, and read-only after) and /metrics — shows per lane the range swept
// under the first build, then the one swept under the second, and the second's share of the
// prefix; a store migrated from schema 4 gets the same ranges and failure builds as the fresh
// one; failures name the builds they were first and last seen under, and resweep under a third
// build the one they were fixed in.
import assert from "node:assert/strict";
import { copyFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, describe, test } from "node:test";
import Database from "better-sqlite3";
import { appBuildOf } from "../../src/config/identity.ts";
import { openStore } from "../../src/store/db.ts";
import { launchChromium } from "../helpers/browser.ts";
import { Campaign } from "../helpers/campaign.ts";
import { get, serve } from "../ui/serve.ts";

const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const LANES = { small: 1, large: 5_000_000 } as const;

interface Range {
  app_build: string | null;
  seed_from: number;
  seed_to: number;
  ahead: boolean;
}

describe("two app builds over the same lanes", () => {
  const c = new Campaign({
    lanes: { small: `base_seed = ${LANES.small}\nargs = ["--size", "small"]`, large: `base_seed = ${LANES.large}\nargs = ["--size", "large"]` },
    extra: '[app]\npath = "app.bin"\n',
    costMs: 1,
  });
  const app = join(c.dir, "app.bin");
  let buildA = "";
  let buildB = "";
  /** Each lane's cursor after the first run and after the second. */
  const cursors = new Map<string, [number, number]>();
  after(() => c.cleanup());

  /**
   * Exit 1 exactly when the session found a distinct failure never seen before, or a find pending
   * minimization under a signature never seen before (docs/sweep.md): each session here runs
   * under its own build, so "before" is every failure first seen under another build.
   */
  function checkExit(code: number | null, build: string, output: string): void {
    const newDistinct = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE minimize_state IS NULL AND first_app_build = ?", build).n;
    const newSignatures = c.one<{ n: number }>(
      `SELECT COUNT(*) AS n FROM failure f WHERE f.first_app_build = ? AND NOT EXISTS (
         SELECT 1 FROM failure g WHERE g.first_app_build IS NOT ? AND COALESCE(g.signature, g.bucket) = COALESCE(f.signature, f.bucket))`,
      build,
      build,
    ).n;
    assert.equal(code, newDistinct + newSignatures > 0 ? 1 : 0, output);
  }
  /** What the live dashboard of the second run showed while it ran. */
  let liveSnapshot: { live: boolean; sweep: { currentBuild: string; lanes: { name: string; builds: { ranges: { build: string; seedFrom: number; seedTo: number }[] } }[] } } | null = null;
  const laneCursors = () => new Map(c.query<{ name: string; cursor: number }>("SELECT name, cursor FROM lane WHERE retired = 0").map((l) => [l.name, l.cursor]));

  before(async () => {
    writeFileSync(app, "app v1");
    buildA = appBuildOf(app);
    const r = c.cli(["run", "--for", "8s"]);
    checkExit(r.code, buildA, `${r.stdout}\n${r.stderr}`);
    const first = laneCursors();
    writeFileSync(app, "app v2, rebuilt");
    buildB = appBuildOf(app);
    assert.notEqual(buildA, buildB);
    const run = await serve(c, ["run", "--for", "8s", "--ui", "127.0.0.1:0"], /^dashboard: (http:\/\/127\.0\.0\.1:\d+\/)/m);
    liveSnapshot = JSON.parse((await get(run.url + "snapshot.json")).body);
    checkExit(await run.done, buildB, `${run.stdout()}\n${run.stderr()}`);
    for (const [name, cursor] of laneCursors()) cursors.set(name, [first.get(name)!, cursor]);
    for (const [name, base] of Object.entries(LANES)) {
      const [c1, c2] = cursors.get(name)!;
      assert.ok(base < c1 && c1 < c2, `lane ${name} swept seeds under both builds: ${base} < ${c1} < ${c2}`);
    }
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE status != 'complete'").n, 0, "run leaves no chunk ahead of a gap");
  });

  /** What every view must show for a lane: the first build's range, then the second's, both below the cursor. */
  const expectedRanges = (name: keyof typeof LANES): Range[] => {
    const [c1, c2] = cursors.get(name)!;
    return [
      { app_build: buildA, seed_from: LANES[name], seed_to: c1 - 1, ahead: false },
      { app_build: buildB, seed_from: c1, seed_to: c2 - 1, ahead: false },
    ];
  };
  const secondShare = (name: keyof typeof LANES) => cursors.get(name)![1] - cursors.get(name)![0];

  test("status --json and status show two ranges per lane with their builds and the current build's share of the prefix", () => {
    const r = c.cli(["status", "--json"]);
    assert.equal(r.code, 0, r.stderr);
    const s = JSON.parse(r.stdout) as { current_build: string; lanes: { name: string; covered: number; builds: { ranges: Range[]; earlier_ranges: number; current_build_covered: number } }[] };
    assert.equal(s.current_build, buildB);
    for (const name of ["small", "large"] as const) {
      const lane = s.lanes.find((l) => l.name === name)!;
      assert.deepEqual(lane.builds, { ranges: expectedRanges(name), earlier_ranges: 0, current_build_covered: secondShare(name) }, name);
    }
    const text = c.cli(["status"]);
    assert.equal(text.code, 0, text.stderr);
    const fmt = (n: number) => n.toLocaleString("en-US");
    assert.ok(text.stdout.includes(`seed ranges by app build (current build: ${buildB}):`), text.stdout);
    for (const name of ["small", "large"] as const) {
      const [c1, c2] = cursors.get(name)!;
      const covered = c2 - LANES[name];
      const share = `${((100 * secondShare(name)) / covered).toFixed(1)}%`;
      const lines = `  ${name.padEnd(16)} ${fmt(LANES[name])}..${fmt(c1 - 1)} ${buildA}, ${fmt(c1)}..${fmt(c2 - 1)} ${buildB} (current)\n` +
        `  ${"".padEnd(16)} current build: ${fmt(secondShare(name))} of ${fmt(covered)} covered seeds (${share})\n`;
      assert.ok(text.stdout.includes(lines), `status shows\n${lines}\nin\n${text.stdout}`);
    }
  });

  test("failures --json and failures name the builds each failure was first and last seen under", () => {
    // The builds a failure's seeds were swept under, from the chunks that recorded them (run books them in chunk order).
    const expected = c.query<{ id: number; first: string; last: string }>(
      `SELECT f.id AS id, f.first_app_build AS first,
              (SELECT ch.app_build FROM failure_seed fs JOIN chunk ch ON ch.id = fs.chunk_id WHERE fs.failure_id = f.id ORDER BY fs.chunk_id DESC LIMIT 1) AS last
         FROM failure f WHERE f.minimize_state IS NULL ORDER BY f.id`,
    );
    assert.ok(expected.some((f) => f.first === buildA && f.last === buildB), "a failure hit under both builds");
    const r = c.cli(["failures", "--json", "--state", "all"]);
    assert.equal(r.code, 0, r.stderr);
    const got = (JSON.parse(r.stdout) as { failures: { id: number; first_app_build: string; last_app_build: string; fixed_app_build: string | null }[] }).failures;
    assert.deepEqual(
      got.map((f) => ({ id: f.id, first: f.first_app_build, last: f.last_app_build, fixed: f.fixed_app_build })).sort((a, b) => a.id - b.id),
      expected.map((f) => ({ ...f, fixed: null })),
    );
    const text = c.cli(["failures", "--state", "all"]);
    for (const f of expected) {
      assert.match(text.stdout, new RegExp(`^#${f.id} .*\\[first seen ${f.first}, last seen ${f.last}\\]$`, "m"), text.stdout);
    }
    const verbose = c.cli(["failures", "--state", "all", "-v"]);
    assert.match(verbose.stdout, new RegExp(`^      app build: first seen ${expected[0]!.first}, last seen ${expected[0]!.last}$`, "m"));
  });

  test("the static report shows both ranges per lane and a failure's builds in Chromium", async () => {
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is not installed: apt-get install -y chromium (.ci/run does)`);
    const dir = join(c.dir, "report");
    const r = c.cli(["report", "-o", dir]);
    assert.equal(r.code, 0, r.stderr);
    const html = readFileSync(join(dir, "index.html"), "utf8");
    const embedded = JSON.parse(/<script id="embedded" type="application\/json">(.*?)<\/script>/s.exec(html)![1]!) as {
      snapshot: { sweep: { currentBuild: string; lanes: { name: string; builds: unknown }[] } };
    };
    assert.equal(embedded.snapshot.sweep.currentBuild, buildB);
    for (const name of ["small", "large"] as const) {
      assert.deepEqual(
        embedded.snapshot.sweep.lanes.find((l) => l.name === name)!.builds,
        {
          ranges: expectedRanges(name).map((x) => ({ build: x.app_build, seedFrom: x.seed_from, seedTo: x.seed_to, ahead: x.ahead })),
          earlierRanges: 0,
          currentBuildCovered: secondShare(name),
        },
        name,
      );
    }
    const browser = await launchChromium(CHROMIUM, CHROMIUM_ARGS);
    try {
      const page = await browser.context.newPage();
      const problems: string[] = [];
      page.on("pageerror", (e) => problems.push(e.message));
      await page.goto(pathToFileURL(join(dir, "index.html")).href);
      const [c1, c2] = cursors.get("small")!;
      const fmt = (n: number) => n.toLocaleString("en-US");
      const shown = await page.textContent('#lanes .lane[data-lane="small"] .lane-builds');
      assert.equal(
        shown,
        `builds: ${fmt(1)}..${fmt(c1 - 1)} ${buildA}, ${fmt(c1)}..${fmt(c2 - 1)} ${buildB} (current) — current build ${buildB}: ` +
          `${fmt(secondShare("small"))} of ${fmt(c2 - 1)} covered seeds (${((100 * secondShare("small")) / (c2 - 1)).toFixed(1)}%)`,
      );
      const id = Number(await page.getAttribute("#failures tbody tr[data-id]", "data-id"));
      const f = c.one<{ first_app_build: string; last_app_build: string }>("SELECT first_app_build, last_app_build FROM failure WHERE id = ?", id);
      await page.click(`#failures tbody tr[data-id="${id}"]`);
      assert.equal(await page.textContent("#detail .detail-builds"), `app build: first seen under ${f.first_app_build}, last seen under ${f.last_app_build}, fixed in –`);
      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
    }
  });

  test("the live dashboard of the second run compares against its session's build and shows the first build's range", () => {
    assert.equal(liveSnapshot!.live, true);
    assert.equal(liveSnapshot!.sweep.currentBuild, buildB);
    for (const name of ["small", "large"] as const) {
      const [c1] = cursors.get(name)!;
      const ranges = liveSnapshot!.sweep.lanes.find((l) => l.name === name)!.builds.ranges;
      assert.deepEqual(ranges[0], { build: buildA, seedFrom: LANES[name], seedTo: c1 - 1, ahead: false }, name);
      assert.ok(ranges.slice(1).every((x) => x.build === buildB && x.seedFrom >= c1), `${name}: whatever else it showed was swept under ${buildB}`);
    }
  });

  test("the read-only dashboard's snapshot and /metrics show the ranges per build and the current build's share", async () => {
    const ui = await serve(c, ["ui", "--listen", "127.0.0.1:0"], /^dashboard \(read-only\): (http:\/\/127\.0\.0\.1:\d+\/)/m);
    try {
      const snap = JSON.parse((await get(ui.url + "snapshot.json")).body) as { sweep: { currentBuild: string; lanes: { name: string; builds: { ranges: unknown[]; currentBuildCovered: number } }[] } };
      assert.equal(snap.sweep.currentBuild, buildB);
      const small = snap.sweep.lanes.find((l) => l.name === "small")!;
      assert.equal(small.builds.ranges.length, 2);
      assert.equal(small.builds.currentBuildCovered, secondShare("small"));
      const scrape = await get(ui.url + "metrics");
      assert.equal(scrape.status, 200);
      for (const name of ["small", "large"] as const) {
        expectedRanges(name).forEach((range, i) => {
          const labels = `{lane="${name}",app_build="${range.app_build}",range="${i + 1}"}`;
          for (const line of [`fuzzfleet_lane_build_range_first_seed${labels} ${range.seed_from}`, `fuzzfleet_lane_build_range_last_seed${labels} ${range.seed_to}`]) {
            assert.ok(scrape.body.split("\n").includes(line), `${line}\nin\n${scrape.body}`);
          }
        });
        const current = `fuzzfleet_lane_current_build_covered_seeds{lane="${name}",app_build="${buildB}"} ${secondShare(name)}`;
        assert.ok(scrape.body.split("\n").includes(current), current);
      }
      assert.equal(scrape.body.split("\n").filter((l) => l.startsWith("fuzzfleet_lane_build_range_first_seed{")).length, 4, "two ranges per lane, no more");
    } finally {
      ui.child.kill("SIGINT");
      assert.equal(await ui.done, 0);
    }
  });

  test("a store migrated from schema 4 gets the same ranges and failure builds as the fresh one", () => {
    const old = join(c.dir, "old.db");
    copyFileSync(c.dbPath, old);
    const db = new Database(old);
    try {
      db.exec("DROP INDEX build_range_seed; DROP TABLE build_range; ALTER TABLE failure DROP COLUMN last_app_build;");
      db.pragma("user_version = 4");
    } finally {
      db.close();
    }
    openStore(old, { journal: "wal" }).close();
    const read = (path: string) => {
      const d = new Database(path, { readonly: true });
      try {
        return {
          ranges: d.prepare("SELECT lane_id, app_build, seed_from, seed_to FROM build_range ORDER BY lane_id, seed_from").all(),
          failures: d.prepare("SELECT id, first_app_build, last_app_build FROM failure ORDER BY id").all(),
        };
      } finally {
        d.close();
      }
    };
    const fresh = read(c.dbPath);
    assert.equal(fresh.ranges.length, 4);
    assert.deepEqual(read(old), fresh);
  });

  test("resweep under a third build: fixed failures name it as the build they were fixed in; the ones still failing were last seen under it", () => {
    writeFileSync(app, "app v3, the crash fixed");
    const buildC = appBuildOf(app);
    const r = c.cli(["resweep"], { env: { PLANTED_FIX: "crash" } });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const rows = c.query<{ id: number; bucket: string; state: string; first_app_build: string; last_app_build: string; resolved_app_build: string | null }>(
      "SELECT id, bucket, state, first_app_build, last_app_build, resolved_app_build FROM failure WHERE minimize_state IS NULL ORDER BY id",
    );
    const crashes = rows.filter((f) => f.bucket === "crash");
    assert.ok(crashes.length > 0);
    for (const f of crashes) {
      assert.equal(f.state, "fixed");
      assert.equal(f.resolved_app_build, buildC);
      assert.notEqual(f.last_app_build, buildC, "a re-check that passes is not a sighting");
    }
    for (const f of rows.filter((x) => x.bucket !== "crash")) assert.equal(f.last_app_build, buildC, `#${f.id} still fails under ${buildC}`);
    const text = c.cli(["failures", "--state", "fixed"]);
    for (const f of crashes) {
      assert.match(text.stdout, new RegExp(`^#${f.id} .*\\[first seen ${f.first_app_build}, last seen ${f.last_app_build}, fixed in ${buildC}\\]$`, "m"), text.stdout);
    }
  });
});
