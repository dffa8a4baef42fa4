// Test doubles that speak the wire directly: raw sockets for hostile bytes, and a scripted
// worker that handshakes properly and then does whatever the test wants.
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { Connection, dial } from "../../src/net/connection.ts";
import { HandshakeReply, PROTOCOL_VERSION, Welcome, Refuse, type Frame, type ProveFrame } from "../../src/net/messages.ts";
import { provenTarget } from "../../src/explore/state/target-identity.ts";
import { proveIdentity } from "../../src/config/identity.ts";
import { z } from "zod";

export function campaignToken(outDir: string): string {
  return readFileSync(join(outDir, "fuzzfleet.token"), "utf8").trim();
}

/** Sends raw bytes and returns everything the server sent back before it closed (bounded). */
export function rawExchange(port: number, bytes: Buffer | string, timeoutMs = 15_000): Promise<{ reply: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket: Socket = connect({ host: "127.0.0.1", port });
    let reply = "";
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ reply, closed: false });
    }, timeoutMs);
    socket.on("connect", () => socket.write(bytes));
    socket.on("data", (d) => (reply += d.toString("utf8")));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({ reply, closed: true });
    });
  });
}

export function frameBytes(obj: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(obj));
  return Buffer.concat([Buffer.from(`${body.length}\n`), body]);
}

/** A worker double: connects, proves the shared directory honestly, returns the open connection. */
export async function fakeWorker(
  port: number,
  token: string,
  host = "double",
): Promise<{ conn: Connection; workerId: number; stageRoot: string | null }> {
  const conn = await dial("127.0.0.1", port, 5000);
  const first = await conn.request({ type: "hello", token, protocol: PROTOCOL_VERSION, host, jobs: 1, slots: 1 }, HandshakeReply, 10_000);
  if (first.type !== "challenge") throw new Error(`expected a challenge, got ${JSON.stringify(first)}`);
  const prove: ProveFrame = proveIdentity(first);
  // An explore master checks the target build: the double runs where the master does.
  if (first.target) prove.target_build = provenTarget(first.target, true, process.cwd(), process.env.PATH).build;
  const welcome = await conn.request(prove, z.discriminatedUnion("type", [Welcome, Refuse]), 10_000);
  if (welcome.type !== "welcome") throw new Error(`refused: ${JSON.stringify(welcome)}`);
  return { conn, workerId: welcome.worker_id, stageRoot: welcome.explore?.stage_root ?? null };
}

export async function send(conn: Connection, frame: Frame): Promise<unknown> {
  conn.send(frame);
  return conn.receiveRaw(10_000);
}
