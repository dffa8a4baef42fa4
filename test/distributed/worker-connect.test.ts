// The worker's dial-with-wait: bounded retries that leave no listener behind, and host names that
// do not resolve. Name resolution goes through the lookup seam: a test must not ask a real name
// server, and every socket here is on 127.0.0.1.
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { createServer, type AddressInfo, type Server } from "node:net";
import { test } from "node:test";
import { RuntimeFailure } from "../../src/errors.ts";
import { checkHostName, connectWithWait, type HostLookup } from "../../src/net/dial-wait.ts";
import { freePort } from "../helpers/campaign.ts";

function listen(): Promise<Server> {
  return new Promise((resolve) => {
    const server = createServer((socket) => socket.end());
    server.listen(0, "127.0.0.1", () => resolve(server));
  });
}

function failingLookup(code: string, calls: string[]): HostLookup {
  return async (host) => {
    calls.push(host);
    throw Object.assign(new Error(`getaddrinfo ${code} ${host}`), { code });
  };
}

test("retrying a closed port leaves no abort listener behind, and the wait ends with the address and the reason", { timeout: 60_000 }, async () => {
  const port = await freePort();
  const controller = new AbortController();
  const lines: string[] = [];
  const seen: number[] = [];
  const probe = setInterval(() => seen.push(getEventListeners(controller.signal, "abort").length), 50);
  try {
    await assert.rejects(
      connectWithWait({ host: "127.0.0.1", port, waitSeconds: 3.5, signal: controller.signal, log: (l) => lines.push(l) }),
      (err: Error) => err instanceof RuntimeFailure && err.message.startsWith(`cannot reach the coordinator at 127.0.0.1:${port} — `) && /ECONNREFUSED/.test(err.message),
    );
  } finally {
    clearInterval(probe);
  }
  assert.deepEqual(lines, [`waiting for the coordinator at 127.0.0.1:${port} (up to 3s) …`], "said once, over several retries");
  assert.ok(Math.max(...seen) <= 1, `at most one abort listener at a time (saw ${Math.max(...seen)})`);
  assert.equal(getEventListeners(controller.signal, "abort").length, 0);
});

test("a host name that does not resolve is refused at once, by name, without a retry", { timeout: 30_000 }, async () => {
  const calls: string[] = [];
  const lines: string[] = [];
  await assert.rejects(
    connectWithWait({ host: "nohost", port: 1, waitSeconds: 600, signal: new AbortController().signal, log: (l) => lines.push(l), lookup: failingLookup("ENOTFOUND", calls) }),
    (err: Error) =>
      err instanceof RuntimeFailure &&
      err.message === "cannot reach nohost:1: the host name 'nohost' does not resolve (getaddrinfo ENOTFOUND nohost); check its spelling, or give the master's IP address",
  );
  assert.deepEqual(calls, ["nohost"]);
  assert.deepEqual(lines, []);
  await assert.rejects(checkHostName("nohost", 1, failingLookup("ENOTFOUND", calls)), /the host name 'nohost' does not resolve/);
});

test("a name server that does not answer is retried with one line saying so, until the master is reachable", { timeout: 60_000 }, async () => {
  const server = await listen();
  const port = (server.address() as AddressInfo).port;
  const calls: string[] = [];
  const lines: string[] = [];
  let failures = 2;
  const flaky: HostLookup = async (host) => {
    calls.push(host);
    if (failures-- > 0) throw Object.assign(new Error(`getaddrinfo EAI_AGAIN ${host}`), { code: "EAI_AGAIN" });
  };
  try {
    // Not refused up front: a name server that is silent now may answer later.
    await checkHostName("master.example", port, failingLookup("EAI_AGAIN", []));
    // The dial itself resolves "localhost" through /etc/hosts, not a name server.
    const conn = await connectWithWait({ host: "localhost", port, waitSeconds: 30, signal: new AbortController().signal, log: (l) => lines.push(l), lookup: flaky });
    assert.ok(conn);
    conn.destroy();
  } finally {
    server.close();
  }
  assert.deepEqual(calls, ["localhost", "localhost", "localhost"]);
  assert.deepEqual(lines, ["the name server gives no answer for 'localhost' (EAI_AGAIN); retrying for up to 30s …"]);
});

test("Ctrl-C while waiting for the coordinator ends the wait with no connection", { timeout: 30_000 }, async () => {
  const port = await freePort();
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 1500);
  const conn = await connectWithWait({ host: "127.0.0.1", port, waitSeconds: 3600, signal: controller.signal, log: () => undefined });
  assert.equal(conn, null);
  assert.equal(getEventListeners(controller.signal, "abort").length, 0);
});
