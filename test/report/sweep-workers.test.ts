// A sweep worker's liveness from its store rows: alive, slow and lost by the silence of a worker
// holding a chunk, against its heartbeat and lease; left once it disconnected; lost when its
// session ended without it; and the chunk in hand with its range and age.
import assert from "node:assert/strict";
import { test } from "node:test";
import { workerRows, type LivenessRules } from "../../src/sweep/views/workers.ts";
import { sweepMetrics } from "../../src/sweep/views/metrics.ts";
import type { SessionWorker } from "../../src/store/dashboard-queries.ts";

const NOW = Date.parse("2026-01-01T12:00:00Z");
const at = (secondsAgo: number) => new Date(NOW - secondsAgo * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
const rules: LivenessRules = { nowMs: NOW, heartbeatSeconds: 5, leaseSeconds: 120, sessionRunning: true };

function worker(o: Partial<SessionWorker> & { beat?: number | null; chunkAge?: number }): SessionWorker {
  const chunks =
    o.beat === undefined
      ? []
      : [{ id: 7, lane: "small", seed_from: 1000, seed_to: 1999, status: "leased", started_at: at(o.chunkAge ?? 300), leased_at: at(o.chunkAge ?? 300), last_heartbeat: o.beat === null ? null : at(o.beat) }];
  return { id: 3, host: "vm", jobs: 4, state: "live", connected_at: at(600), last_seen: at(o.beat ?? 600), disconnected_at: null, chunks, ...o };
}

test("a worker holding a chunk: alive within three heartbeats, slow within the lease, lost beyond it", () => {
  const [alive] = workerRows([worker({ beat: 2 })], rules);
  assert.equal(alive!.liveness, "alive");
  assert.equal(alive!.label, "vm#3");
  assert.equal(alive!.lastHeartbeatSeconds, 2);
  assert.deepEqual(alive!.holding, [{ text: "chunk 7 small 1,000..1,999", ageSeconds: 300 }]);
  assert.equal(workerRows([worker({ beat: 16 })], rules)[0]!.liveness, "alive", "3 x 5 s + 1 s");
  assert.equal(workerRows([worker({ beat: 17 })], rules)[0]!.liveness, "slow");
  assert.equal(workerRows([worker({ beat: 120 })], rules)[0]!.liveness, "slow");
  const lost = workerRows([worker({ beat: 121 })], rules)[0]!;
  assert.equal(lost.liveness, "lost");
  assert.equal(lost.lastHeartbeatSeconds, 121);
});

test("a chunk leased a moment ago counts as hearing from its worker", () => {
  const w = worker({ beat: null, chunkAge: 1 });
  w.last_seen = at(500);
  const [row] = workerRows([w], rules);
  assert.equal(row!.liveness, "alive");
  assert.equal(row!.lastHeartbeatSeconds, 1);
});

test("between chunks a worker is alive however long ago its last heartbeat; left once gone; lost when its session ended without it", () => {
  const [idle] = workerRows([worker({})], rules);
  assert.equal(idle!.liveness, "alive");
  assert.equal(idle!.lastHeartbeatSeconds, 600);
  assert.match(idle!.note!, /between chunks/);
  const [left] = workerRows([worker({ state: "gone", disconnected_at: at(30) })], rules);
  assert.equal(left!.liveness, "left");
  assert.match(left!.note!, /left 2026-01-01T11:59:30Z/);
  const [orphan] = workerRows([worker({ beat: 1 })], { ...rules, sessionRunning: false });
  assert.equal(orphan!.liveness, "lost");
  assert.match(orphan!.note!, /never left/);
});

test("a worker whose files come over the connection says so in its row, its note and /metrics; a row from before the column is a shared-directory worker", () => {
  const rows = workerRows([worker({ id: 3, files: "transfer" }), worker({ id: 4, files: "shared" }), worker({ id: 5, files: null }), worker({ id: 6, files: "transfer", state: "gone", disconnected_at: at(5) })], rules);
  assert.deepEqual(
    rows.map((r) => [r.label, r.files, r.note]),
    [
      ["vm#3", "transfer", "-j 4, files over the connection, between chunks"],
      ["vm#4", "shared", "-j 4, between chunks"],
      ["vm#5", "shared", "-j 4, between chunks"],
      ["vm#6", "transfer", `-j 4, files over the connection, left ${at(5)}`],
    ],
  );
  const snapshot = { kind: "sweep", title: "t", takenMs: NOW, live: true, status: { headline: "", elapsedSeconds: null, budgetSeconds: null, draining: null }, sweep: null, workers: rows, explore: null } as const;
  const family = sweepMetrics(snapshot).find((f) => f.name === "fuzzfleet_worker_files");
  assert.deepEqual(family?.samples, [
    { labels: { worker: "vm#3", files: "transfer" }, value: 1 },
    { labels: { worker: "vm#4", files: "shared" }, value: 1 },
    { labels: { worker: "vm#5", files: "shared" }, value: 1 },
  ]);
});
