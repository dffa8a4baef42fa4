// SweepWorkerProtocol.run(): the coordinator's session ends by events, not by a poll. A real
// session (store, engine, the protocol's own server on 127.0.0.1) and worker doubles. The drain
// grace is an hour and the deadline an hour away unless a test says otherwise, so a drain that
// ended only when a timer ran out would never end within the test's timeout: these tests fail
// by hanging if an event does not wake run().
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import Database from "better-sqlite3";
import { after, test } from "node:test";
import type { CoordinatorReplyT, Frame } from "../../src/net/messages.ts";
import { fakeWorker, send } from "../helpers/wire.ts";
import { servedSweep, type ServedSweep } from "./served-sweep.ts";

const TOKEN = "run-test-token-0123456789";
const TEST = { timeout: 60_000 };
const opened: ServedSweep[] = [];
after(async () => {
  for (const s of opened) await s.close();
});

async function coordinator(o: { drainGraceSeconds?: number; budgetSeconds?: number } = {}) {
  const lines: string[] = [];
  const s = await servedSweep({ token: TOKEN, log: (l) => lines.push(l), ...o });
  opened.push(s);
  const { port } = await s.protocol.listen("127.0.0.1", 0);
  return { ...s, port, lines };
}

const request = (w: { conn: Parameters<typeof send>[0] }, frame: Frame) => send(w.conn, frame) as Promise<CoordinatorReplyT>;

/** A worker double holding one chunk. */
async function holder(port: number) {
  const w = await fakeWorker(port, TOKEN, "holder");
  const reply = await request(w, { type: "want", slots: 1 });
  assert.equal(reply.type, "assign");
  const chunk = (reply as Extract<CoordinatorReplyT, { type: "assign" }>).chunks[0]!;
  mkdirSync(chunk.scratch_dir, { recursive: true });
  return { ...w, chunk };
}

/** Heartbeats until the coordinator asks for the stop, and answers it exactly. */
async function answerStop(w: Awaited<ReturnType<typeof holder>>): Promise<void> {
  for (;;) {
    const reply = await request(w, { type: "heartbeat", ids: [] });
    if (reply.type === "stop") {
      assert.deepEqual(await request(w, { type: "stop_ack", token: reply.token }), { type: "bye", reason: "stopped" });
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

test("Ctrl-C drains at once; the drain ends when the last chunk in flight lands, and the worker is stopped exactly", TEST, async () => {
  const c = await coordinator();
  const w = await holder(c.port);
  const controller = new AbortController();
  const run = c.protocol.run(controller.signal);
  controller.abort();
  // The drain began: a heartbeat is acknowledged with drain, the chunk still counts as the worker's.
  let beat: CoordinatorReplyT;
  do beat = await request(w, { type: "heartbeat", ids: [w.chunk.chunk_id] });
  while (beat.type === "ack" && !beat.drain);
  assert.deepEqual(beat, { type: "ack", drain: true, known: [w.chunk.chunk_id], note: null });
  assert.deepEqual(await request(w, { type: "done", chunk_id: w.chunk.chunk_id, elapsed: 1, rc: 0, outcome: "complete", error: null }), {
    type: "ack",
    drain: true,
    known: null,
    note: "recorded",
  });
  await answerStop(w);
  const report = await run;
  assert.deepEqual([report.abandoned, report.outcome.complete, report.outcome.acked], [0, true, ["holder#1"]]);
  assert.equal(c.engine.counts.chunks, 1);
  assert.ok(c.lines.includes("interrupted: draining — no new chunks; chunks in flight that do not land will be re-swept"));
});

test("a worker that leaves with its chunk ends the drain at once: the chunk goes back to be re-swept, not counted", TEST, async () => {
  const c = await coordinator();
  const w = await holder(c.port);
  const controller = new AbortController();
  const run = c.protocol.run(controller.signal);
  controller.abort();
  let beat: CoordinatorReplyT;
  do beat = await request(w, { type: "heartbeat", ids: [w.chunk.chunk_id] });
  while (beat.type === "ack" && !beat.drain);
  w.conn.destroy();
  const report = await run;
  assert.deepEqual([report.abandoned, report.outcome.complete, report.outcome.acked, report.outcome.gone], [0, true, [], []]);
  assert.equal(c.engine.counts.chunks, 0);
  assert.equal(c.engine.inFlightChunks().length, 0);
  assert.ok(c.lines.some((l) => /^worker holder#1 left \(connection closed\)$/.test(l)));
});

test("the deadline floor starts the drain when it is due, with nothing in flight the session ends", TEST, async () => {
  const probe = await coordinator();
  const floor = probe.engine.floorSeconds;
  const c = await coordinator({ budgetSeconds: floor + 0.5 });
  const report = await c.protocol.run(new AbortController().signal);
  assert.equal(c.engine.draining, "deadline");
  assert.deepEqual([report.abandoned, report.outcome.complete], [0, true]);
  assert.ok(c.lines.includes("deadline: draining — waiting for the chunks in flight"));
});

test("a drain grace that runs out reissues what is still running, says so, and stops the worker that holds it", TEST, async () => {
  const c = await coordinator({ drainGraceSeconds: 0.3 });
  const w = await holder(c.port);
  const controller = new AbortController();
  const run = c.protocol.run(controller.signal);
  controller.abort();
  await answerStop(w);
  const report = await run;
  assert.deepEqual([report.abandoned, report.outcome.complete], [1, true]);
  assert.equal(c.engine.counts.chunks, 0);
  assert.ok(c.lines.includes("1 chunk(s) were still running when the drain grace expired — not counted; the next session re-sweeps them"));
});

test("booking holds nothing once booked: after 40 chunks assigned and done, no wait for a blocked store is left on the queue", TEST, async () => {
  const c = await coordinator();
  const w = await fakeWorker(c.port, TOKEN, "booker");
  for (let i = 0; i < 40; i++) {
    const reply = await request(w, { type: "want", slots: 1 });
    assert.equal(reply.type, "assign", JSON.stringify(reply));
    const chunk = (reply as Extract<CoordinatorReplyT, { type: "assign" }>).chunks[0]!;
    mkdirSync(chunk.scratch_dir, { recursive: true });
    const ack = await request(w, { type: "done", chunk_id: chunk.chunk_id, elapsed: 1, rc: 0, outcome: "complete", error: null });
    assert.equal((ack as { note?: string }).note, "recorded");
  }
  assert.equal(c.engine.counts.chunks, 40);
  // Each booking waits for its commit or for the store to refuse writes; a wait left behind per
  // booking would hold memory for every chunk of a session (about 800 bytes each).
  assert.equal(c.protocol.books.waitsForBlock, 0);
  w.conn.destroy();
});

test("an idle fleet finds out that a blocked store takes writes again: a worker's 'want' tries it once no retry is armed", TEST, async () => {
  const c = await coordinator();
  const w = await fakeWorker(c.port, TOKEN, "idle");
  // Another writer holds the store's write lock: the next change is refused, the queue is blocked.
  const other = new Database(c.campaign.dbPath);
  other.exec("BEGIN IMMEDIATE");
  try {
    assert.equal((await request(w, { type: "want", slots: 1 })).type, "wait");
    assert.ok(c.protocol.books.blocked, "the store refused the assignment");
    assert.ok(c.lines.some((l) => /is locked by another process/.test(l)), c.lines.join("\n"));
  } finally {
    other.exec("ROLLBACK");
    other.close();
  }
  // Nothing is queued and no chunk is in flight: only the worker's own asking can find out.
  let reply: CoordinatorReplyT = { type: "wait", seconds: 0 };
  for (let i = 0; i < 100 && reply.type === "wait"; i++) {
    await new Promise((r) => setTimeout(r, 50));
    reply = await request(w, { type: "want", slots: 1 });
  }
  assert.equal(reply.type, "assign", `still ${JSON.stringify(reply)} 5 s after the store was free`);
  assert.equal(c.protocol.books.blocked, null);
  assert.ok(c.lines.some((l) => /takes writes again/.test(l)), c.lines.join("\n"));
  w.conn.destroy();
});

test("every lane disabled on the only worker attached drains the session as 'all lanes disabled' at once, and the worker is stopped", TEST, async () => {
  const c = await coordinator();
  const w = await holder(c.port);
  const run = c.protocol.run(new AbortController().signal);
  // The generator exited 3: the chunk is aborted and its lane (the campaign's only one) disabled on this worker.
  const ack = await request(w, { type: "done", chunk_id: w.chunk.chunk_id, elapsed: 1, rc: 3, outcome: "complete", error: null });
  assert.deepEqual([ack.type, (ack as { note?: string }).note], ["ack", "aborted"]);
  await answerStop(w);
  const report = await run;
  assert.equal(c.engine.draining, "all lanes disabled");
  assert.deepEqual([report.abandoned, report.outcome.complete, report.outcome.acked], [0, true, ["holder#1"]]);
  assert.ok(c.lines.includes("every lane is disabled on every worker attached: draining — the sweep stopped sweeping"), c.lines.join("\n"));
});

test("a lane disabled on one worker while another still sweeps it does not drain; the drain comes when the other leaves", TEST, async () => {
  const c = await coordinator();
  const broken = await holder(c.port);
  const healthy = await fakeWorker(c.port, TOKEN, "healthy");
  const run = c.protocol.run(new AbortController().signal);
  await request(broken, { type: "done", chunk_id: broken.chunk.chunk_id, elapsed: 1, rc: 3, outcome: "complete", error: null });
  // The healthy worker still gets chunks: the session serves on.
  const reply = await request(healthy, { type: "want", slots: 1 });
  assert.equal(reply.type, "assign", JSON.stringify(reply));
  assert.equal(c.engine.draining, null);
  // It leaves with its chunk (taken back): only the broken worker is left, and it sweeps nothing.
  healthy.conn.destroy();
  await answerStop(broken);
  const report = await run;
  assert.equal(c.engine.draining, "all lanes disabled");
  assert.deepEqual(report.outcome.acked, ["holder#1"]);
  assert.equal(c.engine.inFlightChunks().length, 0);
});
