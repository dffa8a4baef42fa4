// WorkerLoop, the driver of the worker's PullLoop, over a real socket on 127.0.0.1 against a
// scripted coordinator, with a unit runner double whose runs end when the test or an abort says
// so. It checks what only the driver does: children aborted and waited for (woken by their
// reports, not a poll), scratch cleaned before the stop_ack, the exit code of each ending.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import { after, test } from "node:test";
import { Connection, dial } from "../../src/net/connection.ts";
import type { CoordinatorReplyT, Frame, TaskItemT, WelcomeFrame } from "../../src/net/messages.ts";
import { WorkerLoop, type UnitRunner } from "../../src/worker/loop.ts";

const TEST = { timeout: 30_000 };
const STOP = "3".repeat(32);
const servers: Server[] = [];
after(() => {
  for (const s of servers) s.close();
});

const welcome: WelcomeFrame = { type: "welcome", worker_id: 1, session: 1, mode: "explore", lease_seconds: 2, heartbeat_seconds: 0.2, generation: 0, explore: null };
const task = (id: number): TaskItemT => ({ task_id: id, hash: String(id).padStart(64, "0"), fence: `f${id}`, timeout: 5 });
const result = (t: TaskItemT, protocolError: "" | "interrupted"): Frame => ({
  type: "result",
  task_id: t.task_id,
  fence: t.fence,
  input_hash: t.hash,
  new_hashes: [],
  num_generated: 0,
  staged_bytes: 0,
  staging_id: "",
  retcode: protocolError ? null : 0,
  elapsed: 0.1,
  protocol_error: protocolError,
  budget: null,
  detail: null,
});

/** Runs that end when aborted (as interrupted) and record what happened to them, in order. */
class RunnerDouble implements UnitRunner<TaskItemT> {
  readonly events: string[] = [];
  unitsFrom(reply: CoordinatorReplyT): TaskItemT[] | null {
    return reply.type === "task" ? reply.tasks : null;
  }
  id(t: TaskItemT): number {
    return t.task_id;
  }
  started(t: TaskItemT): string {
    this.events.push(`run ${t.task_id}`);
    return `  task ${t.task_id}`;
  }
  run(t: TaskItemT, signal: AbortSignal): Promise<Frame> {
    return new Promise((resolve) =>
      signal.addEventListener("abort", () => {
        this.events.push(`abort ${t.task_id}`);
        // A child takes a moment to end after its TERM.
        setTimeout(() => resolve(result(t, "interrupted")), 50);
      }),
    );
  }
  finished(t: TaskItemT, _report: Frame, note: string): string {
    this.events.push(`reported ${t.task_id} (${note})`);
    return `  task ${t.task_id} (${note})`;
  }
  cleanup(t: TaskItemT): void {
    this.events.push(`cleanup ${t.task_id}`);
  }
}

/**
 * A coordinator that answers each frame with `answer(frame)` (null: close the connection), and
 * records every frame it got; returns the worker's end of the connection.
 */
async function coordinator(answer: (f: { type: string; [k: string]: unknown }) => Frame | null) {
  const got: { type: string; [k: string]: unknown }[] = [];
  const server = createServer((socket) => {
    const conn = new Connection(socket);
    void (async () => {
      for (;;) {
        let f: { type: string; [k: string]: unknown };
        try {
          f = (await conn.receiveRaw(20_000)) as typeof f;
        } catch {
          return;
        }
        got.push(f);
        const reply = answer(f);
        if (reply === null) return conn.destroy();
        conn.send(reply);
      }
    })();
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const conn = await dial("127.0.0.1", (server.address() as { port: number }).port, 5000);
  return { conn, got };
}

const ack = (note: string | null = null): Frame => ({ type: "ack", drain: false, known: null, note });

test("a stop while a unit runs: the child is aborted and waited for, reported, cleaned, and only then the exact stop_ack; exit 0", TEST, async () => {
  let beats = 0;
  const { conn, got } = await coordinator((f) => {
    if (f.type === "want") return beats === 0 ? { type: "task", tasks: [task(7)] } : { type: "wait", seconds: 1 };
    if (f.type === "heartbeat") return ++beats >= 2 ? { type: "stop", token: STOP } : ack();
    if (f.type === "result") return ack("requeued");
    if (f.type === "stop_ack") return { type: "bye", reason: "stopped" };
    return { type: "refuse", reason: `unexpected ${f.type}` };
  });
  const runner = new RunnerDouble();
  const log: string[] = [];
  const code = await new WorkerLoop(conn, welcome, runner, { slots: 1, signal: new AbortController().signal, log: (l) => log.push(l) }).run();
  assert.equal(code, 0);
  assert.deepEqual(runner.events, ["run 7", "abort 7", "reported 7 (requeued)", "cleanup 7"]);
  assert.deepEqual(
    got.map((f) => f.type),
    ["want", "heartbeat", "heartbeat", "result", "stop_ack"],
  );
  assert.deepEqual(got.at(-2), { ...result(task(7), "interrupted") });
  assert.deepEqual(got.at(-1), { type: "stop_ack", token: STOP });
  assert.ok(log.includes("  the master asked me to stop") && log.at(-1) === "  stop acknowledged");
  conn.destroy();
});

test("a coordinator that goes away: the running child is ended and waited for, nothing more is sent; exit 4", TEST, async () => {
  const { conn, got } = await coordinator((f) => (f.type === "want" ? { type: "task", tasks: [task(3)] } : null));
  const runner = new RunnerDouble();
  const log: string[] = [];
  const code = await new WorkerLoop(conn, welcome, runner, { slots: 1, signal: new AbortController().signal, log: (l) => log.push(l) }).run();
  assert.equal(code, 4);
  assert.deepEqual(runner.events, ["run 3", "abort 3"]);
  assert.deepEqual(
    got.map((f) => f.type),
    ["want", "heartbeat"],
  );
  assert.match(log.find((l) => l.startsWith("worker: lost")) ?? "", /^worker: lost the master \(.+\)$/);
});

test("Ctrl-C: the child is aborted, its report is sent, then bye; exit 0", TEST, async () => {
  const controller = new AbortController();
  const { conn, got } = await coordinator((f) => {
    if (f.type === "want") {
      setImmediate(() => controller.abort());
      return { type: "task", tasks: [task(5)] };
    }
    if (f.type === "result") return ack("requeued");
    if (f.type === "bye") return { type: "bye", reason: "goodbye" };
    return ack();
  });
  const runner = new RunnerDouble();
  const code = await new WorkerLoop(conn, welcome, runner, { slots: 1, signal: controller.signal, log: () => {} }).run();
  assert.equal(code, 0);
  assert.deepEqual(runner.events, ["run 5", "abort 5", "reported 5 (requeued)"]);
  assert.deepEqual(got.filter((f) => f.type !== "heartbeat").map((f) => f.type), ["want", "result", "bye"]);
  conn.destroy();
});

test("a unit's one line: what it was, then how it ended, its name said once", async () => {
  const { oneLine } = await import("../../src/worker/loop.ts");
  assert.equal(oneLine("  chunk 7: small seeds 1..60 (60)", "  chunk 7 complete (rc 0) in 1s (recorded)"), "  chunk 7: small seeds 1..60 (60) — complete (rc 0) in 1s (recorded)");
  assert.equal(oneLine("  task 3: 0123456789ab", "  task 3 2 child(ren), rc 0 in 0s (recorded)"), "  task 3: 0123456789ab — 2 child(ren), rc 0 in 0s (recorded)");
  assert.equal(oneLine("  chunk 7: x", "  chunk 70 complete"), "  chunk 7: x — chunk 70 complete", "another unit's name is not taken for this one's");
  assert.equal(oneLine("no colon", "  done"), "no colon — done");
});
