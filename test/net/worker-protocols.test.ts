// One conformance suite, run against both worker protocols (as BullMQ runs one suite against
// every backend): the same scripted worker behaviour — handshake, bad token, want and hold,
// heartbeat, report, reports while stopping, the exact stop, a wrong stop_ack, a worker that
// goes silent, a worker that arrives while the campaign ends — checked against the real
// WorkerServer in-process on 127.0.0.1, serving the sweep's SweepWorkerProtocol (a real session:
// lock, SQLite store, SweepEngine) and explore's ExploreWorkerProtocol (a real ExploreMaster with its lease
// table and corpus). Only what differs by campaign kind is named per backend: the frame that
// carries units, the report, and the notes of the acks.
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { after, describe, test } from "node:test";
import { ExploreWorkerProtocol } from "../../src/explore/fleet/worker-protocol.ts";
import { targetIdentity } from "../../src/explore/state/target-identity.ts";
import { PeerClosed } from "../../src/errors.ts";
import type { Connection } from "../../src/net/connection.ts";
import type { CoordinatorReplyT, Frame } from "../../src/net/messages.ts";
import { WorkerServer, type AttachedWorker, type WorkProtocol } from "../../src/net/worker-server.ts";
import { READ as read, servedSweep } from "../engine/served-sweep.ts";
import { scratchDirs } from "../helpers/scratch.ts";
import { fakeWorker, frameBytes, rawExchange, send } from "../helpers/wire.ts";
import { loneMaster, writeSeed } from "../helpers/explore.ts";

const TOKEN = "conformance-test-token-0123456789";
/** A worker silent this long is dropped (the product's limit is a minute at least). */
const IDLE_MS = 400;
/**
 * The stop's grace is ten minutes and every test has half a minute: a shutdown that settled only
 * at its deadline, or a silent worker dropped only after the product's minute, fails the test.
 */
const STOP_GRACE_MS = 600_000;
const TEST = { timeout: 30_000 };
const { freshDir } = scratchDirs("worker-protocols");

/** A unit as every campaign kind has it: an id, and what identifies the work itself. */
interface Unit {
  id: number;
  /** The range of a chunk, the content hash of a task: the same work handed out again has the same key. */
  key: string;
  /** The unit as it came off the wire. */
  raw: Record<string, unknown>;
}

/** The server's log lines, and a way to wait for one. */
class Log {
  readonly lines: string[] = [];
  private waiters: { re: RegExp; found: () => void }[] = [];

  readonly write = (line: string): void => {
    this.lines.push(line);
    this.waiters = this.waiters.filter((w) => !(w.re.test(line) && (w.found(), true)));
  };

  /** Resolves once a line matching `re` was written (or at once if one was). */
  line(re: RegExp): Promise<void> {
    if (this.lines.some((l) => re.test(l))) return Promise.resolve();
    return new Promise((found) => this.waiters.push({ re, found }));
  }
}

/** A campaign served on 127.0.0.1 by a real WorkerServer and one of the two protocols. */
interface Served {
  port: number;
  server: WorkerServer<AttachedWorker>;
  log: Log;
  /** The units a reply to `want` carries, or null. */
  unitsOf(reply: CoordinatorReplyT): Unit[] | null;
  /** What an honest worker reports for a unit it ran. */
  report(unit: Unit): Frame;
  /** A report of the other campaign kind. */
  foreignReport: Frame;
  /** The ack note of a booked report, and of a report for a unit the worker was never given. */
  bookedNote: string;
  unknownNote: string;
  /** Units booked as done (the store's chunk rows, the master's commits). */
  booked(): number;
  /** The campaign starts ending (deadline or Ctrl-C): no new work, no new workers. */
  beginEnding(): void;
  close(): Promise<void>;
}

interface Backend {
  mode: "sweep" | "explore";
  start(): Promise<Served>;
}

/** Serves `protocol` as the product does, with a short idle limit. */
async function serve<W extends AttachedWorker>(protocol: WorkProtocol<W>, nonce: { path: string; value: string }, log: Log) {
  const server = new WorkerServer<W>({ token: TOKEN, protocol, nonce, read, leaseSeconds: 60, idleMs: IDLE_MS, now: () => performance.now(), log: log.write });
  const { port } = await server.listen("127.0.0.1", 0);
  return { port, server: server as unknown as WorkerServer<AttachedWorker>, log };
}

const sweep: Backend = {
  mode: "sweep",
  async start() {
    const log = new Log();
    const { protocol, engine, nonce, close } = await servedSweep({ token: TOKEN, log: log.write });
    const served = await serve(protocol, nonce, log);
    const { server } = served;
    return {
      ...served,
      unitsOf: (reply) => (reply.type === "assign" ? reply.chunks.map((ch) => ({ id: ch.chunk_id, key: `${ch.lane} from ${ch.seed_from}`, raw: ch })) : null),
      report(unit) {
        // The coordinator ingests from the scratch directory it named; an honest generator leaves one.
        mkdirSync(unit.raw.scratch_dir as string, { recursive: true });
        return { type: "done", chunk_id: unit.id, elapsed: 0.5, rc: 0, outcome: "complete", error: null };
      },
      foreignReport: { type: "result", task_id: 1, fence: "f", input_hash: null, new_hashes: [], num_generated: 0, staged_bytes: 0, staging_id: "", retcode: 0, elapsed: 0, protocol_error: "", budget: null, detail: null },
      bookedNote: "recorded",
      unknownNote: "unknown chunk",
      booked: () => engine.counts.chunks,
      beginEnding: () => engine.drain("interrupted"),
      async close() {
        server.close();
        await close();
      },
    };
  },
};

const explore: Backend = {
  mode: "explore",
  async start() {
    const dir = freshDir();
    const log = new Log();
    const [inputDir, corpusDir] = [join(dir, "in"), join(dir, "corpus")];
    mkdirSync(inputDir);
    mkdirSync(corpusDir);
    for (let i = 0; i < 4; i++) writeSeed(join(inputDir, `seed-${i}`), `seed ${i}\n`);
    const master = loneMaster({ dir, corpusDir: corpusDir, inputDir });
    master.admitInputs();
    const nonce = { path: join(dir, "nonce"), value: "explore-nonce" };
    writeFileSync(nonce.path, `${nonce.value}\n`);
    const protocol = new ExploreWorkerProtocol({
      master,
      token: TOKEN,
      nonce,
      setup: { corpusDir, target: ["true"], targetCwd: dir, targetBuild: targetIdentity({ argv: ["true"], cwd: dir, files: [], path: process.env.PATH, simulate: false }).build, targetFiles: [], simulate: false, budgets: { maxChildren: 16, maxResultBytes: 1 << 20, maxInputBytes: 1 << 20 } },
      leaseSeconds: 60,
      heartbeatSeconds: 5,
      read,
      now: () => performance.now(),
      log: log.write,
      onProgress: () => {},
      onPeer: null,
    });
    const served = await serve(protocol, nonce, log);
    const { server } = served;
    return {
      ...served,
      unitsOf: (reply) => (reply.type === "task" ? reply.tasks.map((t) => ({ id: t.task_id, key: t.hash, raw: t })) : null),
      report: (unit) => ({
        type: "result",
        task_id: unit.id,
        fence: unit.raw.fence as string,
        input_hash: unit.key,
        new_hashes: [],
        num_generated: 0,
        staged_bytes: 0,
        staging_id: "",
        retcode: 0,
        elapsed: 0.01,
        protocol_error: "",
        budget: null,
        detail: null,
      }),
      foreignReport: { type: "done", chunk_id: 1, elapsed: 0, rc: 0, outcome: "complete", error: null },
      bookedNote: "committed",
      unknownNote: "unknown task",
      booked: () => master.counters.observations,
      beginEnding: () => {
        protocol.closing = "interrupted";
      },
      async close() {
        server.close();
      },
    };
  },
};

/** A handshaken worker double and the label the server knows it by. */
async function worker(c: Served, host = "double") {
  const w = await fakeWorker(c.port, TOKEN, host);
  return { ...w, label: `${host}#${w.workerId}` };
}

const request = (conn: Connection, frame: Frame) => send(conn, frame) as Promise<CoordinatorReplyT>;

/** Asks until the campaign hands out a unit (explore admits inputs as it goes; a sweep has one at once). */
async function take(c: Served, conn: Connection): Promise<Unit> {
  for (;;) {
    const reply = await request(conn, { type: "want", slots: 1 });
    const units = c.unitsOf(reply);
    if (units) return units[0]!;
    assert.equal(reply.type, "wait", `a want is answered with units or a wait, got ${JSON.stringify(reply)}`);
  }
}


function conformance(backend: Backend): void {
  describe(`${backend.mode} worker protocol`, () => {
    const started: Served[] = [];
    const campaign = async () => {
      const c = await backend.start();
      started.push(c);
      return c;
    };
    after(async () => {
      for (const c of started) await c.close();
    });

    test("a worker with the token is welcomed in the campaign's mode; a wrong token is refused before anything else", TEST, async () => {
      const c = await campaign();
      const w = await worker(c);
      assert.ok(c.server.workers.has(w.label));
      const wrong = await rawExchange(c.port, frameBytes({ type: "hello", token: "not-the-token", protocol: 1, host: "h", jobs: 1, slots: 1 }));
      assert.ok(wrong.closed);
      assert.match(wrong.reply, /"type":"refuse","reason":"bad or missing token"/);
      assert.equal(c.server.everyone.length, 1);
      w.conn.destroy();
    });

    test("want hands out a unit the worker then holds: a heartbeat lists it as known, and a unit it never held as not", TEST, async () => {
      const c = await campaign();
      const w = await worker(c);
      const unit = await take(c, w.conn);
      assert.deepEqual(await request(w.conn, { type: "heartbeat", ids: [unit.id, unit.id + 1000] }), { type: "ack", drain: false, known: [unit.id], note: null });
      w.conn.destroy();
    });

    test("a report of a held unit is booked once and acknowledged; a report for a unit never given is not booked", TEST, async () => {
      const c = await campaign();
      const w = await worker(c);
      const unit = await take(c, w.conn);
      const ack = await request(w.conn, c.report(unit));
      assert.deepEqual(ack, { type: "ack", drain: false, known: null, note: c.bookedNote });
      assert.equal(c.booked(), 1);
      const stranger = await request(w.conn, c.report({ ...unit, id: unit.id + 1000 }));
      assert.deepEqual(stranger, { type: "ack", drain: false, known: null, note: c.unknownNote });
      assert.equal(c.booked(), 1);
      w.conn.destroy();
    });

    test("a report of the other campaign kind is refused, naming what this campaign runs", TEST, async () => {
      const c = await campaign();
      const w = await worker(c);
      const reply = await request(w.conn, c.foreignReport);
      assert.equal(reply.type, "refuse");
      assert.match((reply as { reason: string }).reason, new RegExp(`runs (a|an) ${backend.mode}`));
      w.conn.destroy();
    });

    test("stop: the next request gets a fresh token; the exact stop_ack is answered with bye, and the shutdown completes", TEST, async () => {
      const c = await campaign();
      const a = await worker(c, "a");
      const b = await worker(c, "b");
      c.beginEnding();
      const stopping = c.server.stopAll(STOP_GRACE_MS);
      const stopA = await request(a.conn, { type: "heartbeat", ids: [] });
      const stopB = await request(b.conn, { type: "want", slots: 1 });
      assert.equal(stopA.type, "stop");
      assert.equal(stopB.type, "stop");
      const [ta, tb] = [(stopA as { token: string }).token, (stopB as { token: string }).token];
      assert.match(ta, /^[0-9a-f]{32}$/);
      assert.notEqual(ta, tb, "every worker's stop has its own token");
      assert.deepEqual(await request(a.conn, { type: "stop_ack", token: ta }), { type: "bye", reason: "stopped" });
      assert.deepEqual(await request(b.conn, { type: "stop_ack", token: tb }), { type: "bye", reason: "stopped" });
      assert.deepEqual(await stopping, { complete: true, settled: true, acked: [a.label, b.label], pending: [], gone: [], available: [] });
    });

    test("a stop_ack with another token is refused and not counted: the shutdown is incomplete, naming the worker", TEST, async () => {
      const c = await campaign();
      const w = await worker(c);
      c.beginEnding();
      const stopping = c.server.stopAll(STOP_GRACE_MS);
      const stop = (await request(w.conn, { type: "heartbeat", ids: [] })) as { type: string; token: string };
      assert.equal(stop.type, "stop");
      const reply = await request(w.conn, { type: "stop_ack", token: "0".repeat(32) });
      assert.deepEqual(reply, { type: "refuse", reason: "stop_ack not accepted (wrong-token)" });
      const outcome = await stopping;
      assert.deepEqual([outcome.complete, outcome.acked, outcome.gone], [false, [], [{ name: w.label, why: "sent a wrong stop_ack" }]]);
    });

    test("a report that arrives while stopping is booked, not dropped, and the ack says drain; more work is not handed out", TEST, async () => {
      const c = await campaign();
      const w = await worker(c);
      const unit = await take(c, w.conn);
      c.beginEnding();
      const stopping = c.server.stopAll(STOP_GRACE_MS);
      assert.deepEqual(await request(w.conn, c.report(unit)), { type: "ack", drain: true, known: null, note: c.bookedNote });
      assert.equal(c.booked(), 1);
      const stop = (await request(w.conn, { type: "want", slots: 1 })) as { type: string; token: string };
      assert.equal(stop.type, "stop", "a want while stopping gets the stop, not work");
      assert.deepEqual(await request(w.conn, { type: "stop_ack", token: stop.token }), { type: "bye", reason: "stopped" });
      assert.equal((await stopping).complete, true);
    });

    test("a worker silent past the idle limit is dropped and its unit is handed out again, before new work", TEST, async () => {
      const c = await campaign();
      const silent = await worker(c, "silent");
      const unit = await take(c, silent.conn);
      await c.log.line(new RegExp(`^worker ${silent.label} left \\(silent for 0s\\)$`));
      assert.ok(!c.server.workers.has(silent.label));
      await assert.rejects(silent.conn.receiveRaw(5_000), PeerClosed, "the server closed the silent worker's connection");
      const next = await worker(c, "next");
      const again = await take(c, next.conn);
      assert.equal(again.key, unit.key, "the same work, not new ground");
      next.conn.destroy();
    });

    test("a worker arriving while the campaign ends is refused, saying so", TEST, async () => {
      const c = await campaign();
      c.beginEnding();
      await assert.rejects(worker(c), /"type":"refuse","reason":"this campaign is ending/);
    });
  });
}

conformance(sweep);
conformance(explore);
