// The framed connection's memory bounds, over real sockets on 127.0.0.1: it reads no further
// ahead than its receives, large bodies wait for the shared ReadBudget, a peer that leaves our
// replies unread is not read from, and the first-frame cap is raised only by authenticated().
// A peer that goes away and a peer that stays silent are errors of their own, not protocol errors.
import assert from "node:assert/strict";
import { createServer, connect, type Server, type Socket } from "node:net";
import { after, test } from "node:test";
import { FrameTimeout as FrameTimeoutError, PeerClosed, ProtocolError } from "../../src/errors.ts";
import { exitCodeFor } from "../../src/exit-codes.ts";
import { Connection, FrameTimeout, ReadBudget, UNRESERVED_BODY_BYTES, WRITE_BACKLOG_BYTES } from "../../src/net/connection.ts";
import { encodeFrame, FIRST_FRAME_BYTES, MAX_FRAME_BYTES } from "../../src/net/frame.ts";
import type { Frame } from "../../src/net/messages.ts";

const servers: Server[] = [];
after(() => {
  for (const s of servers) s.close();
});

/** A listening server and a way to take its next accepted socket, and a client dialling it. */
async function socketPair(): Promise<{ server: Socket; client: Socket }> {
  let accepted!: (s: Socket) => void;
  const got = new Promise<Socket>((r) => (accepted = r));
  const srv = createServer({ pauseOnConnect: true }, (s) => accepted(s));
  servers.push(srv);
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  const client = connect({ host: "127.0.0.1", port });
  client.on("error", () => undefined);
  await new Promise<void>((r) => client.once("connect", () => r()));
  return { server: await got, client };
}

const frame = (obj: Record<string, unknown>) => encodeFrame(obj as { type: string });
const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, probe: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await settle(20);
  }
}

test("a connection reads no further than one frame ahead of its receives; every frame still arrives in order", async () => {
  const { server, client } = await socketPair();
  const conn = new Connection(server);
  const count = 8000;
  const pad = "p".repeat(1000);
  const stream = Buffer.concat(Array.from({ length: count }, (_, i) => frame({ type: "want", i, pad })));
  client.write(stream);
  assert.deepEqual(await conn.receiveRaw(5000), { type: "want", i: 0, pad });
  await settle(300);
  const total = stream.length;
  assert.ok(server.bytesRead < 4 * UNRESERVED_BODY_BYTES, `read ${server.bytesRead} of ${total} bytes while nobody asked for more`);
  for (let i = 1; i < count; i++) assert.equal(((await conn.receiveRaw(5000)) as { i: number }).i, i);
  assert.equal(server.bytesRead, total);
  client.destroy();
});

test("large bodies wait for the shared budget instead of failing, and are read once an earlier frame is taken", async () => {
  const budget = new ReadBudget(MAX_FRAME_BYTES);
  const big = (who: string) => frame({ type: "result", who, pad: "r".repeat(3 << 20) });
  const a = await socketPair();
  const connA = new Connection(a.server, { budget });
  a.client.write(big("a"));
  await until("a's frame to be read", () => a.server.bytesRead === big("a").length);
  assert.equal(budget.reservedBytes > 3 << 20, true, "a's body holds its reservation until it is taken");

  const b = await socketPair();
  const connB = new Connection(b.server, { budget });
  b.client.write(big("b"));
  await settle(300);
  assert.ok(b.server.bytesRead < 4 * UNRESERVED_BODY_BYTES, `b read ${b.server.bytesRead} bytes without a reservation`);
  assert.equal(((await connA.receiveRaw(5000)) as { who: string }).who, "a");
  const fromB = (await connB.receiveRaw(10_000)) as { who: string; pad: string };
  assert.equal(fromB.who, "b");
  assert.equal(fromB.pad.length, 3 << 20);
  assert.equal(budget.reservedBytes, 0, "every reservation was released");
  a.client.destroy();
  b.client.destroy();
});

test("ReadBudget grants all-or-nothing in arrival order, and a cancelled wait gives way", () => {
  const budget = new ReadBudget(MAX_FRAME_BYTES);
  const granted: string[] = [];
  assert.equal(budget.reserve(3 << 20, () => granted.push("first")), null, "granted at once");
  const cancelSecond = budget.reserve(2 << 20, () => granted.push("second"));
  assert.ok(cancelSecond, "queued: 3 + 2 MiB is over 4");
  const third = budget.reserve(1 << 10, () => granted.push("third"));
  assert.ok(third, "queued behind the second, although it would fit: no overtaking");
  cancelSecond();
  assert.deepEqual(granted, ["third"], "the cancelled wait gave way");
  budget.release(3 << 20);
  assert.equal(budget.reservedBytes, 1 << 10);
  budget.release(1 << 10);
  assert.throws(() => budget.release(1), /more than it reserved/);
  assert.throws(() => new ReadBudget(MAX_FRAME_BYTES - 1), /cannot hold one/);
});

test("a peer that leaves our replies unread is not read from until it catches up", async () => {
  const { server, client } = await socketPair();
  client.pause();
  const conn = new Connection(server);
  const reply: Frame = { type: "text", text: "t".repeat(1 << 20) };
  // Enough to fill the kernel's buffers and leave more than WRITE_BACKLOG_BYTES in ours.
  while (server.writableLength <= 2 * WRITE_BACKLOG_BYTES) conn.send(reply);
  const requests = Buffer.concat(Array.from({ length: 4000 }, (_, i) => frame({ type: "want", i, pad: "w".repeat(1000) })));
  client.write(requests);
  await assert.rejects(conn.receiveRaw(500), FrameTimeout, "no request is taken while our replies pile up");
  assert.ok(server.bytesRead < 4 * UNRESERVED_BODY_BYTES, `read ${server.bytesRead} of ${requests.length} bytes`);
  client.resume();
  assert.equal(((await conn.receiveRaw(10_000)) as { i: number }).i, 0);
  client.destroy();
});

test("a server connection caps frames at FIRST_FRAME_BYTES until authenticated(), even frames already buffered", async () => {
  const first = await socketPair();
  const capped = new Connection(first.server, { firstFrameBytes: FIRST_FRAME_BYTES });
  const large = frame({ type: "prove", pad: "x".repeat(100_000) });
  first.client.write(Buffer.concat([frame({ type: "hello", n: 1 }), large]));
  assert.deepEqual(await capped.receiveRaw(5000), { type: "hello", n: 1 });
  capped.authenticated();
  assert.equal(((await capped.receiveRaw(5000)) as { pad: string }).pad.length, 100_000);

  const second = await socketPair();
  const refused = new Connection(second.server, { firstFrameBytes: FIRST_FRAME_BYTES });
  second.client.write(Buffer.concat([frame({ type: "hello", n: 1 }), large]));
  assert.deepEqual(await refused.receiveRaw(5000), { type: "hello", n: 1 });
  await assert.rejects(refused.receiveRaw(5000), /over the 8192-byte cap of a first frame/);
  first.client.destroy();
  second.client.destroy();
});

test("a peer that closes is PeerClosed and a silent one FrameTimeout: neither is a protocol error, both exit 4", async () => {
  const { server, client } = await socketPair();
  const conn = new Connection(server);
  assert.equal(FrameTimeout, FrameTimeoutError, "the connection throws the one class of src/errors.ts");
  const silent = await conn.receiveRaw(50).then(
    () => assert.fail("no frame was sent"),
    (err: unknown) => err,
  );
  assert.ok(silent instanceof FrameTimeout && !(silent instanceof ProtocolError));
  assert.equal(silent.code, "frame-timeout");
  client.end();
  const closed = await conn.receiveRaw(5000).then(
    () => assert.fail("the peer sent nothing"),
    (err: unknown) => err,
  );
  assert.ok(closed instanceof PeerClosed && !(closed instanceof ProtocolError));
  assert.equal(closed.code, "peer-closed");
  assert.deepEqual([exitCodeFor(silent.code), exitCodeFor(closed.code)], [4, 4]);
  server.destroy();
});
