// A long campaign: 150,000 complete chunks (a hundred workers with ten-minute chunks reach that in
// about eight days), forged quickly by direct inserts and upgraded by the store's own migrations.
// Every view still answers, and with the store's numbers: `report -o` writes its page (it used to
// exit 4 with "Maximum call stack size exceeded"), `ui` serves /snapshot.json and /metrics (they
// used to answer 500), `status` and `failures` agree with the rows.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { estimateDiscovery, type DiscoveryEstimate } from "../../src/core/discovery-estimate.ts";
import { Campaign } from "../helpers/campaign.ts";
import { forgeLongCampaign, upgradeStore, type LongCampaignFacts } from "../store/long-store.ts";
import { parseExposition } from "../ui/exposition.ts";
import { get, serve, type Served } from "../ui/serve.ts";

const CHUNKS = 150_000;

describe("a campaign of 150,000 complete chunks", () => {
  const c = new Campaign({ lanes: { small: 'base_seed = 1\nargs = ["--size", "small"]', large: 'base_seed = 1000000001\nargs = ["--size", "large"]' } });
  let facts: LongCampaignFacts;
  let ui: Served | null = null;
  before(() => {
    facts = forgeLongCampaign(c.dbPath, { chunks: CHUNKS, lanes: ["small", "large"], seedsPerChunk: 500, failures: 300, hitsOf: (i) => (i % 5) + 1, pending: 40 });
    upgradeStore(c.dbPath);
  });
  after(async () => {
    ui?.child.kill("SIGINT");
    await ui?.done;
    c.cleanup();
  });

  test("report -o writes the page, its snapshot counting every chunk", () => {
    const out = join(c.dir, "report");
    const r = c.cli(["report", "-o", out]);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const html = readFileSync(join(out, "index.html"), "utf8");
    const json = /<script id="embedded" type="application\/json">(.*?)<\/script>/s.exec(html)?.[1];
    assert.ok(json, "the snapshot is embedded");
    const { snapshot } = JSON.parse(json) as { snapshot: { sweep: { totals: { chunksComplete: number; seedsSwept: number; finds: number; distinct: number; hits: number }; series: { t: number[] } } } };
    const t = snapshot.sweep.totals;
    assert.deepEqual(
      { chunks: t.chunksComplete, seeds: t.seedsSwept, finds: t.finds, distinct: t.distinct, hits: t.hits },
      { chunks: CHUNKS, seeds: facts.seedsSwept, finds: facts.finds, distinct: facts.distinct, hits: facts.hits },
    );
    assert.ok(snapshot.sweep.series.t.length > 0 && snapshot.sweep.series.t.length <= 240, `a plot of at most 240 points (${snapshot.sweep.series.t.length})`);
  });

  test("ui serves /snapshot.json and /metrics with the store's numbers", async () => {
    ui = await serve(c, ["ui", "--listen", "127.0.0.1:0"], /^dashboard \(read-only\): (http:\/\/127\.0\.0\.1:\d+\/)/m);
    const snap = await get(ui.url + "snapshot.json");
    assert.equal(snap.status, 200, snap.body);
    const totals = (JSON.parse(snap.body) as { sweep: { totals: { chunksComplete: number; seedsSwept: number } } }).sweep.totals;
    assert.equal(totals.chunksComplete, CHUNKS);
    assert.equal(totals.seedsSwept, facts.seedsSwept);
    const m = await get(ui.url + "metrics");
    assert.equal(m.status, 200, m.body);
    const fams = parseExposition(m.body);
    assert.equal(fams.get("fuzzfleet_chunks_completed_total")?.samples[0]?.value, CHUNKS);
    assert.equal(fams.get("fuzzfleet_seeds_swept_total")?.samples[0]?.value, facts.seedsSwept);
    assert.equal(fams.get("fuzzfleet_finds_total")?.samples[0]?.value, facts.finds);
    for (const [lane, seeds] of facts.laneSeeds) {
      assert.equal(fams.get("fuzzfleet_lane_covered_seeds_total")?.samples.find((s) => s.labels.lane === lane)?.value, seeds, `lane ${lane}`);
    }
  });

  test("status --json counts every chunk and failure", () => {
    const r = c.cli(["status", "--json"]);
    assert.equal(r.code, 0, r.stderr);
    const s = JSON.parse(r.stdout) as { totals: { chunks: number; seeds: number }; failure_totals: { distinct: number; distinct_hits: number; pending_finds: number } };
    assert.equal(s.totals.chunks, CHUNKS);
    assert.equal(s.totals.seeds, facts.seedsSwept);
    assert.deepEqual([s.failure_totals.distinct, s.failure_totals.distinct_hits, s.failure_totals.pending_finds], [facts.distinct, facts.hits, 40]);
  });

  test("failures shows one page and says where it is; --page walks them, a page past the last says how many there are", () => {
    const first = c.cli(["failures", "--state", "all"]);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stdout.split("\n").filter((l) => /^#\d+ /.test(l)).length, 100, "the default page");
    assert.match(first.stdout, /\(distinct failures 1–100 of 300: page 1 of 3; --page 2 for the next, --limit N for more a page\)/);
    assert.match(first.stdout, /300 distinct failures \(900 hits\) \+ 40 finds pending minimization \(40 hits\) = 940 hits/, "the totals cover every failure");
    const last = c.cli(["failures", "--state", "all", "--limit", "120", "--page", "3", "--json"]);
    assert.equal(last.code, 0, last.stderr);
    const d = JSON.parse(last.stdout) as { page: { limit: number; page: number; total: number; pages: number }; failures: { id: number }[]; totals: { distinct: number } };
    assert.deepEqual(d.page, { limit: 120, page: 3, total: 300, pages: 3 });
    assert.equal(d.failures.length, 60);
    assert.equal(d.totals.distinct, 300);
    const all = [1, 2, 3].flatMap((page) => (JSON.parse(c.cli(["failures", "--state", "all", "--page", String(page), "--json"]).stdout) as { failures: { id: number }[] }).failures.map((f) => f.id));
    assert.equal(new Set(all).size, 300, "the pages hold every distinct failure once");
    const past = c.cli(["failures", "--state", "all", "--page", "4"]);
    assert.equal(past.code, 0, past.stderr);
    assert.equal(past.stdout, "page 4 is past the last: 300 distinct failures make 3 pages of 100 (--page 1 to --page 3)\n");
    const bad = c.cli(["failures", "--page", "0"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--page/);
  });

  test("status, /metrics and report say when to stop, as the estimate over the store's hits says, for the campaign and per lane", async () => {
    const r = c.cli(["status", "--json"]);
    assert.equal(r.code, 0, r.stderr);
    const d = (JSON.parse(r.stdout) as { discovery: { campaign: DiscoveryEstimate; lanes: (DiscoveryEstimate & { lane: string })[] } }).discovery;
    const hits = c.query<{ hits: number }>("SELECT hits FROM failure WHERE minimize_state IS NULL").map((f) => f.hits);
    assert.deepEqual(d.campaign, JSON.parse(JSON.stringify(estimateDiscovery(facts.seedsSwept, hits))));
    assert.equal(d.campaign.singletons, facts.singletons);
    assert.equal(d.campaign.doubletons, facts.doubletons);
    for (const [lane, seeds] of facts.laneSeeds) {
      const laneHits = c
        .query<{ n: number }>(
          `SELECT COUNT(*) AS n FROM failure_seed fs JOIN failure f ON f.id = fs.failure_id JOIN chunk ch ON ch.id = fs.chunk_id JOIN lane l ON l.id = ch.lane_id
            WHERE l.name = ? AND f.minimize_state IS NULL GROUP BY fs.failure_id`,
          lane,
        )
        .map((x) => x.n);
      assert.deepEqual(d.lanes.find((l) => l.lane === lane), { lane, ...JSON.parse(JSON.stringify(estimateDiscovery(seeds, laneHits))) }, `lane ${lane}`);
    }
    const text = c.cli(["status"]).stdout;
    assert.match(text, /when to stop/);
    assert.match(text, new RegExp(`all lanes +new failure: ${d.campaign.nextNewProbability!.toPrecision(2)} per seed`));
    ui ??= await serve(c, ["ui", "--listen", "127.0.0.1:0"], /^dashboard \(read-only\): (http:\/\/127\.0\.0\.1:\d+\/)/m);
    const fams = parseExposition((await get(ui.url + "metrics", { fresh: true })).body);
    assert.equal(fams.get("fuzzfleet_discovery_next_new_probability")?.samples[0]?.value, d.campaign.nextNewProbability);
    assert.equal(fams.get("fuzzfleet_discovery_estimated_failures_high")?.samples[0]?.value, d.campaign.interval[1]);
    for (const l of d.lanes) {
      assert.equal(fams.get("fuzzfleet_lane_discovery_seeds_to_next_new")?.samples.find((s) => s.labels.lane === l.lane)?.value, l.unitsToNextNew, l.lane);
    }
    const html = readFileSync(join(c.dir, "report", "index.html"), "utf8");
    const embedded = JSON.parse(/<script id="embedded" type="application\/json">(.*?)<\/script>/s.exec(html)![1]!) as { snapshot: { sweep: { discovery: typeof d } } };
    assert.deepEqual(embedded.snapshot.sweep.discovery, d, "the static report carries the same estimate");
  });
});
