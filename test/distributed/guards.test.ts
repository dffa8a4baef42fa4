// What the coordinator refuses: a worker that sees another generator, hostile bytes and frames,
// a done for a chunk the sender does not hold, a second coordinator; and what it does about a
// worker that never acknowledges the stop.
import assert from "node:assert/strict";
import { appendFileSync, copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { completeChunks, exitOwed } from "../helpers/books.ts";
import { Campaign, coverageViolations, distributedTable, PLANTED, start, startCoordinator, waitFor } from "../helpers/campaign.ts";
import { campaignToken, fakeWorker, frameBytes, rawExchange, send } from "../helpers/wire.ts";

function ownGenerator(c: Campaign): string {
  mkdirSync(join(c.dir, "gen"));
  for (const f of ["planted.mjs", "cli-args.mjs", "generate.mjs", "machine.mjs", "pool.mjs", "seeds.mjs", "shrink.mjs", "worker.mjs"]) {
    copyFileSync(join(PLANTED, "..", f), join(c.dir, "gen", f));
  }
  c.writeConfig({
    generator: `[generator]
command = ["node", "gen/planted.mjs", "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}"]
identity = ["gen/*.mjs"]
`,
    extra: distributedTable(),
  });
  return join(c.dir, "gen", "planted.mjs");
}

test("a worker that sees a different generator is refused naming it and both hashes; restored, it is admitted", async () => {
  const c = new Campaign();
  try {
    const gen = ownGenerator(c);
    const original = readFileSync(gen);
    const coord = await startCoordinator(c, ["--for", "2m"]);
    const master = `127.0.0.1:${coord.port}`;
    appendFileSync(gen, "\n// edited after the coordinator started\n");
    const refused = start(c, ["worker", "--master", master, "-j", "1"]);
    const r = await refused.result;
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.match(r.stderr, /generator identity differs \(worker [0-9a-f]{12}, coordinator [0-9a-f]{12}\)/);
    assert.match(r.stderr, /gen\/\*\.mjs/);
    assert.match(coord.output(), /REFUSED 127\.0\.0\.1:\d+ — generator identity differs/);
    writeFileSync(gen, original);
    const admitted = start(c, ["worker", "--master", master, "-j", "1"]);
    await waitFor("the restored worker to be admitted", () => (c.query("SELECT * FROM worker").length === 1 ? true : undefined));
    await waitFor("a chunk of the admitted worker booked", () => (completeChunks(c) > 0 ? true : undefined), 60_000);
    coord.child.kill("SIGINT");
    const [rc, ra] = await Promise.all([coord.result, admitted.result]);
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assert.equal(ra.code, 0);
  } finally {
    c.cleanup();
  }
});

test("hostile bytes and frames are refused and logged while a live worker's campaign completes correctly", async () => {
  const c = new Campaign({ extra: distributedTable(), costMs: 1, defaults: { bootstrap_seeds: 60 } });
  try {
    const coord = await startCoordinator(c, ["--for", "2m"]);
    const port = coord.port;
    const token = campaignToken(c.outDir);
    const live = start(c, ["worker", "--master", `127.0.0.1:${port}`, "-j", "1"]);
    await waitFor("the live worker to hold a chunk", () => c.query("SELECT * FROM chunk").length > 0 ? true : undefined);

    // Each one is answered with a refuse naming the reason, then the connection is closed.
    const hostile: [string, Buffer | string, RegExp][] = [
      ["garbage", Buffer.from([0xde, 0xad, 0xbe, 0xef, 0x0a]), /bad frame header/],
      ["huge length", "999999999\n", /over the 4194304-byte cap/],
      ["invalid JSON", "5\n{nope", /not JSON/],
      ["wrong token", frameBytes({ type: "status", token: "x".repeat(32), json: false }), /bad or missing token/],
      ["unknown type", frameBytes({ type: "gimme", token }), /unknown frame type 'gimme'/],
      ["extra field", frameBytes({ type: "status", token, json: false, evil: 1 }), /unexpected field\(s\) evil/],
    ];
    for (const [what, bytes, reason] of hostile) {
      const r = await rawExchange(port, bytes);
      assert.match(r.reply, /"type":"refuse"/, what);
      assert.match(r.reply, reason, what);
      assert.ok(r.closed, `${what}: the coordinator closed the connection`);
    }

    // A handshaken double reports a chunk that belongs to the live worker: ignored, not booked.
    const held = c.one<{ id: number; status: string }>("SELECT id, status FROM chunk ORDER BY id LIMIT 1");
    const double = await fakeWorker(port, token);
    const ack = (await send(double.conn, { type: "done", chunk_id: held.id, elapsed: 1, rc: 0, outcome: "complete", error: null })) as { note: string };
    assert.equal(ack.note, "unknown chunk");
    const bogus = (await send(double.conn, { type: "done", chunk_id: 999_999, elapsed: 1, rc: 0, outcome: "complete", error: null })) as { note: string };
    assert.equal(bogus.note, "unknown chunk");
    double.conn.destroy();
    const lastBeforeAttackEnded = c.one<{ n: number }>("SELECT MAX(id) AS n FROM chunk").n;
    const bookedAfter = () => c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE id > ? AND status = 'complete'", lastBeforeAttackEnded).n;
    // The live worker keeps being served after the attack: a chunk assigned since is booked.
    await waitFor("a chunk assigned after the attack to be booked", () => (bookedAfter() > 0 ? true : undefined), 60_000);
    coord.child.kill("SIGINT");

    const [rc, rl] = await Promise.all([coord.result, live.result]);
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assert.equal(rl.code, 0, rl.stdout);
    for (const reason of ["bad frame header", "over the 4194304-byte cap", "not JSON", "bad or missing token", "unknown frame type 'gimme'", "unexpected field(s) evil"]) {
      assert.match(rc.stdout, new RegExp(`REFUSED 127\\.0\\.0\\.1:\\d+ — .*${reason.replace(/[()]/g, "\\$&")}`));
    }
    assert.match(rc.stdout, new RegExp(`reported chunk ${held.id}, which it does not hold — ignored`));
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE status = 'complete' AND worker_id != (SELECT MIN(id) FROM worker)").n, 0);
    assert.deepEqual(coverageViolations(c), []);
    assert.ok(c.one<{ cursor: number }>("SELECT cursor FROM lane").cursor > 1);
  } finally {
    c.cleanup();
  }
});

test("a worker that never acknowledges the stop is named, and the coordinator exits non-zero within the grace", async () => {
  const c = new Campaign({ extra: distributedTable({ stopGrace: 3 }) });
  try {
    const coord = await startCoordinator(c, ["--for", "5s"]);
    const token = campaignToken(c.outDir);
    const silent = await fakeWorker(coord.port, token, "mute");
    // It polls like a worker until it is told to stop, then never answers.
    let stop: { type: string; token?: string } | null = null;
    const started = Date.now();
    while (!stop) {
      const reply = (await send(silent.conn, { type: "heartbeat", ids: [] })) as { type: string; token?: string };
      if (reply.type === "stop") stop = reply;
      else await new Promise((r) => setTimeout(r, 300));
      assert.ok(Date.now() - started < 60_000, "the stop arrived");
    }
    assert.match(stop.token!, /^[0-9a-f]{32}$/);
    const stopAt = Date.now();
    const rc = await coord.result;
    const waited = (Date.now() - stopAt) / 1000;
    assert.equal(rc.code, 70, rc.stdout + rc.stderr);
    assert.match(rc.stdout, new RegExp(`worker mute#${silent.workerId} did not acknowledge the stop within 3s`));
    assert.ok(waited > 2.5 && waited < 3 + 5, `bounded by the 3 s grace (waited ${waited.toFixed(1)} s)`);
    silent.conn.destroy();
  } finally {
    c.cleanup();
  }
});

test("a stop_ack with the wrong token does not count", async () => {
  const c = new Campaign({ extra: distributedTable({ stopGrace: 3 }) });
  try {
    const coord = await startCoordinator(c, ["--for", "4s"]);
    const liar = await fakeWorker(coord.port, campaignToken(c.outDir), "liar");
    for (;;) {
      const reply = (await send(liar.conn, { type: "heartbeat", ids: [] })) as { type: string; token?: string };
      if (reply.type === "stop") {
        const answer = (await send(liar.conn, { type: "stop_ack", token: "0".repeat(32) })) as { type: string; reason?: string };
        assert.equal(answer.type, "refuse");
        break;
      }
      await new Promise((r) => setTimeout(r, 300));
    }
    const rc = await coord.result;
    assert.equal(rc.code, 70);
    assert.match(rc.stdout, /stop_ack that does not match its stop \(wrong-token\)/);
    assert.match(rc.stdout, new RegExp(`worker liar#${liar.workerId} left before acknowledging the stop`));
  } finally {
    c.cleanup();
  }
});

test("a lock naming another host refuses coordinate; status points at that host's --master", () => {
  const c = new Campaign({ extra: distributedTable() });
  try {
    mkdirSync(c.outDir, { recursive: true });
    writeFileSync(join(c.outDir, "fuzzfleet.lock"), "otherhost 4242 2026-01-01T00:00:00Z coordinate 9999\n");
    const r = c.cli(["coordinate", "--for", "20s"]);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /otherhost/);
    const status = c.cli(["status"]);
    assert.equal(status.code, 3);
    assert.match(status.stderr, /fuzzfleet status --master otherhost:9999/);
  } finally {
    c.cleanup();
  }
});
