// A deterministic simulation of a distributed sweep without sockets: the real SweepEngine,
// LaneState, CommitQueue, ingest and SQLite store, driven by fast-check commands that stand for
// what workers, the clock, a reader holding the store and a coordinator crash can do. After
// every command the invariants of ARCHITECTURE.md §7 are asserted against the store itself.
//
// Workers here behave like the real worker client: they ask for chunks, run them (the "run" is
// writing the failure entries a generator would, for the seeds a fixed predicate calls failing),
// report each one exactly once, heartbeat what they hold, and may vanish or come back with a
// report of a chunk from before (a late finisher). A blocked store is a second connection holding
// a read transaction in TRUNCATE mode: every commit then fails with SQLITE_BUSY, for real.
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import fc from "fast-check";
import { accessSync, constants, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig, type Config } from "../../src/config/load.ts";
import { mergeRanges, subtractRanges, totalSize, type Range } from "../../src/core/ranges.ts";
import { CommitQueue, StoreBlocked } from "../../src/sweep/engine/commit-queue.ts";
import { SweepEngine, type Assignment, type EngineEvents, type EngineMark, type WorkerView } from "../../src/sweep/engine/sweep-engine.ts";
import { abortLostChunks } from "../../src/store/chunks.ts";
import { openStore, type Db } from "../../src/store/db.ts";
import { sqliteSweepStore } from "../../src/store/sqlite/index.ts";
import { insertGeneration } from "../../src/store/generations.ts";
import { activeLane, doneAheadOfCursor, insertLane, laneSeedsSwept, type LaneRow } from "../../src/store/lanes.ts";
import { insertSession, markCrashedSessions } from "../../src/store/sessions.ts";
import { insertWorker, markWorkerGone } from "../../src/store/workers.ts";
import { recoverLanes } from "../../src/sweep/session/campaign.ts";

const GEN_HASH = "ab".repeat(32);

/**
 * Where the simulated campaigns live. The simulation checks the books, not what survives a power
 * cut, so its stores go to a RAM file system when the host has one (/dev/shm): the same SQLite,
 * the same locks and SQLITE_BUSY, without an fsync per commit — which, with other tests writing
 * to the disk beside it, cost most of its time.
 */
function simulationRoot(): string {
  try {
    const shm = "/dev/shm";
    if (statSync(shm).isDirectory()) {
      accessSync(shm, constants.W_OK);
      return shm;
    }
  } catch {
    // No /dev/shm here: the disk it is.
  }
  return tmpdir();
}
const SIM_ROOT = simulationRoot();
const LEASE_SECONDS = 30;
const WORKERS = 3;
const SLOTS = 2;

/** The simulated generator's verdict: which seeds fail, and the input they minimise to. */
export function fails(seed: number): boolean {
  return seed % 23 === 0;
}

const quiet: EngineEvents = {
  chunkStarted() {},
  chunkRecorded() {},
  chunkAborted() {},
  laneDisabled() {},
  chunkReissued() {},
};

interface SimWorker {
  index: number;
  view: (WorkerView & { workerId: number }) | null;
  /** Chunks this worker runs (a late finisher keeps them after losing the lease). */
  held: Map<number, Assignment>;
  /** Reports of chunks from an earlier connection, to send once connected again. */
  stale: Assignment[];
}

export class SweepWorld {
  readonly dir: string;
  readonly config: Config;
  db!: Db;
  engine!: SweepEngine;
  books!: CommitQueue<EngineMark>;
  sessionId = 0;
  generationId = 0;
  clockMs = 0;
  blocker: Database.Database | null = null;
  readonly workers: SimWorker[] = [];
  readonly trace: string[] = [];
  /** Sessions that ended by a crash, for the record. */
  crashes = 0;
  /** Distinct seeds in complete chunks when the current session started. */
  private sweptAtStart = 0;

  constructor() {
    this.dir = mkdtempSync(join(SIM_ROOT, "fuzzfleet-sim-"));
    writeFileSync(
      join(this.dir, "fuzzfleet.toml"),
      `[defaults]
chunk_minutes = 1
bootstrap_seeds = 7
[generator]
command = ["gen", "{seed_from}", "{count}", "{out}"]
identity = ["gen"]
[lanes.a]
weight = 2
[lanes.b]
base_seed = 1000000
`,
    );
    this.config = loadConfig(join(this.dir, "fuzzfleet.toml"));
    for (let i = 0; i < WORKERS; i++) this.workers.push({ index: i, view: null, held: new Map(), stale: [] });
    this.openSession(true);
  }

  get outDir(): string {
    return join(this.dir, "out");
  }

  /** Opens the store and a session the way a coordinator does: crashed sessions recorded, lanes recovered. */
  private openSession(fresh: boolean): void {
    this.db = openStore(join(this.dir, "fuzzfleet.db"), { journal: "truncate" });
    if (fresh) {
      this.generationId = insertGeneration(this.db, GEN_HASH, "initial");
      for (const lane of this.config.lanes) insertLane(this.db, this.generationId, lane.name, "{}", lane.baseSeed);
    }
    this.db.transaction(() => {
      markCrashedSessions(this.db);
      abortLostChunks(this.db);
    })();
    const rows = new Map<string, LaneRow>();
    for (const lane of this.config.lanes) rows.set(lane.name, activeLane(this.db, this.generationId, lane.name)!);
    const store = sqliteSweepStore(this.db);
    const recovered = recoverLanes(store, this.config.lanes, rows);
    this.sweptAtStart = this.sweptNow();
    this.sessionId = insertSession(this.db, { generationId: this.generationId, requestedSeconds: 1e9, appBuild: null, transport: "distributed", host: "sim", port: null });
    this.engine = new SweepEngine({
      store,
      config: this.config,
      outDir: this.outDir,
      generationId: this.generationId,
      genHash: GEN_HASH,
      sessionId: this.sessionId,
      appBuild: null,
      lanes: recovered.lanes,
      transport: "distributed",
      now: () => this.clockMs,
      deadlineMs: Number.MAX_SAFE_INTEGER,
      events: quiet,
    });
    this.books = new CommitQueue(store, this.engine, {
      giveUpMs: Number.MAX_SAFE_INTEGER,
      now: () => this.clockMs,
      log: () => undefined,
      path: "sim.db",
      retryFirstMs: 0,
      retryMaxMs: 0,
      busyMs: 0,
    });
  }

  /** Lets the queue run what is due (flushes are on setImmediate, retries on a zero timer). */
  async settle(): Promise<void> {
    const turn = () => new Promise((r) => setImmediate(r));
    await turn();
    // A blocked queue retries on a (zero) timer: give it one.
    if (this.books.blocked) await new Promise((r) => setTimeout(r, 1));
    while (this.books.pending > 0 && !this.books.blocked && !this.books.failed) await turn();
    await turn();
  }

  private note(line: string): void {
    this.trace.push(line);
  }

  // ---- what can happen ------------------------------------------------------------------------

  async want(wi: number): Promise<void> {
    const w = this.workers[wi]!;
    if (!w.view) return this.connect(w);
    const free = SLOTS - w.held.size;
    if (free <= 0) return;
    const view = w.view;
    try {
      const got = await this.books.run(() => {
        const out: Assignment[] = [];
        while (out.length < free) {
          const r = this.engine.assign(view);
          if (r.kind !== "chunk") break;
          out.push(r.assignment);
        }
        return out;
      }, "drop");
      for (const a of got) w.held.set(a.chunkId, a);
      this.note(`want w${wi}: ${got.map((a) => `#${a.chunkId} ${a.lane} ${a.seedFrom}..${a.seedTo}`).join(", ") || "nothing"}`);
    } catch (err) {
      if (!(err instanceof StoreBlocked)) throw err;
      this.note(`want w${wi}: wait (store blocked)`);
    }
  }

  private async connect(w: SimWorker): Promise<void> {
    try {
      const workerId = await this.books.run(
        () => insertWorker(this.db, { sessionId: this.sessionId, host: `h${w.index}`, addr: "sim", jobs: 1, genHash: GEN_HASH, appBuild: null }),
        "drop",
      );
      w.view = { label: `h${w.index}#${workerId}`, jobs: 1, workerId, rates: new Map(), lastCount: new Map(), strikes: new Map(), broken: new Map(), disabled: new Set() };
      this.note(`connect w${w.index} as #${workerId}`);
    } catch (err) {
      if (!(err instanceof StoreBlocked)) throw err;
      this.note(`connect w${w.index}: refused (store blocked)`);
    }
  }

  async report(wi: number, pick: number, outcome: "complete" | "timeout" | "interrupted" | "error" | "exit 3"): Promise<void> {
    const w = this.workers[wi]!;
    if (!w.view) return;
    const stale = w.stale.shift();
    const held = [...w.held.values()];
    const a = stale ?? held[pick % Math.max(1, held.length)];
    if (!a) return;
    if (outcome === "complete") this.generate(a);
    const failing = outcome === "complete" && seedsOf(a).some(fails);
    const report =
      outcome === "exit 3"
        ? { outcome: "complete" as const, exitCode: 3, seconds: 1 }
        : outcome === "complete"
          ? { outcome, exitCode: failing ? 1 : 0, seconds: 1 + (a.seedTo - a.seedFrom) / 50 }
          : { outcome, exitCode: null, seconds: 1, error: outcome === "error" ? "could not start" : undefined };
    const view = w.view;
    const committed = this.books.run(() => this.engine.finish(view, a.chunkId, report), "hold");
    committed.catch(() => undefined);
    const first = await Promise.race([committed, this.books.whenBlocked().then(() => null)]);
    if (!stale) w.held.delete(a.chunkId);
    this.note(`report w${wi} #${a.chunkId}${stale ? " (from an earlier connection)" : ""} ${outcome}: ${first === null ? "queued (store blocked)" : first.note}`);
  }

  /** What the generator writes for a chunk: one failure entry per failing seed. */
  private generate(a: Assignment): void {
    for (const seed of seedsOf(a).filter(fails)) {
      const dir = join(a.scratchDir, "failures", String(seed));
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "meta.json"), JSON.stringify({ seed, bucket: `b${seed % 3}`, shrunk: true, msg: `seed ${seed}` }));
      writeFileSync(join(dir, "input.min.txt"), `minimised ${seed % 5}\n`);
    }
  }

  heartbeat(wi: number): void {
    const w = this.workers[wi]!;
    if (!w.view) return;
    const known = [...w.held.keys()].filter((id) => this.engine.heartbeat(w.view!, id));
    this.note(`heartbeat w${wi}: ${known.join(", ") || "-"}`);
  }

  async advance(seconds: number): Promise<void> {
    this.clockMs += seconds * 1000;
    const expired = this.books.blocked ? [] : this.engine.expiredLeases(LEASE_SECONDS);
    for (const f of expired) {
      void this.books.run(() => this.engine.reissue(f.chunkId, "lease expired"), "hold").catch(() => undefined);
    }
    this.note(`advance ${seconds}s${expired.length ? `: leases expired ${expired.map((f) => `#${f.chunkId}`).join(", ")}` : ""}`);
  }

  /** The worker's connection ends; with `keepReports` its process lives on and reports later. */
  async disconnect(wi: number, keepReports: boolean): Promise<void> {
    const w = this.workers[wi]!;
    if (!w.view) return;
    const view = w.view;
    const held = this.engine.heldBy(view);
    const done = this.books.run(() => {
      markWorkerGone(this.db, view.workerId);
      for (const f of held) this.engine.reissue(f.chunkId, "worker left");
    }, "hold");
    done.catch(() => undefined);
    if (keepReports) w.stale.push(...w.held.values());
    w.held.clear();
    w.view = null;
    this.note(`disconnect w${wi}${keepReports ? " (keeps its reports)" : ""}`);
  }

  block(): void {
    if (this.blocker) return;
    this.blocker = new Database(join(this.dir, "fuzzfleet.db"), { readonly: true, fileMustExist: true });
    this.blocker.exec("BEGIN");
    this.blocker.prepare("SELECT COUNT(*) FROM chunk").get();
    this.note("a reader takes a read transaction (TRUNCATE: commits are refused)");
  }

  unblock(): void {
    if (!this.blocker) return;
    this.blocker.exec("COMMIT");
    this.blocker.close();
    this.blocker = null;
    this.note("the reader lets go");
  }

  /** The coordinator dies: what was queued is lost, workers lose their connections. */
  crash(): void {
    this.books.close();
    this.unblock();
    this.db.close();
    for (const w of this.workers) {
      if (w.view) w.stale.push(...w.held.values());
      w.held.clear();
      w.view = null;
    }
    this.crashes++;
    this.openSession(false);
    this.note(`coordinator crash; session ${this.sessionId} recovers`);
  }

  // ---- the invariants ------------------------------------------------------------------------

  private sweptNow(): number {
    return this.config.lanes.reduce((n, lane) => n + laneSeedsSwept(this.db, activeLane(this.db, this.generationId, lane.name)!.id), 0);
  }

  check(): void {
    const db = this.db;
    const lanes = db.prepare("SELECT id, name, base_seed, cursor FROM lane WHERE generation_id = ? AND retired = 0").all(this.generationId) as LaneRow[];
    for (const row of lanes) {
      const complete = (db.prepare("SELECT seed_from, seed_to FROM chunk WHERE lane_id = ? AND status = 'complete'").all(row.id) as { seed_from: number; seed_to: number }[]).map(
        (r): Range => [r.seed_from, r.seed_to],
      );
      // 1. Coverage is a true prefix.
      if (row.cursor > row.base_seed) {
        const holes = subtractRanges([row.base_seed, row.cursor - 1], complete);
        assert.deepEqual(holes, [], `lane ${row.name}: seeds below the cursor ${row.cursor} lie in no complete chunk`);
      }
      // 7. Memory never runs ahead of the disk (nor behind it).
      const lane = this.engine.engineLanes().find((l) => l.laneId === row.id)!;
      assert.equal(lane.state.cursor, row.cursor, `lane ${row.name}: memory cursor ${lane.state.cursor}, store cursor ${row.cursor}`);
      const ahead = mergeRanges(complete.filter(([, to]) => to >= row.cursor));
      assert.deepEqual(lane.state.doneAhead, ahead, `lane ${row.name}: memory's done-ahead differs from the store's complete chunks above the cursor`);
      // 2. Nothing counted twice: the store's done-ahead figure counts each seed once.
      assert.equal(doneAheadOfCursor(db, row.id, row.cursor), totalSize(ahead), `lane ${row.name}: done-ahead counts some seed twice`);
    }
    // Chunks in flight: memory and the store agree exactly.
    const leased = (db.prepare("SELECT id FROM chunk WHERE session_id = ? AND status = 'leased' ORDER BY id").all(this.sessionId) as { id: number }[]).map((r) => r.id);
    const inFlight = this.engine.inFlightChunks().map((f) => f.chunkId).sort((a, b) => a - b);
    assert.deepEqual(inFlight, leased, "chunks in flight in memory differ from the store's leased chunks");
    // 2 and 3. Every failing seed of a complete chunk is recorded exactly once, and nothing else is.
    const expected = new Set<number>();
    for (const r of db.prepare("SELECT seed_from, seed_to FROM chunk c JOIN lane l ON l.id = c.lane_id WHERE l.generation_id = ? AND c.status = 'complete'").all(this.generationId) as {
      seed_from: number;
      seed_to: number;
    }[]) {
      for (let s = r.seed_from; s <= r.seed_to; s++) if (fails(s)) expected.add(s);
    }
    const recorded = (db.prepare("SELECT seed FROM failure_seed ORDER BY seed").all() as { seed: number }[]).map((r) => r.seed);
    assert.equal(new Set(recorded).size, recorded.length, "a failing seed is recorded under two failures");
    assert.deepEqual(recorded, [...expected].sort((a, b) => a - b), "recorded failing seeds differ from the failing seeds of complete chunks");
    // 2. The session's "seeds swept" counts each seed once, however many chunks swept it.
    assert.equal(this.engine.counts.seedsSwept, this.sweptNow() - this.sweptAtStart, "the session's seeds-swept figure counts a seed twice (or misses one)");
    const miscounted = db.prepare("SELECT f.id FROM failure f WHERE f.hits != (SELECT COUNT(*) FROM failure_seed s WHERE s.failure_id = f.id)").all();
    assert.deepEqual(miscounted, [], "a failure's hits differ from its seeds");
  }

  /** One step: the action, then the queue's due work, then every invariant (with the steps that led here). */
  async act(fn: (w: SweepWorld) => Promise<void> | void): Promise<void> {
    await fn(this);
    await this.settle();
    try {
      this.check();
    } catch (err) {
      throw new Error(`${(err as Error).message}\n  last steps:\n    ${this.trace.slice(-40).join("\n    ")}`, { cause: err });
    }
  }

  dispose(): void {
    this.books.close();
    this.unblock();
    this.db.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function seedsOf(a: Assignment): number[] {
  return Array.from({ length: a.seedTo - a.seedFrom + 1 }, (_, i) => a.seedFrom + i);
}

// ---- fast-check commands --------------------------------------------------------------------

type Model = { steps: number };

class Step implements fc.AsyncCommand<Model, SweepWorld> {
  constructor(
    readonly label: string,
    readonly act: (w: SweepWorld) => Promise<void> | void,
  ) {}
  check(): boolean {
    return true;
  }
  async run(m: Model, world: SweepWorld): Promise<void> {
    m.steps++;
    await world.act(this.act);
  }
  toString(): string {
    return this.label;
  }
}

const worker = fc.nat(WORKERS - 1);

/** The commands a simulated campaign is made of, weighted toward ordinary work. */
export const commands = [
  worker.map((wi) => new Step(`want(${wi})`, (w) => w.want(wi))),
  worker.map((wi) => new Step(`want(${wi})`, (w) => w.want(wi))),
  fc
    .tuple(worker, fc.nat(3), fc.constantFrom("complete", "complete", "complete", "complete", "complete", "timeout", "interrupted", "error", "exit 3") as fc.Arbitrary<
      "complete" | "timeout" | "interrupted" | "error" | "exit 3"
    >)
    .map(([wi, pick, outcome]) => new Step(`report(${wi}, ${pick}, ${outcome})`, (w) => w.report(wi, pick, outcome))),
  fc.tuple(worker, fc.nat(3)).map(([wi, pick]) => new Step(`report(${wi}, ${pick}, complete)`, (w) => w.report(wi, pick, "complete"))),
  worker.map((wi) => new Step(`heartbeat(${wi})`, (w) => w.heartbeat(wi))),
  fc.integer({ min: 1, max: 45 }).map((s) => new Step(`advance(${s})`, (w) => w.advance(s))),
  fc.tuple(worker, fc.boolean()).map(([wi, keep]) => new Step(`disconnect(${wi}, ${keep})`, (w) => w.disconnect(wi, keep))),
  fc.constant(new Step("block()", (w) => w.block())),
  fc.constant(new Step("unblock()", (w) => w.unblock())),
  fc.constant(new Step("unblock()", (w) => w.unblock())),
  fc.constant(new Step("crash()", (w) => w.crash())),
];

export interface SimulationOptions {
  runs: number;
  maxCommands: number;
  seed?: number;
  /** The path and the commands' replayPath a failing run printed, to replay exactly that counterexample. */
  path?: string;
  replayPath?: string;
}

/**
 * Runs `runs` simulated campaigns of up to `maxCommands` steps each; returns the steps run. A
 * violated invariant throws with the message, the shrunk command list, and the command that
 * replays it.
 */
export async function simulate(o: SimulationOptions): Promise<{ steps: number; runs: number }> {
  let steps = 0;
  let runs = 0;
  const details = await fc.check(
    fc.asyncProperty(fc.commands(commands, { maxCommands: o.maxCommands, size: "max", replayPath: o.replayPath }), async (cmds) => {
      const world = new SweepWorld();
      const model: Model = { steps: 0 };
      try {
        await fc.asyncModelRun(() => ({ model, real: world }), cmds);
      } finally {
        world.dispose();
        steps += model.steps;
        runs++;
      }
    }),
    { numRuns: o.runs, seed: o.seed, path: o.path, endOnFailure: o.path !== undefined },
  );
  if (details.failed) {
    const example = String(details.counterexample?.[0] ?? "");
    const replay = /replayPath="([^"]*)"/.exec(example)?.[1];
    const error = details.errorInstance as Error | undefined;
    throw new Error(
      `the simulation broke an invariant after ${details.numRuns} run(s): ${error?.message ?? "(no message)"}\n` +
        `  shrunk to: ${example}\n` +
        `  replay:    node --import tsx bench/sweep-sim.mjs --seed ${details.seed} --path ${details.counterexamplePath}${replay ? ` --replay '${replay}'` : ""}`,
      { cause: error },
    );
  }
  return { steps, runs };
}
