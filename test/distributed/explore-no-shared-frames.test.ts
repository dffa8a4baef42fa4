// What a worker without the shared directory sends an explore master is not trusted: worker
// doubles that say they do not see the shared directory send children with a wrong digest,
// children over the budgets, path names that are not a stage and a hash, a result naming a child
// that never arrived, and a transfer cut short by a lost connection. Each is refused (or its
// connection is gone), nothing of it stays landed, and the task runs again; a double that sends
// its child whole has it verified and promoted; an honest worker then finishes, each input run once.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { z } from "zod";
import { dial, PeerClosed, type Connection } from "../../src/net/connection.ts";
import { CoordinatorReply, HandshakeReply, PROTOCOL_VERSION, Refuse, Welcome, type Frame, type TaskItemT } from "../../src/net/messages.ts";
import { provenTarget } from "../../src/explore/state/target-identity.ts";
import { CLI, waitFor } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { sha256 } from "../helpers/scratch.ts";

const TOKEN = "explore-no-shared-frames-token-0123";

/** A double that says it does not see the shared directory; it proves the target build honestly (the test runs where the master does). */
async function transferDouble(port: number, cwd: string): Promise<{ conn: Connection; stageRoot: string; welcome: Extract<Frame, { type: "welcome" }> }> {
  const conn = await dial("127.0.0.1", port, 5000);
  const first = await conn.request({ type: "hello", token: TOKEN, protocol: PROTOCOL_VERSION, host: "double", jobs: 1, slots: 1 }, HandshakeReply, 10_000);
  assert.equal(first.type, "challenge");
  const challenge = first as Extract<Frame, { type: "challenge" }>;
  assert.ok(challenge.target, "an explore master asks for the target build");
  const build = provenTarget(challenge.target, true, cwd, process.env.PATH).build;
  const welcome = await conn.request(
    { type: "prove", nonce: null, gen_hash: null, app_build: null, problem: null, shared_dir: false, target_build: build },
    z.discriminatedUnion("type", [Welcome, Refuse]),
    10_000,
  );
  assert.equal(welcome.type, "welcome", JSON.stringify(welcome));
  const w = welcome as Extract<Frame, { type: "welcome" }>;
  return { conn, stageRoot: w.explore!.stage_root, welcome: w };
}

async function pullTask(conn: Connection): Promise<TaskItemT> {
  for (;;) {
    const reply = await conn.request({ type: "want", slots: 1 }, CoordinatorReply, 10_000);
    if (reply.type === "task") return reply.tasks[0]!;
    assert.equal(reply.type, "wait", JSON.stringify(reply));
    await new Promise((r) => setTimeout(r, 50));
  }
}

function put(task: TaskItemT, stageId: string, name: string, data: Buffer, over: Partial<Extract<Frame, { type: "put" }>> = {}): Frame {
  return { type: "put", unit: task.task_id, path: `${stageId}/${name}`, size: data.length, offset: 0, data: data.toString("base64"), sha256: sha256(data), ...over };
}

function result(task: TaskItemT, over: Record<string, unknown>): Frame {
  return {
    type: "result",
    task_id: task.task_id,
    fence: task.fence,
    input_hash: task.hash,
    new_hashes: [],
    num_generated: 0,
    staged_bytes: 0,
    staging_id: "",
    retcode: 0,
    elapsed: 0.01,
    protocol_error: "",
    budget: null,
    detail: null,
    ...over,
  } as Frame;
}

/** The connection is closed by the master (the refusal was its last word). */
async function closedByMaster(conn: Connection): Promise<void> {
  await assert.rejects(conn.receiveRaw(10_000), (err: unknown) => err instanceof PeerClosed);
}

test("hostile files from a worker without the shared directory are refused and removed, a cut transfer lands nothing, the task runs again; a whole child is verified and promoted; each input runs once", async () => {
  const e = new ExploreDir();
  try {
    e.seed("only", "the one seed\n");
    const log = join(e.dir, "executions.log");
    const target = e.script("t.sh", `cat "$1" >> "${log}"; echo >> "${log}"; printf honest-child > "$SYMCC_OUTPUT_DIR/c"`);
    const master = e.start(["-j", "0", "--port", "0", "--bind", "127.0.0.1", "--token", TOKEN, "--max-idle", "1", "-t", "5", "--max-children", "2", "--max-result-bytes", "100"], [target, "@@"]);
    const port = await master.port();
    const seed = Buffer.from("the one seed\n");
    const stageId = "cd".repeat(16);
    const child = Buffer.from("double-child\n");

    // The input travels with the task; the caps come with the welcome.
    const first = await transferDouble(port, e.dir);
    assert.deepEqual(first.welcome.transfer, { results: "", max_files: 2, max_bytes: 100, max_file_bytes: 100, piece_bytes: 2 ** 20 });
    const task = await pullTask(first.conn);
    assert.deepEqual(task.input, { size: seed.length, data: seed.toString("base64") });

    // A digest that is not the child's name.
    const bad = await first.conn.request(put(task, stageId, sha256(child), child, { sha256: sha256("other") }), CoordinatorReply, 10_000);
    assert.equal(bad.type, "refuse");
    assert.match((bad as { reason: string }).reason, new RegExp(`files of task ${task.task_id} refused: ${sha256(child)} came with SHA-256 ${sha256("other")}: a child's digest is its name`));
    await closedByMaster(first.conn);
    assert.ok(!existsSync(join(first.stageRoot, stageId)), "what landed of it is removed");

    const cases: { name: string; frame: (t: TaskItemT) => Frame; reason: RegExp }[] = [
      { name: "bytes that are not their name", frame: (t) => put(t, stageId, sha256(child), Buffer.from("forged bytes\n"), { sha256: sha256(child) }), reason: /the bytes sent as [0-9a-f]{64} hash to [0-9a-f]{64}/ },
      { name: "over --max-result-bytes", frame: (t) => put(t, stageId, sha256(Buffer.alloc(101)), Buffer.alloc(101)), reason: /more than 100 bytes of children \(--max-result-bytes\)/ },
      { name: "a path out of the stage", frame: (t) => ({ ...(put(t, stageId, sha256(child), child) as object), path: `../../${sha256(child)}` }) as Frame, reason: /path '\.\.\/\.\.\/[0-9a-f]{64}' is not '<staging id>\/<child hash>'/ },
      { name: "a child that never arrived", frame: (t) => result(t, { new_hashes: [sha256(child)], num_generated: 1, staged_bytes: child.length, staging_id: stageId }), reason: /the children of task \d+ are not taken: the result names stage (cd){16}, but none of its children arrived/ },
    ];
    for (const c of cases) {
      const d = await transferDouble(port, e.dir);
      const t = await pullTask(d.conn);
      assert.equal(t.hash, task.hash, `${c.name}: the task went back to the front`);
      assert.equal(t.fence, task.fence, `${c.name}: under the same fence`);
      const reply = await d.conn.request(c.frame(t), CoordinatorReply, 10_000);
      assert.equal(reply.type, "refuse", c.name);
      assert.match((reply as { reason: string }).reason, c.reason, c.name);
      await closedByMaster(d.conn);
      assert.ok(!existsSync(join(d.stageRoot, stageId)), `${c.name}: nothing stays landed`);
    }

    // Over --max-children: the third child of one task.
    {
      const d = await transferDouble(port, e.dir);
      const t = await pullTask(d.conn);
      const kids = ["k1\n", "k2\n", "k3\n"].map((s) => Buffer.from(s));
      for (const k of kids.slice(0, 2)) assert.equal((await d.conn.request(put(t, stageId, sha256(k), k), CoordinatorReply, 10_000)).type, "ack");
      const third = await d.conn.request(put(t, stageId, sha256(kids[2]!), kids[2]!), CoordinatorReply, 10_000);
      assert.match((third as { reason: string }).reason, /more than 2 children \(--max-children\)/);
      await closedByMaster(d.conn);
      assert.ok(!existsSync(join(d.stageRoot, stageId)), "the two children that had landed are removed too");
    }

    // A transfer cut short: half a child lands, then the connection is gone.
    {
      const d = await transferDouble(port, e.dir);
      const t = await pullTask(d.conn);
      const half = await d.conn.request(put(t, stageId, sha256(child), child.subarray(0, 6), { size: child.length, sha256: null }), CoordinatorReply, 10_000);
      assert.deepEqual(half, { type: "ack", drain: false, known: null, note: null });
      assert.deepEqual(readdirSync(join(d.stageRoot, stageId)), [sha256(child)], "the first piece landed in the stage");
      d.conn.destroy();
      await waitFor("the half-landed stage to be removed", () => (existsSync(join(d.stageRoot, stageId)) ? undefined : true));
    }

    // A double that sends its child whole: verified, promoted, the task done.
    {
      const d = await transferDouble(port, e.dir);
      const t = await pullTask(d.conn);
      assert.equal(t.hash, task.hash, "the task cut short went back to the front");
      const ok = await d.conn.request(put(t, stageId, sha256(child), child), CoordinatorReply, 10_000);
      assert.deepEqual(ok, { type: "ack", drain: false, known: null, note: null });
      const done = await d.conn.request(result(t, { new_hashes: [sha256(child)], num_generated: 1, staged_bytes: child.length, staging_id: stageId }), CoordinatorReply, 10_000);
      assert.equal(done.type, "ack", JSON.stringify(done));
      assert.notEqual((done as { note: string }).note, "refused");
      d.conn.destroy();
    }

    // An honest worker runs what is left: the double's child, then the honest child.
    const honest = spawn(process.execPath, [CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", TOKEN], { cwd: e.dir, stdio: ["ignore", "pipe", "pipe"] });
    let wout = "";
    honest.stdout!.setEncoding("utf8").on("data", (d: string) => (wout += d));
    honest.stderr!.setEncoding("utf8").on("data", (d: string) => (wout += d));
    const honestDone = new Promise<number | null>((resolve) => honest.on("close", (code) => resolve(code)));
    const m = await master.done;
    assert.equal(m.code, 0, master.output());
    assert.equal(await honestDone, 0, wout);
    assert.equal(readFileSync(log, "utf8"), "double-child\n\nhonest-child\n", "the seed ran once (by the double), the others once each");
    assert.deepEqual(e.corpusFiles().sort(), [sha256(seed), sha256(child), sha256("honest-child")].sort(), "only verified children reached the corpus");
    const s = e.stats();
    assert.equal(s.observations, 3);
    assert.equal(s.invalid_results, 0, "refused files are not results");
    assert.match(master.output(), /worker double#1: files of task \d+ refused: [0-9a-f]{64} came with SHA-256/);
  } finally {
    e.cleanup();
  }
});
