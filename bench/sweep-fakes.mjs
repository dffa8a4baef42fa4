// sweep-fakes: what the sweep benches that drive a real `fuzzfleet coordinate` share, so that each
// measures the same thing the same way: the campaign they set up (the planted generator, one
// lane, a loopback `[distributed]` section) and the fake worker that speaks the real sweep wire
// (dist/ modules) without running the generator. A bench says only what differs: the campaign's
// title, jobs, chunk length and bootstrap seeds, how often a drained worker polls, and what a
// worker does with each chunk it is given (how long it "runs", what it times and counts).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { ROOT, sleep, startProcess } from "./common.mjs";
import { campaignToml } from "./planted.mjs";

// A free loopback port (each bench reads it from the coordinator's banner); leases and graces long
// enough that a loaded machine's slow round trips never cost a fake worker its chunk or its stop.
const DISTRIBUTED_SECTION = `
[distributed]
bind = "127.0.0.1"
port = 0
lease_seconds = 120
drain_grace_minutes = 2
stop_grace_seconds = 20
`;

/**
 * `dir`/campaign with a fuzzfleet.toml for the planted generator whose coordinator listens on a
 * free loopback port. `settings` are campaignToml's: title, jobs, chunkSeconds, bootstrapSeeds.
 */
export function newCampaign(dir, settings) {
  const campaign = join(dir, "campaign");
  mkdirSync(campaign, { recursive: true });
  const config = join(campaign, "fuzzfleet.toml");
  writeFileSync(config, campaignToml({ ...settings, tail: DISTRIBUTED_SECTION }));
  return { campaign, config, db: join(campaign, "fuzzfleet.db") };
}

/**
 * Starts `argv` (a coordinator) with its stdout and stderr going to `logPath`: the bench never
 * reads a pipe while it measures, so the coordinator's console lines cost it nothing.
 */
export function startLoggedCoordinator(logPath, argv, options) {
  return startProcess(["bash", "-c", `exec "$@" >${JSON.stringify(logPath)} 2>&1`, "coordinate", ...argv], options);
}

/** Polls `logPath` until `re` matches (its match), the coordinator exits, or 60 s pass. */
export async function waitForLog(logPath, coord, re) {
  const t0 = performance.now();
  for (;;) {
    let text = "";
    try {
      text = readFileSync(logPath, "utf8");
    } catch {
      // not created yet
    }
    const m = re.exec(text);
    if (m) return m;
    if (coord.child.exitCode !== null) throw new Error(`coordinate exited before printing ${re}:\n${text}`);
    if (performance.now() - t0 > 60_000) throw new Error(`coordinate did not print ${re} within 60 s:\n${text}`);
    await sleep(50);
  }
}

/** The compiled modules a fake worker speaks the sweep wire with. */
export async function loadSweepWire() {
  const url = (p) => new URL(`file://${join(ROOT, "dist", p)}`).href;
  const [{ dial }, { CoordinatorReply }, { handshake }] = await Promise.all([
    import(url("net/connection.js")),
    import(url("net/messages.js")),
    import(url("worker/client.js")),
  ]);
  return { dial, CoordinatorReply, handshake };
}

/**
 * One fake worker: the real handshake, then want -> assign and, for each chunk, `runChunk(chunk,
 * done)` until told to drain; then empty heartbeats every `idlePollMs` until the stop, answered
 * with its exact token, as a real worker does. `runChunk` must call `done(elapsed)` once: it
 * sends the chunk's `done` (rc 0, complete) and resolves with the coordinator's ack. `onAssign`,
 * if given, sees when each want that was answered with chunks went out and when its assign came.
 * Resolves once the stop is acknowledged; `stats.stopped` counts those.
 */
export async function fakeSweepWorker(wire, port, { token, index, idlePollMs, stats, runChunk, onAssign = null }) {
  const conn = await wire.dial("127.0.0.1", port, 10_000);
  await wire.handshake(conn, { token, jobs: 1, slots: 1, hostname: `fake-${index}` });
  const request = (frame) => conn.request(frame, wire.CoordinatorReply, 60_000);
  let draining = false;
  const done = (chunk) => async (elapsed) => {
    const ack = await request({ type: "done", chunk_id: chunk.chunk_id, elapsed, rc: 0, outcome: "complete", error: null });
    if (ack.type !== "ack") throw new Error(`fake worker ${index}: '${ack.type}' in reply to done`);
    if (ack.drain) draining = true;
    return ack;
  };
  try {
    for (;;) {
      let reply;
      if (!draining) {
        const tWant = performance.now();
        reply = await request({ type: "want", slots: 1 });
        if (reply.type === "assign") {
          onAssign?.(tWant, performance.now());
          for (const ch of reply.chunks) await runChunk(ch, done(ch));
          continue;
        }
        if (reply.type === "drain") draining = true;
        else if (reply.type === "wait") await sleep(reply.seconds * 1000);
      } else {
        await sleep(idlePollMs);
        reply = await request({ type: "heartbeat", ids: [] });
      }
      if (reply.type === "stop") {
        const bye = await request({ type: "stop_ack", token: reply.token });
        if (bye.type !== "bye") throw new Error(`fake worker ${index}: '${bye.type}' in reply to stop_ack`);
        stats.stopped++;
        return;
      }
      if (reply.type === "refuse") throw new Error(`fake worker ${index} refused: ${reply.reason}`);
    }
  } finally {
    conn.destroy();
  }
}
