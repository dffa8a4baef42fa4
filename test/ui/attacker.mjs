#!/usr/bin/env node
// An attacker without the dashboard's credential, in its own process so that its work does not
// slow the client being measured: `node test/ui/attacker.mjs --url http://127.0.0.1:PORT/
// --slow 60 --sse 2000`.
//   --slow N  N slowloris sockets: each sends a request line, then one header line every 2 s and
//             never ends its headers; a socket the server closes is opened again.
//   --sse M   M Server-Sent-Event attempts: each asks for /events with no credential and holds the
//             connection open; a connection the server closes is opened again.
//   --reopen-ms T  how long a closed socket waits before it is opened again (default 0: at once).
// Prints `ready` once every socket was opened once, `slow-closed` when the server first closes a
// slow socket; on SIGTERM prints one JSON line with what
// the server did to it (closes, the slow sockets' lifetimes, answers by status) and exits 0.
import { connect } from "node:net";
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { url: { type: "string" }, slow: { type: "string", default: "60" }, sse: { type: "string", default: "2000" }, "reopen-ms": { type: "string", default: "0" } } });
const url = new URL(values.url);
const port = Number(url.port);
const host = url.hostname;
const slowCount = Number(values.slow);
const sseCount = Number(values.sse);
const reopenMs = Number(values["reopen-ms"]);

const stats = { slowOpened: 0, slowClosed: 0, slowLifetimesMs: [], sseOpened: 0, sseClosed: 0, status: {}, errors: {} };
let stopping = false;
const sockets = new Set();

function count(map, key) {
  map[key] = (map[key] ?? 0) + 1;
}

function open(kind, onOpen) {
  if (stopping) return;
  const socket = connect({ host, port });
  sockets.add(socket);
  const at = performance.now();
  let timer = null;
  let opened = false;
  socket.on("connect", () => {
    opened = true;
    onOpen?.();
    if (kind === "slow") {
      stats.slowOpened++;
      socket.write(`GET / HTTP/1.1\r\nHost: ${host}:${port}\r\n`);
      let n = 0;
      timer = setInterval(() => socket.write(`X-Slow-${n++}: ${"a".repeat(20)}\r\n`), 2000);
    } else {
      stats.sseOpened++;
      socket.write(`GET /events HTTP/1.1\r\nHost: ${host}:${port}\r\nAccept: text/event-stream\r\n\r\n`);
    }
  });
  let head = "";
  socket.on("data", (d) => {
    if (head.length < 16) {
      head += d.toString("latin1");
      const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
      if (m) count(stats.status, `${kind} ${m[1]}`);
    }
  });
  socket.on("error", (err) => count(stats.errors, err.code ?? err.message));
  socket.on("close", () => {
    sockets.delete(socket);
    clearInterval(timer);
    if (kind === "slow" && opened) {
      // The first one closed is said at once, so that a test can wait on it.
      if (stats.slowClosed++ === 0) process.stdout.write("slow-closed\n");
      stats.slowLifetimesMs.push(Math.round(performance.now() - at));
    } else if (opened) stats.sseClosed++;
    if (!opened) onOpen?.();
    if (reopenMs > 0) setTimeout(() => open(kind), reopenMs);
    else setImmediate(() => open(kind));
  });
}

let pending = slowCount + sseCount;
const opened = () => {
  if (--pending === 0) process.stdout.write("ready\n");
};
for (let i = 0; i < slowCount; i++) open("slow", opened);
for (let i = 0; i < sseCount; i++) open("sse", opened);
if (pending === 0) process.stdout.write("ready\n");

process.on("SIGTERM", () => {
  stopping = true;
  for (const s of sockets) s.destroy();
  process.stdout.write(JSON.stringify(stats) + "\n", () => process.exit(0));
});
