// The worker server's own rules, in-process on 127.0.0.1 with a campaign protocol double: the
// cap on connections awaiting authentication, a failing admit() or read service refuses with the
// error's message, a host name is printable before the campaign sees it, refusal lines are
// throttled with the suppressed count written when the log closes.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { performance } from "node:perf_hooks";
import { join } from "node:path";
import { after, test } from "node:test";
import type { Connection } from "../../src/net/connection.ts";
import type { HelloFrame } from "../../src/net/messages.ts";
import { MAX_AWAITING_AUTH, REFUSALS_SHOWN, WorkerServer, type AttachedWorker, type WorkProtocol } from "../../src/net/worker-server.ts";
import { scratchDirs } from "../helpers/scratch.ts";
import { fakeWorker, frameBytes, rawExchange } from "../helpers/wire.ts";

const TOKEN = "worker-server-test-token-0123456789";
const { scratch } = scratchDirs("worker-server");
const NONCE = { path: join(scratch, "nonce"), value: "n0nce" };
writeFileSync(NONCE.path, `${NONCE.value}\n`);

/** A campaign that admits nobody: admit() fails as a busy store would. */
class BusyCampaign implements WorkProtocol<AttachedWorker> {
  readonly campaign = "sweep" as const;
  readonly hellos: HelloFrame[] = [];
  closedToNewWorkers(): string | null {
    return null;
  }
  challenge() {
    return { identity: null, app_path: null };
  }
  checkProof(): string | null {
    return null;
  }
  async admit(_conn: Connection, hello: HelloFrame): Promise<AttachedWorker> {
    this.hellos.push(hello);
    throw new Error("the store is busy\x1b[2J (SQLITE_BUSY); retry in a minute");
  }
  welcome(): never {
    throw new Error("nobody is admitted");
  }
  handle(): never {
    throw new Error("nobody is admitted");
  }
  async detach(): Promise<void> {}
}

async function serverWith(read: { status: () => never; failures: () => never } | null = null) {
  const log: string[] = [];
  const protocol = new BusyCampaign();
  const fail = () => {
    throw new Error("database is locked\nREFUSED forged");
  };
  const server = new WorkerServer<AttachedWorker>({
    token: TOKEN,
    protocol,
    nonce: NONCE,
    read: read ?? { status: fail, failures: fail },
    leaseSeconds: 20,
    now: () => performance.now(),
    log: (line) => log.push(line),
  });
  const { port } = await server.listen("127.0.0.1", 0);
  after(() => server.close());
  return { server, port, log, protocol };
}

function silentConnection(port: number): Promise<Socket> {
  return new Promise((resolve) => {
    const s = connect({ host: "127.0.0.1", port });
    s.on("error", () => undefined);
    s.once("connect", () => resolve(s));
  });
}

test("an admit() that fails refuses the worker with the error's message, escaped; the campaign saw a printable host name", async () => {
  const { port, log, protocol } = await serverWith();
  // fakeWorker handshakes, and throws with the refusal when it gets one instead of a welcome.
  await assert.rejects(fakeWorker(port, TOKEN, "host\nREFUSED forged\x1b[H"), (err: Error) => {
    assert.match(err.message, /"reason":"the store is busy\\\\x1b\[2J \(SQLITE_BUSY\); retry in a minute"/);
    return true;
  });
  assert.deepEqual(protocol.hellos.map((h) => h.host), ["host\\x0aREFUSED forged\\x1b[H"]);
  assert.equal(log.length, 1);
  assert.match(log[0]!, /^REFUSED 127\.0\.0\.1:\d+ — the store is busy\\x1b\[2J \(SQLITE_BUSY\); retry in a minute$/);
});

test("a read request whose service fails is refused with the error's message, escaped", async () => {
  const { port, log } = await serverWith();
  const r = await rawExchange(port, frameBytes({ type: "status", token: TOKEN, json: false }));
  assert.ok(r.closed);
  assert.match(r.reply, /"type":"refuse","reason":"cannot answer 'status': database is locked\\\\x0aREFUSED forged"/);
  assert.match(log[0]!, /^REFUSED 127\.0\.0\.1:\d+ — cannot answer 'status': database is locked\\x0aREFUSED forged$/);
});

test("at most MAX_AWAITING_AUTH connections await authentication; the next is refused at accept, and a slot frees when one goes", async () => {
  const { server, port, log } = await serverWith();
  const waiting = await Promise.all(Array.from({ length: MAX_AWAITING_AUTH }, () => silentConnection(port)));
  const over = await rawExchange(port, frameBytes({ type: "status", token: TOKEN, json: false }));
  assert.match(over.reply, /"type":"refuse","reason":"64 connections are awaiting authentication already \(the limit\); try again in a few seconds"/);
  assert.equal(server.refusedAtAccept, 1);
  const again = await rawExchange(port, frameBytes({ type: "status", token: TOKEN, json: false }));
  assert.match(again.reply, /awaiting authentication already/);
  assert.equal(server.refusedAtAccept, 2);
  assert.equal(log.filter((l) => / at accept — /.test(l)).length, 1, "one line per window; the rest are counted");

  waiting[0]!.destroy();
  // The server learns of the close on its next turn; until then the slot is still taken.
  let admitted = await rawExchange(port, frameBytes({ type: "status", token: TOKEN, json: false }));
  for (let tries = 0; /awaiting authentication/.test(admitted.reply) && tries < 100; tries++) {
    admitted = await rawExchange(port, frameBytes({ type: "status", token: TOKEN, json: false }));
  }
  assert.match(admitted.reply, /cannot answer 'status'/, "a freed slot lets the next connection be read");
  for (const s of waiting) s.destroy();
  server.close();
  const counted = log.map((l) => /^REFUSED (\d+) more connection\(s\) at accept within 10s: 64 connections were awaiting authentication \(the limit\)$/.exec(l)?.[1]);
  assert.deepEqual(counted.filter(Boolean), [String(server.refusedAtAccept - 1)], "every other refusal at accept is counted when the log closes");
});

test("refusal lines are throttled: the first of a window are written, the rest counted in one line", async () => {
  const { server, port, log } = await serverWith();
  for (let i = 0; i < REFUSALS_SHOWN + 15; i++) await rawExchange(port, frameBytes({ type: "status", token: "not-it", json: false }));
  assert.equal(log.filter((l) => /— bad or missing token$/.test(l)).length, REFUSALS_SHOWN);
  assert.equal(log.length, REFUSALS_SHOWN, "the count waits for the window to close");
  server.close();
  assert.equal(log.at(-1), `REFUSED 15 more connection(s) within 10s, not logged one by one (the first ${REFUSALS_SHOWN} of every 10s are)`);
});
