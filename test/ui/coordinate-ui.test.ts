// `coordinate --ui`: the coordinator serves the same dashboard and /metrics as `run`, naming it in
// its banner, and closes it with the session.
import assert from "node:assert/strict";
import { test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, distributedTable, start } from "../helpers/campaign.ts";
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
    const code = await coord.done;
    assert.equal(code, exitOwed(c, coord.stdout()), coord.stdout() + coord.stderr());
    await worker.result;
    await assert.rejects(get(coord.url), /ECONNREFUSED/, "the dashboard closed with the session");
  } finally {
    c.cleanup();
  }
});
