// A worker without the shared directory SIGKILLed while it sends a chunk's files: the generator's
// failures weigh megabytes and the worker's uplink is slowed, so the transfer takes many `put`
// frames; the kill comes once the coordinator holds an artifact in part (the event, not a sleep).
// The coordinator sees the connection drop, removes what landed, takes the chunk back; another
// worker sweeps its range again and sends its files whole. Nothing ingested twice or in part, the
// books audit clean (test/helpers/books.ts). Real namespaces (partition-network.ts; needs root and
// the system tools "unshare" and ip "netns" with tc, as CI runs), real coordinator, sockets and SQLite.
import assert from "node:assert/strict";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { assertBooksTrue, exitOwed } from "../helpers/books.ts";
import { Campaign, distributedTable, finished, waitFor } from "../helpers/campaign.ts";
import { coordinatorOn, landingDirs, landingInPart, ownNetwork, paddedGenerator, remoteWorker } from "./partition-network.ts";

test("a worker SIGKILLed mid-transfer: what landed is removed, the chunk is reissued and swept again once with its files whole, nothing ingested twice or in part", async () => {
  const pad = paddedGenerator(4 * 2 ** 20);
  const c = new Campaign({ generator: pad.table, extra: distributedTable({ lease: 20 }), defaults: { chunk_minutes: 0.05, bootstrap_seeds: 100 }, costMs: 20 });
  const net = ownNetwork();
  // 4 MB/s from the worker: each 4 MiB artifact (5.3 MiB in base64) takes over a second to send, in four puts.
  net.slowUplink("32mbit");
  try {
    const coord = await coordinatorOn(c, net, "30s");
    const first = remoteWorker(c, net, coord.port);
    const partial = await waitFor("a chunk's artifact to be landing in part", () => landingInPart(c, pad.bytes), 60_000, 20);

    first.child.kill("SIGKILL");
    const killed = await finished(first, 10_000, "the killed worker");
    assert.equal(killed.signal, "SIGKILL", killed.stdout + killed.stderr);
    // Long before the 20 s lease: the coordinator acts on the dropped connection.
    await waitFor("the chunk being sent to be taken back", () => (c.one<{ status: string }>("SELECT status FROM chunk WHERE id = ?", partial.chunk).status === "reissued" ? true : undefined), 10_000);
    assert.ok(!existsSync(partial.dir), "what landed of the chunk is removed before it is taken back");
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure_seed WHERE chunk_id = ?", partial.chunk).n, 0, "nothing of the chunk was booked");

    const second = remoteWorker(c, net, coord.port);
    const [rc, rw] = await Promise.all([finished(coord, 120_000, "the coordinator"), finished(second, 120_000, "the second worker")]);
    assert.equal(rw.code, 0, rw.stdout + rw.stderr);
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assert.match(rc.stdout, new RegExp(`chunk ${partial.chunk}\\b[^\\n]*left`), "the coordinator says the chunk was taken back from the worker that left");

    const ch = c.one<{ seed_from: number; seed_to: number; lane_id: number; status: string }>("SELECT seed_from, seed_to, lane_id, status FROM chunk WHERE id = ?", partial.chunk);
    assert.equal(ch.status, "reissued");
    for (const seed of [ch.seed_from, ch.seed_to]) {
      const n = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE lane_id = ? AND status = 'complete' AND seed_from <= ? AND seed_to >= ?", ch.lane_id, seed, seed).n;
      assert.equal(n, 1, `seed ${seed} of the killed chunk was swept again, once`);
    }
    // The killed chunk's range had failures (one was landing): they are booked once, from the chunk that swept it again.
    const again = c.query<{ seed: number; chunk_id: number }>("SELECT seed, chunk_id FROM failure_seed WHERE seed BETWEEN ? AND ?", ch.seed_from, ch.seed_to);
    assert.ok(again.length >= 1, "the failures of the killed chunk's range were recorded");
    assert.equal(new Set(again.map((r) => r.seed)).size, again.length, "each failing seed once");
    assertBooksTrue(c, "after a worker killed mid-transfer");
    for (const { artifact_dir } of c.query<{ artifact_dir: string }>("SELECT artifact_dir FROM failure")) {
      assert.equal(statSync(join(c.outDir, artifact_dir, "pad.bin")).size, pad.bytes, `${artifact_dir}/pad.bin is whole`);
    }
    assert.deepEqual(landingDirs(c), []);
  } finally {
    net.remove();
    pad.remove();
    c.cleanup();
  }
});
