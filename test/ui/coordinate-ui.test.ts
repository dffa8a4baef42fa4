// `coordinate --ui`: the coordinator serves the same dashboard and /metrics as `run`, naming it in
// its banner, and closes it with the session. Its workers are shown with their liveness and the
// chunk in hand (range and age) from the store's worker and chunk rows; once the session is over
// `fuzzfleet ui` shows the worker as left.
import assert from "node:assert/strict";
import { test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, distributedTable, start } from "../helpers/campaign.ts";
import type { DashboardSnapshot } from "../../src/ui/source.ts";
import { get, serve } from "./serve.ts";

test("coordinate --ui serves the dashboard and /metrics of its live session, and stops serving when the session ends", async () => {
  const c = new Campaign({ extra: distributedTable(), costMs: 1 });
  try {
    const coord = await serve(c, ["coordinate", "--for", "8s", "--port", "0", "--ui", "127.0.0.1:0"], /dashboard: (http:\/\/127\.0\.0\.1:\d+\/)/);
    const port = Number(/listening on [^:\s]+:(\d+)/.exec(coord.stdout())![1]);
    const worker = start(c, ["worker", "--master", `127.0.0.1:${port}`, "-j", "1"]);
    const page = await get(coord.url);
    assert.equal(page.status, 200);
    assert.match(page.body, /<html/i);
    let metrics = "";
    for (const end = Date.now() + 30_000; !/^fuzzfleet_chunks_completed_total [1-9]/m.test(metrics); await new Promise((r) => setTimeout(r, 200))) {
      assert.ok(Date.now() < end, `no completed chunk in /metrics:\n${metrics}`);
      metrics = (await get(`${coord.url}metrics`)).body;
    }
    let holding: NonNullable<DashboardSnapshot["workers"]>[number] | undefined;
    for (const end = Date.now() + 30_000; !holding; await new Promise((r) => setTimeout(r, 100))) {
      assert.ok(Date.now() < end, "the worker was never seen holding a chunk");
      const snap = JSON.parse((await get(`${coord.url}snapshot.json`)).body) as DashboardSnapshot;
      holding = snap.workers?.find((w) => w.holding.length > 0);
    }
    assert.match(holding.label, /#\d+$/);
    assert.equal(holding.liveness, "alive");
    assert.match(holding.holding[0]!.text, /^chunk \d+ \S+ [\d,]+\.\.[\d,]+$/, "the chunk in hand, its lane and range");
    assert.ok(holding.holding[0]!.ageSeconds !== null && holding.holding[0]!.ageSeconds >= 0);
    assert.match(metrics, /^fuzzfleet_worker_chunks_held\{worker="[^"]+"\} \d+$/m);
    const code = await coord.done;
    assert.equal(code, exitOwed(c, coord.stdout()), coord.stdout() + coord.stderr());
    await worker.result;
    await assert.rejects(get(coord.url), /ECONNREFUSED/, "the dashboard closed with the session");
    const ui = await serve(c, ["ui", "--listen", "127.0.0.1:0"], /^dashboard \(read-only\): (http:\/\/127\.0\.0\.1:\d+\/)/m);
    try {
      const snap = JSON.parse((await get(`${ui.url}snapshot.json`)).body) as DashboardSnapshot;
      assert.deepEqual(snap.workers?.map((w) => [w.label, w.liveness, w.holding.length]), [[holding.label, "left", 0]], "the finished session's worker left");
    } finally {
      ui.child.kill("SIGINT");
      await ui.done;
    }
  } finally {
    c.cleanup();
  }
});
