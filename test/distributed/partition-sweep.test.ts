// A network partition in a sweep fleet without a shared filesystem: the worker's link to the
// coordinator goes down past the lease and comes back up, once while it runs a chunk and once in
// the middle of a chunk's `put` transfer. The coordinator takes the worker's chunks back when the
// lease runs out. After the link heals, a late report counts once (ARCHITECTURE.md §3: a late
// `done` of a reissued chunk is booked, idempotently) and a transfer cut short is not booked at
// all: what landed of it is removed and its range swept again. The books audit clean after each
// (test/helpers/books.ts). Real namespaces (partition-network.ts; needs root and the system tools
// "unshare" and ip "netns" with tc, as CI runs), real coordinator, sockets and SQLite.
import assert from "node:assert/strict";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { assertBooksTrue, exitOwed } from "../helpers/books.ts";
import { mergeRanges, type Range } from "../../src/core/ranges.ts";
import { Campaign, distributedTable, finished, waitFor } from "../helpers/campaign.ts";
import { coordinatorOn, landingDirs, landingInPart, ownNetwork, paddedGenerator, remoteWorker } from "./partition-network.ts";

const status = (c: Campaign, id: number) => c.one<{ status: string }>("SELECT status FROM chunk WHERE id = ?", id).status;

/** Every seed chunk `chunkId` held lies in a complete chunk of its lane (whichever booked it: its late report, or the chunk that swept it again). */
function covered(c: Campaign, chunkId: number): void {
  const ch = c.one<{ seed_from: number; seed_to: number; lane_id: number }>("SELECT seed_from, seed_to, lane_id FROM chunk WHERE id = ?", chunkId);
  const complete = mergeRanges(
    c.query<{ seed_from: number; seed_to: number }>("SELECT seed_from, seed_to FROM chunk WHERE lane_id = ? AND status = 'complete'", ch.lane_id).map((r): Range => [r.seed_from, r.seed_to]),
  );
  assert.ok(
    complete.some(([a, b]) => a <= ch.seed_from && ch.seed_to <= b),
    `seeds ${ch.seed_from}..${ch.seed_to} of chunk ${chunkId} were swept: complete ranges ${JSON.stringify(complete)}`,
  );
}

/** A transfer cut short: nothing booked under the chunk's id, and its range swept again by exactly one complete chunk. */
function sweptAgainOnce(c: Campaign, chunkId: number): void {
  const ch = c.one<{ seed_from: number; seed_to: number; lane_id: number; status: string }>("SELECT seed_from, seed_to, lane_id, status FROM chunk WHERE id = ?", chunkId);
  assert.notEqual(ch.status, "complete", `chunk ${chunkId} was never booked complete`);
  assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure_seed WHERE chunk_id = ?", chunkId).n, 0, `nothing of chunk ${chunkId} was booked`);
  for (const seed of [ch.seed_from, ch.seed_to]) {
    const n = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE lane_id = ? AND status = 'complete' AND seed_from <= ? AND seed_to >= ?", ch.lane_id, seed, seed).n;
    assert.equal(n, 1, `seed ${seed} of chunk ${chunkId} was swept again, once`);
  }
}

test("the worker's link down past the lease while it runs a chunk, then up: the chunk is taken back, the worker carries on, its range is covered and nothing counted twice", async () => {
  // Chunks of several seconds (20 ms a seed), a 2 s lease.
  const c = new Campaign({ extra: distributedTable({ lease: 2 }), defaults: { chunk_minutes: 0.08, bootstrap_seeds: 150 }, costMs: 20 });
  const net = ownNetwork();
  try {
    const coord = await coordinatorOn(c, net, "30s");
    const worker = remoteWorker(c, net, coord.port);
    const held = await waitFor("the worker to hold a chunk", () => c.query<{ id: number }>("SELECT id FROM chunk WHERE status = 'leased'")[0]?.id, 60_000);

    net.cut();
    try {
      await waitFor("the lease to run out and the chunk to be taken back", () => (status(c, held) === "reissued" ? true : undefined), 20_000);
    } finally {
      net.heal();
    }
    // The same connection carries on: the worker reports the chunk it went on running (booked once if whole, else aborted).
    await waitFor("the worker's late report of the chunk", () => (status(c, held) !== "reissued" ? true : undefined), 60_000);

    const [rc, rw] = await Promise.all([finished(coord, 90_000, "the coordinator"), finished(worker, 90_000, "the worker")]);
    assert.equal(rw.code, 0, `the worker outlived the partition and was stopped:\n${rw.stdout}${rw.stderr}`);
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assert.match(rc.stdout, new RegExp(`chunk ${held}\\b[^\\n]*no heartbeat for 2s`), "the coordinator says why it took the chunk back");
    covered(c, held);
    assertBooksTrue(c, "after a partition past the lease");
    assert.deepEqual(landingDirs(c), []);
  } finally {
    net.remove();
    c.cleanup();
  }
});

test("the worker's link down in the middle of a chunk's transfer, past the lease, then up: the half-landed files are removed, the rest is not wanted, the chunk is swept again once", async () => {
  const pad = paddedGenerator(4 * 2 ** 20);
  const c = new Campaign({ generator: pad.table, extra: distributedTable({ lease: 2 }), defaults: { chunk_minutes: 0.05, bootstrap_seeds: 100 }, costMs: 20 });
  const net = ownNetwork();
  // 4 MB/s from the worker: each 4 MiB artifact (5.3 MiB in base64) takes over a second to send, in four puts.
  net.slowUplink("32mbit");
  try {
    const coord = await coordinatorOn(c, net, "30s");
    const worker = remoteWorker(c, net, coord.port);
    const partial = await waitFor("a chunk's artifact to be landing in part", () => landingInPart(c, pad.bytes), 60_000, 20);

    net.cut();
    try {
      await waitFor("the chunk being sent to be taken back", () => (status(c, partial.chunk) === "reissued" ? true : undefined), 20_000);
    } finally {
      net.heal();
    }
    // The next piece after the link heals finds the chunk taken back: what landed goes, the worker stops sending it.
    await waitFor("the half-landed files to be removed", () => (existsSync(partial.dir) ? undefined : true), 60_000);

    const [rc, rw] = await Promise.all([finished(coord, 120_000, "the coordinator"), finished(worker, 120_000, "the worker")]);
    assert.equal(rw.code, 0, rw.stdout + rw.stderr);
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assert.match(rc.stdout, new RegExp(`the files of chunk ${partial.chunk} are not booked \\(the worker sent \\d+ file\\(s\\) of [\\d,]+ bytes, 0 of 0 bytes landed\\); it is swept again`));
    sweptAgainOnce(c, partial.chunk);
    assertBooksTrue(c, "after a partition mid-transfer");
    // Every failure booked holds its whole artifact: nothing ingested in part.
    const dirs = c.query<{ artifact_dir: string }>("SELECT artifact_dir FROM failure");
    assert.ok(dirs.length >= 1);
    for (const { artifact_dir } of dirs) assert.equal(statSync(join(c.outDir, artifact_dir, "pad.bin")).size, pad.bytes, `${artifact_dir}/pad.bin is whole`);
    assert.deepEqual(landingDirs(c), []);
  } finally {
    net.remove();
    pad.remove();
    c.cleanup();
  }
});
