// /metrics end to end: a planted campaign swept by `run`, then served by `fuzzfleet ui`; the
// scrape is read by a strict parser of the Prometheus text format (written here, so the test
// does not trust the writer it checks) and every value is compared with the store. The server's
// bounds are checked on the same server: unknown paths, methods, bodies, Host names, streams.
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, test } from "node:test";
import { mergeRanges, totalSize } from "../../src/core/ranges.ts";
import { Campaign } from "../helpers/campaign.ts";
import { parseExposition, type Family } from "./exposition.ts";
import { get, serve, type Served } from "./serve.ts";

function value(fams: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  return fams.get(name)?.samples.find((s) => JSON.stringify(Object.entries(s.labels).sort()) === JSON.stringify(Object.entries(labels).sort()))?.value;
}

describe("/metrics", () => {
  const c = new Campaign({
    lanes: { small: 'base_seed = 1\nargs = ["--size", "small"]', "large-v2": 'base_seed = 5000000\nargs = ["--size", "large"]' },
    costMs: 0.5,
  });
  let ui: Served;
  before(async () => {
    const r = c.cli(["run", "--for", "6s"]);
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    ui = await serve(c, ["ui", "--listen", "127.0.0.1:0"], /^dashboard \(read-only\): (http:\/\/127\.0\.0\.1:\d+\/)/m);
  });
  after(async () => {
    ui?.child.kill("SIGINT");
    await ui?.done;
    c.cleanup();
  });

  test("the scrape is strict text format and every value agrees with the store", async () => {
    const r = await get(ui.url + "metrics");
    assert.equal(r.status, 200);
    assert.equal(r.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    const fams = parseExposition(r.body);
    const lanes = c.query<{ id: number; name: string; base_seed: number; cursor: number }>("SELECT * FROM lane WHERE retired = 0 ORDER BY id");
    assert.deepEqual(lanes.map((l) => l.name), ["small", "large-v2"]);
    for (const l of lanes) {
      const lane = { lane: l.name };
      assert.equal(value(fams, "fuzzfleet_lane_cursor", lane), l.cursor, `cursor of ${l.name}`);
      assert.equal(value(fams, "fuzzfleet_lane_base_seed", lane), l.base_seed);
      assert.equal(value(fams, "fuzzfleet_lane_covered_seeds_total", lane), l.cursor - l.base_seed);
      assert.ok(l.cursor > l.base_seed, `${l.name} made progress`);
      const finds = c.one<{ n: number }>("SELECT COALESCE(SUM(finds), 0) AS n FROM chunk WHERE lane_id = ? AND status = 'complete'", l.id).n;
      assert.equal(value(fams, "fuzzfleet_lane_finds_total", lane), finds);
    }
    const chunks = c.query<{ seed_from: number; seed_to: number; lane_id: number; finds: number }>("SELECT * FROM chunk WHERE status = 'complete'");
    assert.equal(value(fams, "fuzzfleet_chunks_completed_total"), chunks.length);
    assert.equal(value(fams, "fuzzfleet_finds_total"), chunks.reduce((n, ch) => n + ch.finds, 0));
    const swept = lanes.reduce((n, l) => n + totalSize(mergeRanges(chunks.filter((ch) => ch.lane_id === l.id).map((ch) => [ch.seed_from, ch.seed_to]))), 0);
    assert.equal(value(fams, "fuzzfleet_seeds_swept_total"), swept);
    for (const state of ["open", "fixed", "stale"]) {
      assert.equal(value(fams, "fuzzfleet_failures", { state }), c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE state = ? AND minimize_state IS NULL", state).n, `${state} distinct failures`);
    }
    assert.equal(value(fams, "fuzzfleet_failure_hits_total"), c.one<{ n: number }>("SELECT COALESCE(SUM(hits), 0) AS n FROM failure WHERE minimize_state IS NULL").n, "hits of the distinct failures");
    assert.ok(value(fams, "fuzzfleet_failure_hits_total")! > 0, "the planted bugs were found");
    assert.equal(value(fams, "fuzzfleet_up"), 0, "nothing runs");
    assert.deepEqual(fams.get("fuzzfleet_chunks_in_flight")!.samples, [], "no chunk in flight");
  });

  test("the server is bounded: unknown paths 404, other methods 405, a body 413, a foreign Host 403", async () => {
    assert.equal((await get(ui.url + "nope")).status, 404);
    assert.equal((await get(ui.url + "../etc/passwd")).status, 404);
    assert.equal((await get(ui.url + "failure/999999")).status, 404);
    assert.equal((await get(ui.url, { method: "DELETE" })).status, 405);
    assert.equal((await get(ui.url, { method: "POST", body: "x", headers: { "content-length": "1" } })).status, 413);
    assert.equal((await get(ui.url, { headers: { host: "attacker.example:80" } })).status, 403, "DNS rebinding: the Host must be a loopback name");
    assert.equal((await get(ui.url, { headers: { host: `localhost:${new URL(ui.url).port}` } })).status, 200);
  });

  test("at most 16 event streams at once; the 17th gets 503 and one closed makes room", async () => {
    const open: ReturnType<typeof request>[] = [];
    const connect = () =>
      new Promise<number>((resolve, reject) => {
        const req = request(ui.url + "events", (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on("error", reject);
        req.end();
        open.push(req);
      });
    try {
      for (let i = 0; i < 16; i++) assert.equal(await connect(), 200, `stream ${i + 1}`);
      assert.equal(await connect(), 503);
      open[0]!.destroy();
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(await connect(), 200, "room again");
    } finally {
      for (const req of open) req.destroy();
    }
  });
});
