// SweepEngine driven directly, with a real store and a fake clock: the scheduling and
// bookkeeping rules that do not need a child process to be observed.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { loadConfig } from "../../src/config/load.ts";
import { LaneState } from "../../src/core/lane-state.ts";
import { abortWording, localWorker, SweepEngine, type Assignment, type EngineEvents, type EngineLane, type WorkerView } from "../../src/sweep/engine/sweep-engine.ts";
import { LAST_SEED, SEED_LIMIT } from "../../src/core/ranges.ts";
import { openStore, type Db } from "../../src/store/db.ts";
import { sqliteSweepStore } from "../../src/store/sqlite/index.ts";
import { insertGeneration } from "../../src/store/generations.ts";
import { insertLane } from "../../src/store/lanes.ts";
import { insertSession } from "../../src/store/sessions.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-engine-"));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

interface Harness {
  engine: SweepEngine;
  db: Db;
  worker: WorkerView;
  clock: { now: number };
  events: string[];
  next(): Assignment;
}

function harness(opts: { lanes?: string; transport?: "local" | "distributed"; budgetSeconds?: number; generator?: string } = {}): Harness {
  const dir = join(root, String(n++));
  mkdirSync(dir);
  writeFileSync(
    join(dir, "fuzzfleet.toml"),
    `[defaults]
chunk_minutes = 1
bootstrap_seeds = 40
[generator]
command = ["gen", "{seed_from}", "{count}", "{out}"]
identity = ["gen"]
${opts.generator ?? ""}
${opts.lanes ?? "[lanes.a]\nweight = 3\n[lanes.b]\nbase_seed = 1000\nweight = 1\n"}`,
  );
  const config = loadConfig(join(dir, "fuzzfleet.toml"));
  const db = openStore(join(dir, "fuzzfleet.db"));
  const gen = insertGeneration(db, "00".repeat(32), "initial");
  const sessionId = insertSession(db, { generationId: gen, requestedSeconds: 3600, appBuild: null, transport: "local", host: "h", port: null });
  const lanes: EngineLane[] = config.lanes.map((l) => ({
    config: l,
    laneId: insertLane(db, gen, l.name, "{}", l.baseSeed),
    state: new LaneState(l.baseSeed, l.baseSeed),
    rate: null,
  }));
  const clock = { now: 0 };
  const events: string[] = [];
  const record = new Proxy({} as EngineEvents, {
    get: (_t, name) => (...args: unknown[]) => events.push(`${String(name)}:${(args[0] as { chunkId?: number }).chunkId ?? args[0]}`),
  });
  const engine = new SweepEngine({
    store: sqliteSweepStore(db),
    config,
    outDir: join(dir, "out"),
    generationId: gen,
    genHash: "00".repeat(32),
    sessionId,
    appBuild: null,
    lanes,
    transport: opts.transport ?? "local",
    now: () => clock.now,
    deadlineMs: (opts.budgetSeconds ?? 3600) * 1000,
    events: record,
  });
  const worker = localWorker(lanes, new Map());
  return {
    engine,
    db,
    worker,
    clock,
    events,
    next() {
      const r = engine.assign(worker);
      assert.equal(r.kind, "chunk", JSON.stringify(r));
      return (r as { assignment: Assignment }).assignment;
    },
  };
}

const ok = { outcome: "complete" as const, exitCode: 0, seconds: 2 };
const timeout = { outcome: "timeout" as const, exitCode: null, seconds: 180 };
const status = (h: Harness, id: number) => (h.db.prepare("SELECT status FROM chunk WHERE id = ?").get(id) as { status: string }).status;
const cursor = (h: Harness, lane: string) => (h.db.prepare("SELECT cursor FROM lane WHERE name = ?").get(lane) as { cursor: number }).cursor;

test("lanes are picked 3:1 by weight and each chunk command carries its range and scratch dir", () => {
  const h = harness();
  const picks = Array.from({ length: 8 }, () => {
    const a = h.next();
    h.engine.finish(h.worker, a.chunkId, ok);
    return a.lane;
  });
  assert.deepEqual(picks.filter((l) => l === "a").length, 6);
  assert.deepEqual(picks.filter((l) => l === "b").length, 2);
  const a = h.next();
  assert.deepEqual(a.argv.slice(0, 2), ["gen", String(a.seedFrom)]);
  assert.equal(a.argv[3], a.scratchDir);
  assert.match(a.scratchDir, new RegExp(`chunk-${a.chunkId}$`));
});

test("a timeout halves the rate; only two CONSECUTIVE timeouts disable the lane", () => {
  const h = harness({ lanes: "[lanes.a]\n" });
  const a1 = h.next();
  h.engine.finish(h.worker, a1.chunkId, timeout);
  assert.equal(status(h, a1.chunkId), "aborted:timeout");
  assert.equal(h.worker.rates.get("a"), 40 / 180 / 2);
  const a2 = h.next();
  assert.deepEqual([a2.seedFrom, a2.seedTo], [1, 10], "the aborted range is handed out again first, sized by the halved rate");
  h.engine.finish(h.worker, a2.chunkId, ok);
  const a3 = h.next();
  h.engine.finish(h.worker, a3.chunkId, timeout);
  assert.ok(!h.worker.disabled.has("a"), "a success in between resets the strikes");
  const a4 = h.next();
  h.engine.finish(h.worker, a4.chunkId, timeout);
  assert.ok(h.worker.disabled.has("a"));
  assert.deepEqual(h.engine.assign(h.worker), { kind: "drain", reason: "all lanes disabled" });
});

test("completion is idempotent on chunk id, and a late finish of a reissued chunk counts once", () => {
  const h = harness({ lanes: "[lanes.a]\n", transport: "distributed" });
  const a1 = h.next();
  const a2 = h.next();
  assert.equal(h.engine.finish(h.worker, a2.chunkId, ok).note, "recorded");
  assert.equal(cursor(h, "a"), 1, "the cursor waits for the lower chunk");
  h.engine.reissue(a1.chunkId, "no heartbeat");
  assert.equal(status(h, a1.chunkId), "reissued");
  const again = h.next();
  assert.deepEqual([again.seedFrom, again.seedTo], [a1.seedFrom, a1.seedTo], "the reissued range goes out before new ground");
  assert.equal(h.engine.finish(h.worker, a1.chunkId, ok).note, "recorded", "the late finisher still counts");
  assert.equal(cursor(h, "a"), a2.seedTo + 1);
  assert.equal(h.engine.finish(h.worker, a1.chunkId, ok).note, "already recorded");
  assert.equal(h.engine.finish(h.worker, again.chunkId, ok).note, "recorded");
  assert.equal(cursor(h, "a"), a2.seedTo + 1);
  // Three chunks completed, but the re-sweep covered only seeds the late finisher had swept: each counts once.
  assert.equal(h.engine.counts.seedsSwept, a1.seedTo - a1.seedFrom + 1 + (a2.seedTo - a2.seedFrom + 1));
  assert.equal(h.engine.finish(h.worker, 999, ok).note, "unknown chunk");
});

test("no chunk starts once less than the deadline floor remains", () => {
  const h = harness({ lanes: "[lanes.a]\n", budgetSeconds: 100 });
  assert.equal(h.engine.floorSeconds, 5, "the shortest chunk worth starting");
  h.clock.now = 94_000;
  const a = h.next();
  assert.equal(a.targetSeconds, 6, "the last chunk is sized to the time left");
  h.engine.finish(h.worker, a.chunkId, ok);
  h.clock.now = 95_500;
  assert.deepEqual(h.engine.assign(h.worker), { kind: "drain", reason: "deadline" });
});

test("an interrupted chunk is re-queued and does not count as a strike", () => {
  const h = harness({ lanes: "[lanes.a]\n" });
  const a = h.next();
  h.engine.finish(h.worker, a.chunkId, { outcome: "interrupted", exitCode: null, seconds: 1 });
  assert.equal(status(h, a.chunkId), "aborted:interrupted");
  assert.equal(h.worker.strikes.get("a") ?? 0, 0);
  assert.deepEqual([h.next().seedFrom], [a.seedFrom]);
});

test("a chunk killed by a signal is booked aborted:signal SIG and named on the console; a worker's report without a code is 'exit ?'", () => {
  const h = harness({ lanes: "[lanes.a]\n[lanes.b]\nbase_seed = 1000\n" });
  const a = h.next();
  h.engine.finish(h.worker, a.chunkId, { outcome: "complete", exitCode: null, signal: "SIGSEGV", seconds: 1 });
  assert.equal(status(h, a.chunkId), "aborted:signal SIGSEGV");
  const b = h.next();
  h.engine.finish(h.worker, b.chunkId, { outcome: "complete", exitCode: null, seconds: 1 });
  assert.equal(status(h, b.chunkId), "aborted:exit ?");
  assert.ok(h.worker.disabled.has("a") && h.worker.disabled.has("b"), "both lanes are disabled");
  for (const [report, expectWhy, expectDid] of [
    [{ outcome: "complete", exitCode: null, signal: "SIGSEGV", seconds: 1 }, "killed by SIGSEGV", "was killed by SIGSEGV"],
    [{ outcome: "complete", exitCode: 3, seconds: 1 }, "exit 3", "exited with 3"],
    [{ outcome: "complete", exitCode: null, seconds: 1 }, "exit ?", "ended with no exit code (killed by a signal on the worker?)"],
  ] as const) {
    const w = abortWording(report);
    assert.equal(w.why, expectWhy);
    assert.equal(w.generatorDid, expectDid);
  }
});

test("a fixed failure found again by a chunk is reopened and counted in the session's reopened", () => {
  const h = harness({ lanes: "[lanes.a]\n" });
  const writeFind = (a: Assignment, seed: number) => {
    const dir = join(a.scratchDir, "failures", String(seed));
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "meta.json"), JSON.stringify({ seed, bucket: "crash" }));
    writeFileSync(join(dir, "input.min.txt"), "same minimized input");
  };
  const a1 = h.next();
  writeFind(a1, a1.seedFrom);
  h.engine.finish(h.worker, a1.chunkId, { ...ok, exitCode: 1 });
  h.db.prepare("UPDATE failure SET state = 'fixed', resolved_at = '2026-01-01T00:00:00Z'").run();
  const a2 = h.next();
  writeFind(a2, a2.seedFrom);
  h.engine.finish(h.worker, a2.chunkId, { ...ok, exitCode: 1 });
  assert.deepEqual(
    { newFailures: h.engine.counts.newFailures, reopened: h.engine.counts.reopened, finds: h.engine.counts.finds },
    { newFailures: 1, reopened: 1, finds: 2 },
  );
  assert.deepEqual(h.db.prepare("SELECT state, resolved_at FROM failure").all(), [{ state: "open", resolved_at: null }]);
});

const exit1 = { outcome: "complete" as const, exitCode: 1, seconds: 1 };
const count = (h: Harness, table: string) => (h.db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;

/** Writes a valid failure entry for `seed` under the chunk's results directory, as entry `name`. */
function writeEntry(dir: string, name: string, seed: number, input = `input of ${name}`): void {
  const entry = join(dir, "failures", name);
  mkdirSync(entry, { recursive: true });
  writeFileSync(join(entry, "meta.json"), JSON.stringify({ seed, bucket: "crash" }));
  writeFileSync(join(entry, "input.min.txt"), input);
}

test("exit 1 with no failure entry is a broken chunk: aborted, nothing booked, its range handed out again; three in a row stop the worker taking the lane", () => {
  const h = harness({ lanes: "[lanes.a]\n", transport: "distributed" });
  const a1 = h.next();
  assert.equal(h.engine.finish(h.worker, a1.chunkId, exit1).note, "aborted");
  assert.equal(status(h, a1.chunkId), "aborted:broken");
  assert.equal(cursor(h, "a"), 1, "no seed of it is covered");
  assert.equal(h.worker.rates.get("a") ?? null, null, "a broken run measures no rate");
  const a2 = h.next();
  assert.deepEqual([a2.seedFrom, a2.seedTo], [a1.seedFrom, a1.seedTo], "the same range goes out again first");
  h.engine.finish(h.worker, a2.chunkId, exit1);
  // A chunk that keeps the contract in between starts the count again.
  const a3 = h.next();
  h.engine.finish(h.worker, a3.chunkId, ok);
  assert.equal(cursor(h, "a"), a3.seedTo + 1);
  for (let i = 0; i < 2; i++) {
    const b = h.next();
    h.engine.finish(h.worker, b.chunkId, exit1);
    assert.ok(!h.worker.disabled.has("a"), `broken chunk ${i + 1} after a good one does not disable the lane yet`);
  }
  const last = h.next();
  h.engine.finish(h.worker, last.chunkId, exit1);
  assert.ok(h.worker.disabled.has("a"), "the third broken chunk in a row disables the lane for this worker");
  assert.ok(h.events.includes("laneDisabled:a"));
  assert.deepEqual(h.engine.assign(h.worker), { kind: "idle", why: "every lane is disabled for this worker" });
  assert.equal(cursor(h, "a"), a3.seedTo + 1, "broken chunks never moved the cursor");
  assert.equal(h.engine.counts.seedsSwept, a3.seedTo - a3.seedFrom + 1);
});

test("results that account for more tests than the chunk has seeds are taken back whole: no failure, no hit, no quarantine count", () => {
  const h = harness({ lanes: "[lanes.a]\n" });
  const a = h.next();
  const n = a.seedTo - a.seedFrom + 1;
  for (let i = 0; i <= n; i++) writeEntry(a.scratchDir, `e${i}`, a.seedFrom + (i % n));
  assert.equal(h.engine.finish(h.worker, a.chunkId, exit1).note, "aborted");
  assert.equal(status(h, a.chunkId), "aborted:broken");
  assert.deepEqual([count(h, "failure"), count(h, "failure_seed")], [0, 0], "nothing ingest recorded survives");
  assert.equal(h.engine.counts.finds, 0);
});

test("a results directory below {out} that the run never created, though it wrote {out}, is a broken chunk", () => {
  const h = harness({ lanes: "[lanes.a]\n", generator: 'results = "{out}/run-000000"' });
  const a = h.next();
  // The generator wrote its failures where the config does not look.
  writeEntry(join(a.scratchDir, "run-000001"), String(a.seedFrom), a.seedFrom);
  assert.equal(h.engine.finish(h.worker, a.chunkId, ok).note, "aborted");
  assert.equal(status(h, a.chunkId), "aborted:broken");
  assert.equal(cursor(h, "a"), 1);
  // A run that wrote nothing at all is a clean chunk, as before.
  const b = h.next();
  assert.equal(h.engine.finish(h.worker, b.chunkId, ok).note, "recorded");
});

test("a lane that reaches the last exact seed is exhausted: its last chunk is clamped, it gets no more, and a session with no other lane drains", () => {
  const base = 2 ** 53 - 10;
  const h = harness({ lanes: `[lanes.a]\nbase_seed = ${base}\n[lanes.b]\n` });
  const a = h.next();
  assert.deepEqual([a.lane, a.seedFrom, a.seedTo], ["a", base, LAST_SEED], "the chunk ends at the last exact seed, not 40 seeds on");
  h.engine.finish(h.worker, a.chunkId, ok);
  assert.equal(cursor(h, "a"), SEED_LIMIT);
  assert.ok(h.events.includes("laneExhausted:a"));
  for (let i = 0; i < 3; i++) {
    const b = h.next();
    assert.equal(b.lane, "b", "only the lane with seeds left gets chunks");
    h.engine.finish(h.worker, b.chunkId, ok);
  }
  const only = harness({ lanes: `[lanes.a]\nbase_seed = ${base}\n`, transport: "distributed" });
  const c = only.next();
  assert.deepEqual(only.engine.assign(only.worker), { kind: "idle", why: "every lane's last seeds are handed out" }, "a chunk in flight may still give seeds back");
  only.engine.finish(only.worker, c.chunkId, ok);
  assert.deepEqual(only.engine.assign(only.worker), { kind: "drain", reason: "every lane exhausted" });
});
