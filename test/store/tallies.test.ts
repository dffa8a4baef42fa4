// The views' aggregates (store/tallies.ts, store/history.ts) kept by the statements that book
// chunks and failures: after an awkward sequence of bookings through the port (a chunk completed
// twice, a reissued chunk's late completion, lost chunks, a find merged and one promoted, seeds of
// one failure in two lanes), every aggregate equals what the migration's rebuild computes from
// the rows, and the port's views equal the old whole-table queries. Real SQLite files.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import Database from "better-sqlite3";
import { openStore } from "../../src/store/db.ts";
import { addChunkToHistory, MAX_SLOTS, readHistory } from "../../src/store/history.ts";
import { openSweepStore } from "../../src/store/sqlite/index.ts";
import { rebuildTallies } from "../../src/store/tallies.ts";

const root = mkdtempSync(join(tmpdir(), "ff-tallies-"));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const storePath = () => join(root, `s${n++}.db`);

/** The aggregate tables, in a stable order (history summed per lane: its slots depend on the order events came in). */
function aggregates(db: Database.Database) {
  return {
    chunkTally: db.prepare("SELECT * FROM chunk_tally WHERE chunks + aborted + reissued != 0 OR seeds != 0 ORDER BY lane_id, app_build").all(),
    laneFailure: db.prepare("SELECT * FROM lane_failure WHERE hits != 0 ORDER BY lane_id, failure_id").all(),
    quarantine: db.prepare("SELECT lane_id, reason, count FROM quarantine_tally WHERE count != 0 ORDER BY lane_id, reason").all(),
    history: (db.prepare("SELECT lane_id, SUM(seeds) AS seeds, SUM(finds) AS finds FROM sweep_history GROUP BY lane_id ORDER BY lane_id").all() as { lane_id: number; seeds: number; finds: number }[]).map(
      (r) => ({ ...r, seeds: Math.round(r.seeds * 1e6) / 1e6 }),
    ),
    distinct: db.prepare("SELECT COALESCE(SUM(n), 0) AS n FROM distinct_history").get(),
  };
}

test("aggregates kept by each booking equal the ones rebuilt from the rows, and the views equal the whole-table queries", () => {
  const path = storePath();
  const store = openSweepStore(path, { journal: "wal" });
  try {
    const gen = store.startGeneration(null, "cd".repeat(32), "initial");
    const small = store.restartLane(null, gen, "small", '{"args":[]}', 1);
    const large = store.restartLane(null, gen, "large", '{"args":["--large"]}', 1_000_001);
    const session = store.startSession({ generationId: gen, requestedSeconds: 60, appBuild: "build-a", transport: "local", host: "here", port: null });
    const book = (lane: number, from: number, to: number, appBuild: string | null = "build-a") =>
      store.bookChunk({ sessionId: session, laneId: lane, seedFrom: from, seedTo: to, appBuild, status: "running", workerId: null });
    const counts = (finds: number, quarantine = 0) => ({ clean: 100 - finds - quarantine, finds, quarantine, unshrunk: 0 });
    store.transaction(() => {
      const a = book(small, 1, 100);
      const distinct = store.recordFailure({ generationId: gen, laneId: small, dedupKey: "k1", bucket: "crash", seed: 7, shrunk: true, message: "m", repro: null, artifactDir: "a", appBuild: "build-a", signature: "crash: m" });
      store.addFailureSeed(distinct, 7, a);
      store.addFailureSeed(distinct, 8, a);
      store.saveQuarantineReasons(a, [{ reason: "invalid", inconclusive: false, count: 2 }]);
      store.completeChunk(a, 3, counts(2, 2));
      // Booked complete a second time (a late duplicate): counted once.
      store.completeChunk(a, 3, counts(2, 2));
      const b = book(large, 1_000_001, 1_000_100, null);
      store.addFailureSeed(distinct, 1_000_050, b);
      const pending = store.recordFailure({ generationId: gen, laneId: large, dedupKey: "p1", bucket: "crash", seed: 1_000_060, shrunk: false, message: "m 2", repro: null, artifactDir: "a", appBuild: null, signature: "crash: m" });
      store.addFailureSeed(pending, 1_000_060, b);
      store.completeChunk(b, 2, counts(2));
      // The pending find turns out to be the distinct failure: its seed moves there.
      store.mergeFind(pending, distinct);
      const c = book(small, 101, 200);
      const other = store.recordFailure({ generationId: gen, laneId: small, dedupKey: "p2", bucket: "wrong-code", seed: 150, shrunk: false, message: "x", repro: null, artifactDir: "a", appBuild: "build-a", signature: "wrong-code: x" });
      store.addFailureSeed(other, 150, c);
      store.promoteFind(other);
      store.endChunk(c, "reissued", null);
      // The reissued chunk reports after all: complete, no longer reissued.
      store.completeChunk(c, 4, counts(1));
      const d = book(small, 201, 300);
      store.endChunk(d, "aborted:timeout", 9);
      book(large, 1_000_101, 1_000_200);
      store.saveLaneProgress(small, 201, 25);
      store.saveLaneProgress(large, 1_000_101, 50);
    });
    assert.equal(store.abortLostChunks(), 1);
    const db = new Database(path);
    try {
      const kept = aggregates(db);
      assert.deepEqual(
        (kept.chunkTally as { lane_id: number; app_build: string; chunks: number; seeds: number; finds: number; quarantine: number; aborted: number; reissued: number }[]).map((t) => [t.lane_id, t.app_build, t.chunks, t.seeds, t.finds, t.quarantine, t.aborted, t.reissued]),
        [
          [small, "build-a", 2, 200, 3, 2, 1, 0],
          [large, "", 1, 100, 2, 0, 0, 0],
          [large, "build-a", 0, 0, 0, 0, 1, 0],
        ],
      );
      db.transaction(() => rebuildTallies(db))();
      assert.deepEqual(aggregates(db), kept, "what each booking kept is what the rows say");
      const old = db
        .prepare(
          `SELECT COALESCE(SUM(CASE WHEN c.status = 'complete' THEN c.seed_to - c.seed_from + 1 END), 0) AS seeds,
                  COALESCE(SUM(CASE WHEN c.status = 'complete' THEN c.seconds END), 0) AS seconds,
                  COALESCE(SUM(CASE WHEN c.status = 'complete' THEN 1 END), 0) AS chunks,
                  COALESCE(SUM(CASE WHEN c.status LIKE 'aborted%' THEN 1 END), 0) AS aborted,
                  COALESCE(SUM(CASE WHEN c.status = 'reissued' THEN 1 END), 0) AS reissued,
                  COALESCE(SUM(c.quarantine), 0) AS quarantine
             FROM chunk c JOIN lane l ON l.id = c.lane_id WHERE l.generation_id = ?`,
        )
        .get(gen);
      assert.deepEqual(store.chunkTotals(gen), old);
      assert.equal(store.seedsSwept(gen), 300, "both lanes' prefixes");
      assert.deepEqual(store.incidenceCounts(gen).campaign, { observed: 2, singletons: 1, doubletons: 0 }, "k1 hit by 4 seeds, the promoted find by 1");
      assert.deepEqual([...store.incidenceCounts(gen).lanes].sort((x, y) => x[0] - y[0]), [
        [small, { observed: 2, singletons: 1, doubletons: 1 }],
        [large, { observed: 1, singletons: 0, doubletons: 1 }],
      ]);
      assert.deepEqual(store.quarantineGroups(gen), [{ reason: "invalid", inconclusive: false, count: 2 }]);
      assert.deepEqual(kept.distinct, { n: 2 }, "the distinct failure and the promoted find");
    } finally {
      db.close();
    }
  } finally {
    store.close();
  }
});

test("history stays at a bounded number of slots over two weeks of chunks arriving out of order, keeping every seed and find", () => {
  const path = storePath();
  openStore(path, { journal: "wal" }).close();
  const db = new Database(path);
  try {
    db.prepare("INSERT INTO generation (id, gen_hash, created_at) VALUES (1, 'x', '2026-01-01T00:00:00Z')").run();
    for (const id of [1, 2]) db.prepare("INSERT INTO lane (id, generation_id, name, params_json, base_seed, cursor, created_at) VALUES (?, 1, ?, '{}', 0, 0, 'x')").run(id, `lane${id}`);
    const t0 = Date.parse("2026-01-05T00:00:00Z") / 1000;
    let seeds = 0;
    let finds = 0;
    db.transaction(() => {
      // Starts spread over 14 days; every seventh chunk started before all the others so far.
      for (let i = 0; i < 5000; i++) {
        const from = i % 7 === 0 ? t0 - i : t0 + ((i * 7919) % 5000) * 240;
        addChunkToHistory(db, 1, 1 + (i % 2), from, from + 600, 1000, i % 3);
        seeds += 1000;
        finds += i % 3;
      }
    })();
    const h = readHistory(db, 1)!;
    const perLane = (lane: string) => h.lanes.filter((r) => r.lane === lane);
    assert.ok(perLane("lane1").length <= MAX_SLOTS && perLane("lane2").length <= MAX_SLOTS, `at most ${MAX_SLOTS} slots a lane`);
    assert.ok(Math.max(...h.lanes.map((r) => r.slot)) < MAX_SLOTS && Math.min(...h.lanes.map((r) => r.slot)) >= 0);
    assert.ok(Math.abs(h.lanes.reduce((s, r) => s + r.seeds, 0) - seeds) < 1e-3, "every seed kept");
    assert.equal(h.lanes.reduce((s, r) => s + r.finds, 0), finds, "every find kept");
    assert.ok(h.origin <= t0 - 4998, "the origin moved back to the earliest start");
    assert.equal(h.lastEnd, t0 + 4999 * 240 + 600);
  } finally {
    db.close();
  }
});
