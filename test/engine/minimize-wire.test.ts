// Minimize units over the wire, against a real coordinator session on 127.0.0.1 and worker
// doubles: a want brings a unit under its wire id, a heartbeat keeps it, results that cannot be
// read safely give its finds back, and a unit whose lease expires is taken back.
import assert from "node:assert/strict";
import { mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { check, CoordinatorReply, minimizeWireId, type AssignedMinimize, type CoordinatorReplyT, type Frame } from "../../src/net/messages.ts";
import { PLANTED } from "../helpers/campaign.ts";
import { fakeWorker, send } from "../helpers/wire.ts";
import { servedSweep, type ServedSweep } from "./served-sweep.ts";

const TOKEN = "minimize-wire-token-0123456789";
const TEST = { timeout: 60_000 };
const opened: ServedSweep[] = [];
after(async () => {
  for (const s of opened) await s.close();
});

const gen = JSON.stringify(PLANTED);
const GENERATOR = `[generator]
command = ["node", ${gen}, "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"]
identity = [${JSON.stringify(PLANTED.replace(/planted\.mjs$/, "*.mjs"))}]
check = ["node", ${gen}, "--check", "--seeds", "{seeds}", "--json"]
minimize = ["node", ${gen}, "--minimize", "--seeds", "{seeds}", "--out", "{out}", "--jobs", "{jobs}"]
`;

/** A coordinator whose store holds three finds pending minimization, each under its own signature. */
async function coordinator(o: { leaseSeconds?: number; budgetSeconds?: number } = {}) {
  const lines: string[] = [];
  const s = await servedSweep({ token: TOKEN, log: (l) => lines.push(l), campaign: { generator: GENERATOR, extra: "[minimize]\nshare = 1\nbatch = 8\n" }, ...o });
  opened.push(s);
  const lane = s.session.lanes[0]!;
  const seeds = [101, 202, 303];
  for (const seed of seeds) {
    const id = s.session.store.recordFailure({
      generationId: s.session.generationId,
      laneId: lane.laneId,
      dedupKey: `key-${seed}`,
      bucket: "crash",
      seed,
      shrunk: false,
      message: `boom ${seed}`,
      repro: null,
      artifactDir: join(s.session.outDir, "failures", `find-${seed}`),
      appBuild: null,
      signature: `crash: boom ${seed}`,
    });
    s.session.store.addFailureSeed(id, seed, null);
  }
  const { port } = await s.protocol.listen("127.0.0.1", 0);
  return { ...s, port, lines, seeds };
}

const request = (w: { conn: Parameters<typeof send>[0] }, frame: Frame) => send(w.conn, frame) as Promise<CoordinatorReplyT>;
/** Finds of the session's generation (all open here) waiting for a unit. */
const pending = (s: ServedSweep) => s.session.store.minimizeProgress(s.session.generationId).pending;
const unitStatus = (s: ServedSweep, id: number) => s.session.store.minimizeUnit(id)!.status;

async function unitFor(port: number): Promise<{ w: Awaited<ReturnType<typeof fakeWorker>>; unit: AssignedMinimize }> {
  const w = await fakeWorker(port, TOKEN, "minimizer");
  const reply = await request(w, { type: "want", slots: 1 });
  assert.equal(reply.type, "assign", JSON.stringify(reply));
  const a = reply as Extract<CoordinatorReplyT, { type: "assign" }>;
  // The worker's one slot is the fleet's: share 1 gives it to minimization while finds wait.
  assert.equal(a.chunks.length, 0);
  assert.equal(a.minimize?.length, 1);
  return { w, unit: a.minimize![0]! };
}

test("a unit rides in assign under its wire id; heartbeats keep it; refused results give its finds back and disable the lane for that worker", TEST, async () => {
  const c = await coordinator();
  const { w, unit } = await unitFor(c.port);
  assert.deepEqual([...unit.seeds].sort((a, b) => a - b), c.seeds, "every signature's find, in one batch");
  assert.ok(unit.argv.includes(unit.seeds.join(",")), `{seeds} filled in: ${unit.argv.join(" ")}`);
  assert.equal(pending(c), 0, "the unit holds its finds");
  const wire = minimizeWireId(unit.unit_id);
  const beat = (await request(w, { type: "heartbeat", ids: [wire, unit.unit_id] })) as Extract<CoordinatorReplyT, { type: "ack" }>;
  assert.deepEqual(beat.known, [wire], "the unit is known by its wire id; the bare id names a chunk it does not hold");

  // The minimizer's output directory is a symlink: nothing of it is read, nothing decided.
  const elsewhere = join(c.campaign.dir, "elsewhere");
  mkdirSync(join(elsewhere, "failures", "101"), { recursive: true });
  mkdirSync(join(unit.scratch_dir, ".."), { recursive: true });
  symlinkSync(elsewhere, unit.scratch_dir);
  const done = (await request(w, { type: "done", chunk_id: wire, elapsed: 1, rc: 1, outcome: "complete", error: null })) as Extract<CoordinatorReplyT, { type: "ack" }>;
  assert.equal(done.note, "aborted");
  assert.equal(unitStatus(c, unit.unit_id), "aborted:results refused");
  assert.equal(pending(c), 3, "its finds wait for another unit");
  assert.equal(c.engine.minimize.inFlight.size, 0);
  // The same report again changes nothing.
  const again = (await request(w, { type: "done", chunk_id: wire, elapsed: 1, rc: 1, outcome: "complete", error: null })) as Extract<CoordinatorReplyT, { type: "ack" }>;
  assert.equal(again.note, "already recorded");
  // This worker takes no more work of the lane: no chunk, no unit.
  assert.equal((await request(w, { type: "want", slots: 1 })).type, "wait");
  w.conn.destroy();
});

test("a unit whose holder stops heartbeating is taken back when its lease expires; its finds wait for another unit", TEST, async () => {
  const c = await coordinator({ leaseSeconds: 1 });
  const stop = new AbortController();
  const running = c.protocol.run(stop.signal);
  const { w, unit } = await unitFor(c.port);
  assert.equal(unitStatus(c, unit.unit_id), "leased");
  const deadline = Date.now() + 10_000;
  while (unitStatus(c, unit.unit_id) === "leased" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  assert.equal(unitStatus(c, unit.unit_id), "reissued");
  assert.equal(pending(c), 3);
  // A late report of the unit taken back is not booked.
  const late = (await request(w, { type: "done", chunk_id: minimizeWireId(unit.unit_id), elapsed: 3, rc: 0, outcome: "complete", error: null })) as Extract<
    CoordinatorReplyT,
    { type: "ack" }
  >;
  assert.equal(late.note, "already recorded");
  assert.equal(pending(c), 3);
  w.conn.destroy();
  stop.abort();
  await running;
});

test("a unit killed at its own timeout fails its finds for good; one killed early by the session's end gives them back", TEST, async () => {
  const failedFinds = (s: ServedSweep) => s.session.store.minimizeProgress(s.session.generationId).failed;
  const timedOut = (unit: AssignedMinimize) =>
    ({ type: "done", chunk_id: minimizeWireId(unit.unit_id), elapsed: unit.hard_timeout, rc: null, outcome: "timeout", error: null }) as const;

  // A session with an hour left: the unit gets the whole [minimize] timeout (10 minutes).
  const long = await coordinator();
  const a = await unitFor(long.port);
  assert.equal(a.unit.hard_timeout, 600);
  assert.equal(((await request(a.w, timedOut(a.unit))) as Extract<CoordinatorReplyT, { type: "ack" }>).note, "aborted");
  assert.equal(unitStatus(long, a.unit.unit_id), "aborted:timeout");
  assert.deepEqual([pending(long), failedFinds(long)], [0, 3], "the minimizer ran out of its own time: final");
  a.w.conn.destroy();

  // A session with 30 s left: the unit is cut to them, and its timeout decides nothing.
  const short = await coordinator({ budgetSeconds: 30 });
  const b = await unitFor(short.port);
  assert.ok(b.unit.hard_timeout <= 30, `cut to the session's end: ${b.unit.hard_timeout}`);
  assert.equal(((await request(b.w, timedOut(b.unit))) as Extract<CoordinatorReplyT, { type: "ack" }>).note, "aborted");
  assert.equal(unitStatus(short, b.unit.unit_id), "aborted:session ended");
  assert.deepEqual([pending(short), failedFinds(short)], [3, 0], "its finds wait for the next session");
  b.w.conn.destroy();
});

test("an assign carries 1 to 64 units, chunks and minimize units together, and no stray field", () => {
  const unit = { unit_id: 1, lane: "small", seeds: [5], argv: ["true"], cwd: "/", log_path: "/l", scratch_dir: "/s", hard_timeout: 60, nice: 0, idle_io: false };
  assert.equal(check(CoordinatorReply, { type: "assign", chunks: [], minimize: [unit] }).ok, true);
  const none = check(CoordinatorReply, { type: "assign", chunks: [], minimize: [] });
  assert.equal(none.ok, false);
  assert.match((none as { reason: string }).reason, /1 to 64 units/);
  const many = check(CoordinatorReply, { type: "assign", chunks: [], minimize: Array.from({ length: 65 }, (_, i) => ({ ...unit, unit_id: i })) });
  assert.equal(many.ok, false);
  assert.equal(check(CoordinatorReply, { type: "assign", chunks: [], minimize: [{ ...unit, unit_id: minimizeWireId(1) }] }).ok, false, "a unit id is below the wire base");
  assert.equal(check(CoordinatorReply, { type: "assign", chunks: [], minimize: [{ ...unit, extra: 1 }] }).ok, false);
});
