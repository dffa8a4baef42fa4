// The low-water mark with a slow and a fast worker, and recovery after SIGKILL of a worker or
// of the coordinator itself.
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { loadConfig } from "../../src/config/load.ts";
import { laneIdentity } from "../../src/config/schema.ts";
import { insertChunk } from "../../src/store/chunks.ts";
import { openStore } from "../../src/store/db.ts";
import { insertGeneration } from "../../src/store/generations.ts";
import { insertLane } from "../../src/store/lanes.ts";
import { insertSession } from "../../src/store/sessions.ts";
import { generationHash } from "../../src/config/identity.ts";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, coverageViolations, distributedTable, processesMentioning, start, startCoordinator, waitFor } from "../helpers/campaign.ts";

interface ChunkRow {
  id: number;
  seed_from: number;
  seed_to: number;
  status: string;
  worker_id: number;
}

test("the cursor never passes a chunk still held by a slow worker; SIGKILLing it reissues the chunk and the cursor catches up", async () => {
  const c = new Campaign({ extra: distributedTable({ lease: 20, drainGraceMinutes: 1 }), defaults: { chunk_minutes: 0.05, bootstrap_seeds: 40 } });
  try {
    const coord = await startCoordinator(c, ["--for", "70s"]);
    const master = `127.0.0.1:${coord.port}`;
    const slow = start(c, ["worker", "--master", master, "-j", "1"], { PLANTED_COST_MS: "2000" });
    const held = await waitFor("the slow worker to lease a chunk", () => c.query<ChunkRow>("SELECT * FROM chunk WHERE status = 'leased'")[0]);
    const fast = start(c, ["worker", "--master", master, "-j", "1"], { PLANTED_COST_MS: "0.5" });
    await waitFor(
      "a complete chunk above the held one",
      () => (c.query<ChunkRow>("SELECT * FROM chunk WHERE status = 'complete' AND seed_from > ?", held.seed_to).length >= 2 ? true : undefined),
      40_000,
    );
    const lane = () => c.one<{ cursor: number }>("SELECT cursor FROM lane");
    assert.ok(lane().cursor <= held.seed_from, `cursor ${lane().cursor} must not pass the held chunk at ${held.seed_from}`);
    assert.equal(c.one<ChunkRow>("SELECT * FROM chunk WHERE id = ?", held.id).status, "leased");

    slow.child.kill("SIGKILL");
    // The worker's generator dies with it (fuzzfleet's child watchdog), within seconds.
    await waitFor("the killed worker's generator to die", () => (processesMentioning(join(c.outDir, "tmp", `chunk-${held.id}`)).length === 0 ? true : undefined), 10_000);
    await waitFor("the held chunk to be reissued", () =>
      c.one<ChunkRow>("SELECT * FROM chunk WHERE id = ?", held.id).status === "reissued" ? true : undefined,
    );
    await waitFor("the cursor to pass the reissued range", () => (lane().cursor > held.seed_to ? true : undefined), 40_000);
    const resweep = c.query<ChunkRow>("SELECT * FROM chunk WHERE status = 'complete' AND seed_from <= ? AND seed_to >= ?", held.seed_from, held.seed_from);
    assert.ok(resweep.length >= 1, "the reissued range was swept by the other worker");
    assert.deepEqual(coverageViolations(c), []);
    coord.child.kill("SIGINT");
    const [rc, rf] = await Promise.all([coord.result, fast.result]);
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assert.match(rc.stdout, new RegExp(`chunk ${held.id} \\(small [\\d,]+\\.\\.[\\d,]+\\) reissued: worker \\S+ left`));
    assert.equal(rf.code, 0);
    assert.deepEqual(coverageViolations(c), []);
  } finally {
    c.cleanup();
  }
});

test("after SIGKILL of the coordinator, a new one reclaims the lock and re-sweeps the in-flight range first", async () => {
  // At 300 ms a seed the first chunk (10 seeds, the least a chunk holds) takes 3 s, and so does the next.
  const c = new Campaign({ extra: distributedTable({ lease: 20 }), defaults: { chunk_minutes: 0.05, bootstrap_seeds: 10 } });
  try {
    const coord = await startCoordinator(c, ["--for", "5m"]);
    const worker = start(c, ["worker", "--master", `127.0.0.1:${coord.port}`, "-j", "1"], { PLANTED_COST_MS: "300" });
    await waitFor("one complete chunk and one leased", () => {
      const complete = c.query<ChunkRow>("SELECT * FROM chunk WHERE status = 'complete'").length;
      const leased = c.query<ChunkRow>("SELECT * FROM chunk WHERE status = 'leased'").length;
      return complete >= 1 && leased >= 1 ? true : undefined;
    }, 60_000);
    const held = c.one<ChunkRow>("SELECT * FROM chunk WHERE status = 'leased' ORDER BY id LIMIT 1");
    const cursor = c.one<{ cursor: number }>("SELECT cursor FROM lane").cursor;
    assert.equal(cursor, held.seed_from, "the cursor stops at the leased chunk");
    coord.child.kill("SIGKILL");
    const rw = await worker.result;
    assert.equal(rw.code, 4, "a worker that loses its coordinator exits 4 (runtime error)");
    assert.match(rw.stdout, /lost the coordinator/);
    await waitFor("the worker's generator to be gone", () => (processesMentioning(join(c.outDir, "tmp", `chunk-${held.id}`)).length === 0 ? true : undefined), 30_000);
    assert.equal(c.one<{ cursor: number }>("SELECT cursor FROM lane").cursor, cursor);

    // Stopped with Ctrl-C once the cursor passed the range that was in flight.
    const again = await startCoordinator(c, ["--for", "2m"]);
    assert.match(again.output(), /small: [\d,]+ seed\(s\) left uncovered by an earlier session — re-sweeping them first/);
    assert.match(again.output(), /session\(s\) #1 ended without closing \(the process died\): marked crashed/);
    assert.deepEqual(c.one("SELECT status, ended_at FROM session WHERE id = 1"), { status: "crashed", ended_at: null });
    assert.equal(c.one<ChunkRow>("SELECT * FROM chunk WHERE id = ?", held.id).status, "aborted:lost");
    const w2 = start(c, ["worker", "--master", `127.0.0.1:${again.port}`, "-j", "1"], { PLANTED_COST_MS: "1" });
    await waitFor("the cursor to pass the range that was in flight", () => (c.one<{ cursor: number }>("SELECT cursor FROM lane").cursor > held.seed_to ? true : undefined), 60_000);
    again.child.kill("SIGINT");
    const [rc, r2] = await Promise.all([again.result, w2.result]);
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assert.equal(r2.code, 0);
    const first = c.one<ChunkRow>("SELECT * FROM chunk WHERE session_id = 2 ORDER BY id LIMIT 1");
    assert.equal(first.seed_from, held.seed_from, "the in-flight range is swept first");
    assert.ok(c.one<{ cursor: number }>("SELECT cursor FROM lane").cursor > held.seed_to);
    assert.deepEqual(coverageViolations(c), []);
  } finally {
    c.cleanup();
  }
});

test("coordinate --lane names the uncovered seeds of the lanes it serves only, and marks a dead session crashed", async () => {
  const c = new Campaign({
    extra: distributedTable(),
    lanes: {
      small: 'base_seed = 1\nargs = ["--size", "small"]',
      large: 'base_seed = 1000000\nargs = ["--size", "large"]',
    },
  });
  try {
    // As a killed coordinator leaves the store: its session 'running', a chunk of each lane leased.
    const config = loadConfig(c.configPath);
    const db = openStore(c.dbPath);
    const gen = insertGeneration(db, generationHash(config), "initial");
    const session = insertSession(db, { generationId: gen, requestedSeconds: 600, appBuild: null, transport: "distributed", host: "h", port: 9 });
    for (const l of config.lanes) {
      const laneId = insertLane(db, gen, l.name, laneIdentity(l), l.baseSeed);
      insertChunk(db, { sessionId: session, laneId, seedFrom: l.baseSeed, seedTo: l.baseSeed + 49, appBuild: null, status: "leased", workerId: null });
    }
    db.close();
    const coord = await startCoordinator(c, ["--lane", "small", "--for", "4s"]);
    const r = await coord.result;
    assert.equal(r.code, exitOwed(c, r.stdout), r.stdout + r.stderr);
    assert.match(r.stdout, /small: 50 seed\(s\) left uncovered by an earlier session/);
    assert.doesNotMatch(r.stdout, /large: .*left uncovered/);
    assert.deepEqual(c.one("SELECT status FROM session WHERE id = ?", session), { status: "crashed" });
    assert.deepEqual(
      c.query<{ status: string }>("SELECT status FROM chunk ORDER BY id").map((ch) => ch.status),
      ["aborted:lost", "aborted:lost"],
    );
  } finally {
    c.cleanup();
  }
});
