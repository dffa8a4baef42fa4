// The worker service both serving commands share: listening and its errors (a real socket on
// 127.0.0.1 holding the port), the join banner, the nonce file, and the words for the stop.
import assert from "node:assert/strict";
import { linkSync, lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { createServer, type AddressInfo, type Server } from "node:net";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { RuntimeFailure } from "../../src/errors.ts";
import type { FoundToken } from "../../src/net/token.ts";
import { joinBanner, listenForWorkers, removeNonce, stopOutcomeWords, writeNonce, type Listener, type Listening } from "../../src/net/worker-service.ts";

const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-service-"));
const servers: Server[] = [];
after(() => {
  for (const s of servers) s.close();
  rmSync(dir, { recursive: true, force: true });
});

const FLAGS = { port: "--port", bind: "--bind" };

/** A real listener, as the worker server listens. */
function tcpListener(): Listener {
  return {
    listen: (bind, port) =>
      new Promise((resolve, reject) => {
        const server = createServer();
        servers.push(server);
        server.once("error", reject);
        server.listen({ host: bind, port, exclusive: true }, () => resolve(server.address() as AddressInfo));
      }),
  };
}

test("a port in use is refused with the address and the fix", async () => {
  const held = await tcpListener().listen("127.0.0.1", 0);
  await assert.rejects(listenForWorkers(tcpListener(), "127.0.0.1", held.port, FLAGS), (err: Error) => {
    assert.ok(err instanceof RuntimeFailure);
    assert.equal(
      err.message,
      `could not listen on 127.0.0.1:${held.port}: the port is in use (another coordinator or explore master, or another program); pass another --port, or 0 for a free one`,
    );
    return true;
  });
});

test("a bind address this host does not have, and a name that does not resolve, are named with the flag to change", async () => {
  // 192.0.2.1 is a documentation address no host has: the bind fails here, nothing is contacted.
  await assert.rejects(listenForWorkers(tcpListener(), "192.0.2.1", 0, { port: "--port", bind: "--bind (or [distributed] bind in the config)" }), {
    message: "could not listen on 192.0.2.1:0: 192.0.2.1 is not an address of this host; pass --bind (or [distributed] bind in the config) with one of its addresses",
  });
  await assert.rejects(listenForWorkers(tcpListener(), "no-such-host.invalid", 0, FLAGS), {
    message: "could not listen on no-such-host.invalid:0: the name 'no-such-host.invalid' does not resolve here; pass --bind with this host's address",
  });
});

test("a privileged port refused by the kernel names the rule and the fix", async () => {
  // These tests may run as root, which the kernel lets bind low ports: the refusal an unprivileged
  // user gets is given here as the kernel gives it.
  const denied: Listener = { listen: () => Promise.reject(Object.assign(new Error("listen EACCES: permission denied 127.0.0.1:80"), { code: "EACCES" })) };
  await assert.rejects(listenForWorkers(denied, "127.0.0.1", 80, FLAGS), {
    message: "could not listen on 127.0.0.1:80: permission denied (ports below 1024 need privileges); pass --port 1024 or above, or 0 for a free one",
  });
});

test("workers are told the --bind name when one was given, else the address bound", async () => {
  const byAddress = await listenForWorkers(tcpListener(), "127.0.0.1", 0, FLAGS);
  assert.deepEqual({ ...byAddress, port: 0 }, { address: "127.0.0.1", port: 0, shown: "127.0.0.1", boundByName: false });
  const byName = await listenForWorkers(tcpListener(), "localhost", 0, FLAGS);
  assert.equal(byName.shown, "localhost");
  assert.equal(byName.boundByName, true);
});

const fileToken: FoundToken = { token: "0123456789abcdef", source: "/c/.fuzzfleet/fuzzfleet.token (new)", file: "/c/.fuzzfleet/fuzzfleet.token" };
const at = (address: string, boundByName = false): Listening => ({ address, port: 7000, shown: boundByName ? "hostA" : address, boundByName });

test("the banner warns about a loopback address, with the host-name cause only when a name was bound", () => {
  const byName = joinBanner(at("127.0.1.1", true), { token: fileToken, tokenFileIsWorkersDefault: false, answersStatus: false, flags: FLAGS });
  assert.deepEqual(byName.listening, [
    `listening on 127.0.1.1:7000 (${hostname()})`,
    "!! that is a LOOPBACK address — workers on other hosts cannot reach it.",
    "   Pass --bind with this host's LAN address.",
    "   (Debian and Ubuntu map the host name to 127.0.1.1 in /etc/hosts: the usual cause.)",
    "token from /c/.fuzzfleet/fuzzfleet.token (new)",
  ]);
  assert.deepEqual(byName.commands, ["start workers:  fuzzfleet worker --master hostA:7000 --token-file /c/.fuzzfleet/fuzzfleet.token"]);
  const lan = joinBanner(at("10.0.0.5"), { token: fileToken, tokenFileIsWorkersDefault: false, answersStatus: false, flags: FLAGS });
  assert.deepEqual(lan.listening, [`listening on 10.0.0.5:7000 (${hostname()})`, "token from /c/.fuzzfleet/fuzzfleet.token (new)"]);
  assert.deepEqual(joinBanner(at("::1"), { token: fileToken, tokenFileIsWorkersDefault: false, answersStatus: false, flags: FLAGS }).listening.slice(1, 3), [
    "!! that is a LOOPBACK address — workers on other hosts cannot reach it.",
    "   Pass --bind with this host's LAN address.",
  ]);
});

test("the worker's command names the token file unless the worker reads it by itself, the secret only when --token gave it", () => {
  const b = { tokenFileIsWorkersDefault: true, workerNote: "-j: that host's cores by default", answersStatus: true, flags: FLAGS };
  assert.deepEqual(joinBanner(at("10.0.0.5"), { ...b, token: fileToken }).commands, [
    "start workers:  fuzzfleet worker --master 10.0.0.5:7000  (-j: that host's cores by default)",
    "watch it:       fuzzfleet status --master 10.0.0.5:7000",
  ]);
  const fromEnv: FoundToken = { token: "env-secret-0123", source: "FUZZFLEET_TOKEN", file: null };
  const env = joinBanner(at("10.0.0.5"), { token: fromEnv, tokenFileIsWorkersDefault: false, workerArgs: " -j 1", answersStatus: false, flags: FLAGS });
  assert.deepEqual(env.commands, ["start workers:  fuzzfleet worker --master 10.0.0.5:7000 -j 1  (with this master's FUZZFLEET_TOKEN in the environment)"]);
  assert.ok(!JSON.stringify(env).includes("env-secret-0123"), "the secret from the environment is not shown");
  const fromFlag: FoundToken = { token: "flag-secret-0123", source: "--token", file: null };
  assert.deepEqual(joinBanner(at("10.0.0.5"), { ...b, token: fromFlag, answersStatus: false }).commands, [
    "start workers:  fuzzfleet worker --master 10.0.0.5:7000 --token flag-secret-0123  (-j: that host's cores by default)",
  ]);
});

test("the stop's words: every worker acknowledged, or who did not within the grace and who left", () => {
  const base = { complete: false, settled: true, available: [] };
  assert.deepEqual(stopOutcomeWords({ ...base, complete: true, acked: ["a#1", "b#2"], pending: [], gone: [] }, 15), {
    summary: "all 2 worker(s) acknowledged the stop",
    problems: [],
  });
  assert.deepEqual(stopOutcomeWords({ ...base, acked: ["a#1"], pending: ["mute#2"], gone: [{ name: "liar#3", why: "wrong-token" }] }, 2.5), {
    summary: "1 of 3 worker(s) acknowledged the stop",
    problems: ["worker mute#2 did not acknowledge the stop within 2.5s", "worker liar#3 left before acknowledging the stop (wrong-token)"],
  });
  assert.deepEqual(stopOutcomeWords({ ...base, acked: [], pending: ["mute#1"], gone: [] }, 120), {
    summary: "0 of 1 worker(s) acknowledged the stop",
    problems: ["worker mute#1 did not acknowledge the stop within 2m00s"],
  });
  assert.deepEqual(stopOutcomeWords({ ...base, complete: true, acked: [], pending: [], gone: [] }, 15), { summary: null, problems: [] });
});

test("the nonce file is fresh, 0600, replaces a crashed run's leftover, and is never written through a link or opened on a FIFO", () => {
  const path = join(dir, "nonce-1");
  writeFileSync(path, "left by a crashed run, much longer than a nonce\n", { mode: 0o644 });
  const nonce = writeNonce(path);
  assert.match(nonce.value, /^[0-9a-f]{32}$/);
  assert.equal(readFileSync(path, "utf8"), nonce.value + "\n");
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.notEqual(writeNonce(path).value, nonce.value, "each run draws its own");
  removeNonce({ path, value: "" });
  assert.throws(() => lstatSync(path), { code: "ENOENT" });
  removeNonce(null);

  const target = join(dir, "elsewhere");
  writeFileSync(target, "not yours to overwrite\n");
  const link = join(dir, "nonce-2");
  symlinkSync(target, link);
  const viaLink = writeNonce(link);
  assert.ok(lstatSync(link).isFile(), "the symlink was replaced by the nonce file");
  assert.equal(readFileSync(link, "utf8"), viaLink.value + "\n");
  assert.equal(readFileSync(target, "utf8"), "not yours to overwrite\n");

  const hard = join(dir, "nonce-3");
  linkSync(target, hard);
  writeNonce(hard);
  assert.equal(readFileSync(target, "utf8"), "not yours to overwrite\n", "a hard link is replaced, not written through");

  const fifo = join(dir, "nonce-4");
  execFileSync("mkfifo", [fifo]);
  const viaFifo = writeNonce(fifo);
  assert.ok(lstatSync(fifo).isFile(), "the FIFO was replaced, never opened");
  assert.equal(readFileSync(fifo, "utf8"), viaFifo.value + "\n");
});
