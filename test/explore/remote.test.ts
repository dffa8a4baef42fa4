// Remote explore workers: dishonest doubles are refused and quarantined; an honest worker still
// executes the task exactly once; nothing from a bad stage reaches the corpus.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { CLI } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { fakeWorker, send } from "../helpers/wire.ts";
import { spawn } from "node:child_process";
import type { Connection } from "../../src/net/connection.ts";
import { sha256 } from "../helpers/scratch.ts";

const TOKEN = "explore-test-token-0123456789";

/** Handshakes a double and pulls one task. */
async function doubleWithTask(port: number): Promise<{ conn: Connection; stageRoot: string; task: { task_id: number; hash: string; fence: string } }> {
  const { conn, stageRoot } = await fakeWorker(port, TOKEN, "double");
  for (;;) {
    const reply = (await send(conn, { type: "want", slots: 1 })) as { type: string; tasks?: { task_id: number; hash: string; fence: string }[] };
    if (reply.type === "task") return { conn, stageRoot: stageRoot!, task: reply.tasks![0]! };
    await new Promise((r) => setTimeout(r, 100));
  }
}

const result = (task: { task_id: number; hash: string; fence: string }, over: Record<string, unknown>) => ({
  type: "result" as const,
  task_id: task.task_id,
  fence: task.fence,
  input_hash: task.hash,
  new_hashes: [] as string[],
  num_generated: 0,
  staged_bytes: 0,
  staging_id: "",
  retcode: 0,
  elapsed: 0.01,
  protocol_error: "" as const,
  budget: null,
  detail: null,
  ...over,
});

test("a double reporting a wrong input hash, an extra staged file, or a stale fence is refused and quarantined; an honest worker runs the task once", async () => {
  const e = new ExploreDir();
  try {
    e.seed("only", "the one seed\n");
    const log = join(e.dir, "executions.log");
    const target = e.script("t.sh", `cat >> "${log}"; echo >> "${log}"; printf honest-child > "$SYMCC_OUTPUT_DIR/c"`);
    const master = e.start(["-j", "0", "--port", "0", "--bind", "127.0.0.1", "--token", TOKEN, "--max-idle", "1", "-t", "5"], [target]);
    const port = await master.port();
    const seedHash = sha256("the one seed\n");

    // 1. A wrong input hash.
    const a = await doubleWithTask(port);
    assert.equal(a.task.hash, seedHash);
    const ackA = (await send(a.conn, result(a.task, { input_hash: sha256("something else") }))) as { note: string };
    assert.equal(ackA.note, "refused");
    const againA = (await send(a.conn, { type: "want", slots: 1 })) as { type: string };
    assert.equal(againA.type, "wait", "a quarantined worker gets no more work");

    // 2. An extra file in its stage, next to a correctly named child.
    const b = await doubleWithTask(port);
    assert.equal(b.task.hash, seedHash, "the refused task went back to the front");
    assert.equal(b.task.fence, a.task.fence, "under the same fence");
    // The double stages where the master told it to (welcome.explore.stage_root).
    const stageId = "ab".repeat(16);
    const stage = join(b.stageRoot, stageId);
    mkdirSync(stage, { recursive: true });
    const evil = "evil child\n";
    writeFileSync(join(stage, sha256(evil)), evil);
    writeFileSync(join(stage, sha256("smuggled\n")), "smuggled\n");
    const ackB = (await send(b.conn, result(b.task, { new_hashes: [sha256(evil)], num_generated: 1, staged_bytes: evil.length, staging_id: stageId }))) as { note: string };
    assert.equal(ackB.note, "refused");
    assert.ok(!existsSync(stage), "the bad stage was removed");

    // 3. A stale fence.
    const c = await doubleWithTask(port);
    assert.equal(c.task.fence, a.task.fence);
    const ackC = (await send(c.conn, result(c.task, { fence: c.task.fence + "-old" }))) as { note: string };
    assert.equal(ackC.note, "refused");

    // An honest worker now takes it.
    const honest = spawn(process.execPath, [CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", TOKEN], { cwd: e.dir, stdio: ["ignore", "pipe", "pipe"] });
    let wout = "";
    honest.stdout!.setEncoding("utf8").on("data", (d: string) => (wout += d));
    const honestDone = new Promise<number | null>((resolve) => honest.on("close", (code) => resolve(code)));
    for (const d of [a, b, c]) d.conn.destroy();
    const m = await master.done;
    assert.equal(m.code, 70, "invalid results make the campaign end non-zero\n" + master.output());
    assert.equal(await honestDone, 0, wout);
    const s = e.stats();
    assert.equal(s.observations, 2, "the seed and the honest child");
    assert.equal(s.invalid_results, 3);
    assert.equal(readFileSync(log, "utf8"), "the one seed\n\nhonest-child\n", "each input was executed exactly once, by the honest worker");
    assert.deepEqual(e.corpusFiles().sort(), [seedHash, sha256("honest-child")].sort(), "nothing from a bad stage was promoted");
    assert.match(master.output(), /executor w1 quarantined: input hash/);
    assert.match(master.output(), /executor w2 quarantined: stage (ab){16}: stage holds undeclared child/);
    assert.match(master.output(), /executor w3 quarantined: the fence does not match/);
  } finally {
    e.cleanup();
  }
});

test("a result that arrives while the master shuts down (Ctrl-C) is consumed and committed, not dropped", async () => {
  const e = new ExploreDir();
  try {
    e.seed("only", "late but welcome\n");
    const master = e.start(["-j", "0", "--port", "0", "--bind", "127.0.0.1", "--token", TOKEN, "--max-idle", "30", "-t", "5"], ["/bin/true"]);
    const port = await master.port();
    const d = await doubleWithTask(port);
    master.child.kill("SIGINT");
    // The master asks for the stop at once; a worker finishes what it runs, reports it, and only
    // then acknowledges.
    let stop: { type: string; token?: string } | null = null;
    const startedAt = Date.now();
    while (!stop) {
      const reply = (await send(d.conn, { type: "heartbeat", ids: [d.task.task_id] })) as { type: string; token?: string; drain?: boolean; known?: number[] };
      if (reply.type === "stop") stop = reply;
      else {
        assert.deepEqual(reply.known, [d.task.task_id], "the task is still the double's");
        assert.ok(Date.now() - startedAt < 30_000, "the stop arrived");
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    assert.match(master.output(), /Ctrl-C: stopping/);
    const ack = (await send(d.conn, result(d.task, {}))) as { type: string; note: string; drain: boolean };
    assert.equal(ack.note, "committed", "the late result was consumed");
    assert.equal(ack.drain, true);
    d.conn.send({ type: "stop_ack", token: stop.token! });
    const r = await master.done;
    assert.equal(r.code, 6, master.output()); // interrupted (docs/exit-codes.md)
    assert.equal(e.stats().observations, 1, "the late result counts");
    assert.match(master.output(), /worker shutdown: all 1 worker\(s\) acknowledged the stop/);
    d.conn.destroy();
  } finally {
    e.cleanup();
  }
});
