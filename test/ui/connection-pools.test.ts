// The dashboard's two connection pools, seen from raw sockets against `fuzzfleet ui` on loopback
// (where every request with a loopback Host is authorized): a full unauthenticated pool makes
// room by closing its oldest connection, a full authenticated pool by closing its oldest idle
// one — never an event stream — so a newcomer is always served.
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { Campaign } from "../helpers/campaign.ts";
import { serve, type Served } from "./serve.ts";

interface Conn {
  socket: Socket;
  received: () => string;
  closed: Promise<void>;
  isClosed: () => boolean;
}

function open(url: string): Promise<Conn> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let received = "";
    let gone = false;
    socket.setEncoding("latin1").on("data", (d: string) => (received += d));
    socket.on("error", () => {});
    const closed = new Promise<void>((r) => socket.on("close", () => ((gone = true), r())));
    socket.once("connect", () => resolve({ socket, received: () => received, closed, isClosed: () => gone }));
    socket.once("error", reject);
  });
}

/** Sends one keep-alive GET on `c` and waits for its status line (the whole head, for a stream). */
async function ask(c: Conn, url: string, path: string): Promise<string> {
  const { host } = new URL(url);
  const before = c.received().length;
  c.socket.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  for (const end = Date.now() + 10_000; ; await new Promise((r) => setTimeout(r, 10))) {
    const m = /^HTTP\/1\.1 (\d{3})/.exec(c.received().slice(before));
    if (m && c.received().includes("\r\n\r\n", before)) return m[1]!;
    assert.ok(Date.now() < end && !c.isClosed(), `no answer to ${path}: ${JSON.stringify(c.received().slice(before))}`);
  }
}

describe("the dashboard's connection pools", () => {
  const c = new Campaign({ costMs: 0.5 });
  let ui: Served;
  const conns: Conn[] = [];
  before(async () => {
    const r = c.cli(["run", "--for", "4s"]);
    assert.ok(r.code === 0 || r.code === 1, `${r.stdout}\n${r.stderr}`);
    ui = await serve(c, ["ui", "--listen", "127.0.0.1:0"], /^dashboard \(read-only\): (http:\/\/127\.0\.0\.1:\d+\/)/m);
  });
  after(async () => {
    for (const k of conns) k.socket.destroy();
    ui?.child.kill("SIGINT");
    await ui?.done;
    c.cleanup();
  });

  test("1,024 connections that sent nothing (two turns of accepts at the listen backlog): a 1,025th closes the oldest of them and is served", async () => {
    const silent: Conn[] = [];
    for (let i = 0; i < 1024; i++) silent.push(await open(ui.url));
    conns.push(...silent);
    const late = await open(ui.url);
    conns.push(late);
    await silent[0]!.closed;
    assert.equal(await ask(late, ui.url, "/metrics"), "200");
    assert.deepEqual(silent.slice(1).filter((k) => k.isClosed()).length, 0, "only the oldest was closed");
    // Gone before the next test counts the authenticated pool (the server sees the resets before any later request).
    for (const k of [...silent, late]) k.socket.destroy();
  });

  test("16 event streams and 32 idle authenticated connections: a newcomer closes the oldest idle one, never a stream", async () => {
    const streams: Conn[] = [];
    for (let i = 0; i < 16; i++) {
      const k = await open(ui.url);
      streams.push(k);
      assert.equal(await ask(k, ui.url, "/events"), "200", `stream ${i + 1}`);
    }
    const idle: Conn[] = [];
    for (let i = 0; i < 32; i++) {
      const k = await open(ui.url);
      idle.push(k);
      assert.equal(await ask(k, ui.url, "/metrics"), "200", `idle connection ${i + 1}`);
    }
    conns.push(...streams, ...idle);
    const late = await open(ui.url);
    conns.push(late);
    assert.equal(await ask(late, ui.url, "/snapshot.json"), "200", "the 49th authenticated connection is served");
    await idle[0]!.closed;
    assert.equal(streams.filter((k) => k.isClosed()).length, 0, "no stream was closed");
    assert.equal(idle.slice(1).filter((k) => k.isClosed()).length, 0, "only the oldest idle connection was closed");
    const extra = await open(ui.url);
    conns.push(extra);
    assert.equal(await ask(extra, ui.url, "/events"), "503", "a 17th stream");
  });
});
