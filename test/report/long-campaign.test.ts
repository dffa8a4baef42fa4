// A long campaign: 150,000 complete chunks (a hundred workers with ten-minute chunks reach that in
// about eight days), forged quickly by direct inserts and upgraded by the store's own migrations.
// Every view still answers, and with the store's numbers: `report -o` writes its page (it used to
// exit 4 with "Maximum call stack size exceeded"), `ui` serves /snapshot.json and /metrics (they
// used to answer 500), `status` and `failures` agree with the rows.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
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
});
