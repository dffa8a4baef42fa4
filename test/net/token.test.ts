// Where the campaign token comes from, who may create it, and which tokens and files are refused.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { getEventListeners } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { RefusedError, UsageError } from "../../src/errors.ts";
import { awaitToken, clientToken, serverToken, tokensEqual, tokenPath } from "../../src/net/token.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-token-"));
after(() => rmSync(root, { recursive: true, force: true }));

let dirs = 0;
/** A fresh campaign directory that does not exist yet. */
const fresh = () => join(root, `d${++dirs}`);

/** A token file written the way a user would, then given the mode asked for. */
function tokenFile(dir: string, content: string, mode = 0o600): string {
  mkdirSync(dir, { recursive: true });
  const path = tokenPath(dir);
  writeFileSync(path, content);
  chmodSync(path, mode);
  return path;
}

test("a server creates the token file once, mode 0600, with nothing else left in the directory, and reuses it", () => {
  const out = fresh();
  const first = serverToken({ outDir: out, env: {} });
  assert.match(first.token, /^[0-9a-f]{32}$/);
  assert.deepEqual([first.source, first.file], [`${tokenPath(out)} (new)`, tokenPath(out)]);
  assert.equal(statSync(tokenPath(out)).mode & 0o777, 0o600);
  assert.equal(statSync(tokenPath(out)).nlink, 1, "the temporary name it was written under is gone");
  assert.deepEqual(readdirSync(out), ["fuzzfleet.token"]);
  assert.equal(readFileSync(tokenPath(out), "utf8"), first.token + "\n");
  assert.deepEqual(serverToken({ outDir: out, env: {} }), { token: first.token, source: tokenPath(out), file: tokenPath(out) });
  assert.equal(clientToken({ outDir: out, env: {} }), first.token);
});

test("the file is created 0600 exactly, whatever the umask", () => {
  for (const umask of [0o000, 0o022, 0o277]) {
    const out = fresh();
    const module = JSON.stringify(new URL("../../src/net/token.ts", import.meta.url).href);
    const script = `process.umask(${umask}); const { serverToken } = await import(${module}); serverToken({ outDir: ${JSON.stringify(out)}, env: {} });`;
    execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script]);
    assert.equal(statSync(tokenPath(out)).mode & 0o777, 0o600, `umask 0${umask.toString(8)}`);
  }
});

test("--token beats --token-file beats FUZZFLEET_TOKEN beats the campaign's file; none of them creates a file", () => {
  const out = fresh();
  const campaignFile = tokenFile(out, "campaign-file-token\n");
  const other = tokenFile(join(out, "elsewhere"), "explicit-file-token\n");
  const env = { FUZZFLEET_TOKEN: "environment-token" };
  assert.deepEqual(serverToken({ flag: "flag-token-1", outDir: out, env }), { token: "flag-token-1", source: "--token", file: null });
  assert.deepEqual(serverToken({ file: other, outDir: out, env }), { token: "explicit-file-token", source: other, file: other });
  assert.deepEqual(serverToken({ outDir: out, env }), { token: "environment-token", source: "FUZZFLEET_TOKEN", file: null });
  assert.equal(clientToken({ outDir: out, env: {} }), "campaign-file-token");
  assert.equal(readFileSync(campaignFile, "utf8"), "campaign-file-token\n");
  const empty = fresh();
  serverToken({ flag: "flag-token-1", outDir: empty, env: {} });
  serverToken({ outDir: empty, env: { FUZZFLEET_TOKEN: "environment-token" } });
  assert.throws(() => lstatSync(empty), /ENOENT/, "no file and not even the directory");
});

test("--token and --token-file together are refused", () => {
  assert.throws(() => clientToken({ flag: "flag-token-1", file: join(root, "x"), outDir: fresh(), env: {} }), (err: Error) => err instanceof UsageError && /--token and --token-file exclude each other/.test(err.message));
});

test("a --token-file is read by servers and clients alike, before the environment; one that is missing is refused and never created", () => {
  const mine = tokenFile(fresh(), "given-file-token\n");
  const out = fresh();
  for (const env of [{}, { FUZZFLEET_TOKEN: "environment-token" }]) {
    assert.deepEqual(serverToken({ file: mine, outDir: out, env }), { token: "given-file-token", source: mine, file: mine });
    assert.equal(clientToken({ file: mine, outDir: out, env }), "given-file-token");
  }
  const missing = join(root, "typo.token");
  assert.throws(
    () => serverToken({ file: missing, outDir: out, env: { FUZZFLEET_TOKEN: "environment-token" } }),
    (err: Error) =>
      err instanceof RefusedError &&
      err.message === `no campaign token: the token file ${missing} does not exist (a file given with --token-file is read, never created); check the path, or give the token in FUZZFLEET_TOKEN`,
  );
  assert.throws(
    () => clientToken({ file: missing, outDir: out, env: {} }),
    (err: Error) => err instanceof RefusedError && err.message === `no campaign token: the token file ${missing} does not exist; check the path, or give the token in FUZZFLEET_TOKEN`,
  );
  assert.throws(() => lstatSync(missing), /ENOENT/, "the server created nothing at the path");
  assert.throws(() => lstatSync(out), /ENOENT/, "nor the campaign's own file");
});

test("whitespace around a token is not part of it, in the flag, the environment and the file alike", () => {
  const out = fresh();
  tokenFile(out, "  file-token-1 \n\n");
  assert.equal(clientToken({ outDir: out, env: {} }), "file-token-1");
  assert.equal(clientToken({ outDir: out, env: { FUZZFLEET_TOKEN: " env-token-1 \n" } }), "env-token-1");
  assert.equal(clientToken({ flag: "\tflag-token-1 ", outDir: out, env: {} }), "flag-token-1");
});

test("an empty, blank, short, overlong or spaced token is refused from the flag and the environment, by servers and clients", () => {
  const bad: [string, RegExp][] = [
    ["", /is empty/],
    ["   \n", /is empty/],
    ["short", /has 5 characters/],
    ["x".repeat(257), /has 257 characters/],
    ["two words", /holds a space, a control or a non-ASCII character/],
    ["tab\tinside", /holds a space/],
    ["nul\0inside", /holds a space, a control/],
    ["naïve-token", /non-ASCII/],
  ];
  for (const [value, why] of bad) {
    for (const find of [serverToken, clientToken]) {
      const out = fresh();
      assert.throws(
        () => find({ flag: value, outDir: out, env: {} }),
        (err: Error) => err instanceof UsageError && err.message.startsWith("the token given with --token ") && why.test(err.message) && /8 to 256 visible ASCII characters/.test(err.message),
        `--token ${JSON.stringify(value)}`,
      );
      assert.throws(
        () => find({ outDir: out, env: { FUZZFLEET_TOKEN: value } }),
        (err: Error) => err instanceof UsageError && err.message.startsWith("FUZZFLEET_TOKEN ") && why.test(err.message) && err.message.includes(`unset it to use ${tokenPath(out)}`),
        `FUZZFLEET_TOKEN=${JSON.stringify(value)}`,
      );
      assert.throws(() => lstatSync(out), /ENOENT/, "a refused token creates nothing");
    }
  }
  assert.equal(clientToken({ flag: "x".repeat(256), outDir: fresh(), env: {} }), "x".repeat(256), "256 characters are the limit, not past it");
  assert.equal(clientToken({ flag: "12345678", outDir: fresh(), env: {} }), "12345678", "8 characters are enough");
});

test("an empty or short token file is refused, not replaced, by servers and clients", () => {
  for (const content of ["", "\n", "short\n", "with a space\n"]) {
    const out = fresh();
    const path = tokenFile(out, content);
    for (const find of [serverToken, clientToken]) {
      assert.throws(() => find({ outDir: out, env: {} }), (err: Error) => err instanceof RefusedError && err.message.startsWith(`the token in ${path} `) && /remove the file/.test(err.message));
    }
    assert.equal(readFileSync(path, "utf8"), content, "the file is left as it was");
  }
});

test("a token file reached through a symlink is refused, and a server never writes through one", () => {
  const out = fresh();
  mkdirSync(out);
  const real = tokenFile(join(out, "real"), "perfectly-good-token\n");
  symlinkSync(real, tokenPath(out));
  for (const find of [serverToken, clientToken]) {
    assert.throws(() => find({ outDir: out, env: {} }), (err: Error) => err instanceof RefusedError && err.message === `${tokenPath(out)} is a symbolic link; a token file is never followed through a link: replace it with the file itself`);
  }
  assert.throws(() => clientToken({ file: tokenPath(out), outDir: fresh(), env: {} }), /is a symbolic link/, "--token-file is no exception");

  const dangling = fresh();
  mkdirSync(dangling);
  const target = join(dangling, "planted-target");
  symlinkSync(target, tokenPath(dangling));
  assert.throws(() => serverToken({ outDir: dangling, env: {} }), /is a symbolic link/);
  assert.throws(() => lstatSync(target), /ENOENT/, "nothing was created at the link's target");
  assert.deepEqual(readdirSync(dangling), ["fuzzfleet.token"], "and no temporary file is left");
});

test("a token file open to other users is refused, naming its mode and the fix", () => {
  for (const mode of [0o644, 0o640, 0o604, 0o620, 0o602]) {
    const out = fresh();
    const path = tokenFile(out, "perfectly-good-token\n", mode);
    for (const find of [serverToken, clientToken]) {
      assert.throws(
        () => find({ outDir: out, env: {} }),
        (err: Error) => err instanceof RefusedError && err.message.includes(`${path} is open to other users (mode 0${mode.toString(8)})`) && err.message.includes(`chmod 600 ${path}`),
      );
    }
  }
  const out = fresh();
  tokenFile(out, "perfectly-good-token\n", 0o400);
  assert.equal(clientToken({ outDir: out, env: {} }), "perfectly-good-token", "read-only for its owner is fine");
});

test("a token file of another user is refused", () => {
  const out = fresh();
  const path = tokenFile(out, "perfectly-good-token\n");
  const mine = statSync(path).uid;
  assert.equal(clientToken({ outDir: out, env: {}, uid: mine }), "perfectly-good-token");
  for (const find of [serverToken, clientToken]) {
    assert.throws(
      () => find({ outDir: out, env: {}, uid: mine + 1 }),
      (err: Error) => err instanceof RefusedError && err.message.startsWith(`${path} belongs to uid ${mine}, not to this user (uid ${mine + 1})`),
    );
  }
});

test("an oversized file, a directory or a FIFO at the token's name is refused without reading it through", () => {
  const big = fresh();
  tokenFile(big, "x".repeat(64) + "\n".repeat(2000));
  assert.throws(() => clientToken({ outDir: big, env: {} }), /is longer than 1024 bytes/);
  const dir = fresh();
  mkdirSync(tokenPath(dir), { recursive: true });
  assert.throws(() => serverToken({ outDir: dir, env: {} }), /is not a regular file/);
  const fifo = fresh();
  mkdirSync(fifo);
  execFileSync("mkfifo", [tokenPath(fifo)]);
  assert.throws(() => clientToken({ outDir: fifo, env: {} }), /is not a regular file/, "and the open did not block on the FIFO");
});

test("a client never creates a token and says where it looked", () => {
  const out = fresh();
  assert.throws(() => clientToken({ outDir: out, env: {} }), (err: Error) => err instanceof RefusedError && err.message.includes(`no ${tokenPath(out)}`));
  assert.throws(() => lstatSync(out), /ENOENT/);
});

const quiet = { creator: "the test's server", fix: "start the server" };

test("a waiting client gets the token once a server writes the file, says so once, and leaves no abort listener", async () => {
  const out = fresh();
  const lines: string[] = [];
  const controller = new AbortController();
  setTimeout(() => serverToken({ outDir: out, env: {} }), 800);
  const found = await awaitToken({ outDir: out, env: {} }, { ...quiet, waitSeconds: 60, signal: controller.signal, log: (l) => lines.push(l) });
  assert.equal(found?.token, readFileSync(tokenPath(out), "utf8").trim());
  assert.equal(found?.file, tokenPath(out));
  assert.deepEqual(lines, [`no campaign token yet: waiting up to 1m00s for ${tokenPath(out)} (the test's server writes it when it starts) …`]);
  assert.equal(getEventListeners(controller.signal, "abort").length, 0);
});

test("a waiting client whose wait runs out gets one line naming the file and the fix", async () => {
  const out = fresh();
  const controller = new AbortController();
  const lines: string[] = [];
  await assert.rejects(
    awaitToken({ outDir: out, env: {} }, { ...quiet, waitSeconds: 1, signal: controller.signal, log: (l) => lines.push(l) }),
    (err: Error) => err instanceof RefusedError && err.message === `no campaign token: ${tokenPath(out)} did not appear within 1s (--wait); start the server`,
  );
  assert.equal(lines.length, 1);
  assert.equal(getEventListeners(controller.signal, "abort").length, 0);
});

test("a waiting client stops waiting when its signal aborts", { timeout: 30_000 }, async () => {
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 300);
  const found = await awaitToken({ outDir: fresh(), env: {} }, { ...quiet, waitSeconds: 3600, signal: controller.signal, log: () => undefined });
  assert.equal(found, null);
});

test("a waiting client refuses a bad token at once instead of waiting it out", async () => {
  const out = fresh();
  tokenFile(out, "perfectly-good-token\n", 0o644);
  await assert.rejects(awaitToken({ outDir: out, env: {} }, { ...quiet, waitSeconds: 3600, signal: new AbortController().signal, log: () => undefined }), /open to other users/);
  await assert.rejects(awaitToken({ outDir: fresh(), env: { FUZZFLEET_TOKEN: "" } }, { ...quiet, waitSeconds: 3600, signal: new AbortController().signal, log: () => undefined }), /FUZZFLEET_TOKEN is empty/);
});

test("tokens compare in constant time and exactly", () => {
  assert.ok(tokensEqual("abcdefgh", "abcdefgh"));
  assert.ok(!tokensEqual("abcdefgh", "abcdefgi"));
  assert.ok(!tokensEqual("abcdefgh", "abcdefgh "));
});
