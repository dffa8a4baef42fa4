// The seed ranges per lane and app build (store/build-ranges.ts), kept by the statements that book
// chunks: booked through the port in an awkward order (out of order, a chunk bridging two ranges,
// a duplicate completion, a late reissued chunk overlapping its re-sweep, two builds interleaved),
// the table holds disjoint ranges merged where contiguous, equal to the rebuild from the chunk
// rows; the view shows the last N in seed order and the current build's part of the prefix; a
// failure records the build it was last seen under. Real SQLite files.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import Database from "better-sqlite3";
import { rebuildBuildRanges } from "../../src/store/build-ranges.ts";
import { openSweepStore } from "../../src/store/sqlite/index.ts";

const root = mkdtempSync(join(tmpdir(), "ff-build-ranges-"));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const storePath = () => join(root, `s${n++}.db`);

const rows = (db: Database.Database) => db.prepare("SELECT lane_id, app_build, seed_from, seed_to FROM build_range ORDER BY lane_id, seed_from, app_build").all();

test("chunks booked out of order merge on both sides per build; builds never merge; the table equals its rebuild", () => {
  const path = storePath();
  const store = openSweepStore(path, { journal: "wal" });
  try {
    const gen = store.startGeneration(null, "ab".repeat(32), "initial");
    const lane = store.restartLane(null, gen, "small", '{"args":[]}', 1);
    const other = store.restartLane(null, gen, "large", '{"args":["--large"]}', 1_000_001);
    const session = store.startSession({ generationId: gen, requestedSeconds: 60, appBuild: "A", transport: "local", host: "here", port: null });
    const counts = { clean: 10, finds: 0, quarantine: 0, unshrunk: 0 };
    const sweep = (laneId: number, from: number, to: number, build: string | null, complete = true) => {
      const id = store.bookChunk({ sessionId: session, laneId, seedFrom: from, seedTo: to, appBuild: build, status: "running", workerId: null });
      if (complete) store.completeChunk(id, 1, counts);
      return id;
    };
    store.transaction(() => {
      sweep(lane, 1, 10, "A");
      sweep(lane, 21, 30, "A"); // ahead of a gap
      sweep(lane, 11, 20, "A"); // fills the gap: merges with both neighbours
      const dup = sweep(lane, 31, 40, "A");
      store.completeChunk(dup, 1, counts); // booked complete twice: nothing changes
      const reissued = sweep(lane, 41, 50, "A", false);
      store.endChunk(reissued, "reissued", null);
      sweep(lane, 41, 45, "A"); // the re-sweep of its front
      store.completeChunk(reissued, 1, counts); // the late finisher overlaps it: one range still
      sweep(lane, 51, 60, "B");
      sweep(lane, 71, 80, "B"); // above a gap of build B
      sweep(lane, 61, 70, "A"); // the gap swept by A: three ranges, none merged across builds
      sweep(lane, 81, 90, null);
      sweep(other, 1_000_001, 1_000_010, "B");
      sweep(lane, 91, 95, "A", false); // in flight: not swept
    });
    const db = new Database(path, { readonly: true });
    try {
      const kept = rows(db);
      assert.deepEqual(kept, [
        { lane_id: lane, app_build: "A", seed_from: 1, seed_to: 50 },
        { lane_id: lane, app_build: "B", seed_from: 51, seed_to: 60 },
        { lane_id: lane, app_build: "A", seed_from: 61, seed_to: 70 },
        { lane_id: lane, app_build: "B", seed_from: 71, seed_to: 80 },
        { lane_id: lane, app_build: "", seed_from: 81, seed_to: 90 },
        { lane_id: other, app_build: "B", seed_from: 1_000_001, seed_to: 1_000_010 },
      ]);
      const rebuilt = new Database(path);
      try {
        rebuilt.transaction(() => rebuildBuildRanges(rebuilt))();
      } finally {
        rebuilt.close();
      }
      assert.deepEqual(rows(db), kept, "the rebuild from the chunk rows gives the same ranges");
    } finally {
      db.close();
    }
    // The view: the last 3 ranges in seed order, 2 earlier; cursor 71 (prefix 1..70): A swept 60 of its 70 seeds.
    const view = store.laneBuilds({ id: lane, base_seed: 1, cursor: 71 }, "A", 3);
    assert.deepEqual(view, {
      ranges: [
        { app_build: "A", seed_from: 61, seed_to: 70 },
        { app_build: "B", seed_from: 71, seed_to: 80 },
        { app_build: null, seed_from: 81, seed_to: 90 },
      ],
      earlier: 2,
      current_build_covered: 60,
    });
    assert.equal(store.laneBuilds({ id: lane, base_seed: 1, cursor: 71 }, "B", 3).current_build_covered, 10, "B's part of the prefix (71..80 lies above it)");
    assert.equal(store.laneBuilds({ id: lane, base_seed: 1, cursor: 91 }, null, 3).current_build_covered, 10, "chunks that named no build");
    assert.equal(store.laneBuilds({ id: lane, base_seed: 1, cursor: 71 }, "C", 10).current_build_covered, 0, "a build that swept nothing");
  } finally {
    store.close();
  }
});

test("a chunk that stops being complete leaves the lane's ranges; a failure records the build it was last seen under", () => {
  const path = storePath();
  const store = openSweepStore(path, { journal: "wal" });
  try {
    const gen = store.startGeneration(null, "cd".repeat(32), "initial");
    const lane = store.restartLane(null, gen, "small", '{"args":[]}', 1);
    const session = store.startSession({ generationId: gen, requestedSeconds: 60, appBuild: "A", transport: "local", host: "here", port: null });
    const counts = { clean: 9, finds: 1, quarantine: 0, unshrunk: 0 };
    const book = (from: number, to: number, build: string) =>
      store.bookChunk({ sessionId: session, laneId: lane, seedFrom: from, seedTo: to, appBuild: build, status: "running", workerId: null });
    let failure = 0;
    store.transaction(() => {
      const a = book(1, 10, "A");
      failure = store.recordFailure({ generationId: gen, laneId: lane, dedupKey: "k", bucket: "crash", seed: 5, shrunk: true, message: "m", repro: null, artifactDir: "x", appBuild: "A", signature: "crash: m" });
      store.addFailureSeed(failure, 5, a);
      store.completeChunk(a, 1, counts);
      const b = book(11, 20, "B");
      store.addFailureSeed(failure, 15, b);
      store.completeChunk(b, 1, counts);
      store.endChunk(b, "aborted:invalid range", null);
    });
    assert.deepEqual(store.laneBuilds({ id: lane, base_seed: 1, cursor: 11 }, "B", 10).ranges, [{ app_build: "A", seed_from: 1, seed_to: 10 }]);
    const row = store.failureById(failure)!;
    assert.equal(row.first_app_build, "A");
    assert.equal(row.last_app_build, "B", "the last seed that hit it was swept under B");
    store.transaction(() => store.touchFailure(failure, "C"));
    assert.equal(store.failureById(failure)!.last_app_build, "C", "a re-check under C that still fails");
  } finally {
    store.close();
  }
});
