// Where the campaign token comes from, and who may create it.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { clientToken, serverToken, tokensEqual, tokenPath } from "../../src/net/token.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-token-"));
after(() => rmSync(root, { recursive: true, force: true }));

test("a server creates the token file once, mode 0600, and reuses it", () => {
  const out = join(root, "a");
  const first = serverToken({ outDir: out, env: {} });
  assert.match(first.token, /^[0-9a-f]{32}$/);
  assert.equal(statSync(tokenPath(out)).mode & 0o777, 0o600);
  assert.equal(serverToken({ outDir: out, env: {} }).token, first.token);
  assert.equal(clientToken({ outDir: out, env: {} }), first.token);
});

test("--token beats FUZZFLEET_TOKEN beats the file; neither creates the file", () => {
  const out = join(root, "b");
  assert.equal(serverToken({ flag: "flag-token-1", outDir: out, env: { FUZZFLEET_TOKEN: "env-token-1" } }).token, "flag-token-1");
  assert.equal(serverToken({ outDir: out, env: { FUZZFLEET_TOKEN: " env-token-1 \n" } }).token, "env-token-1");
  assert.throws(() => readFileSync(tokenPath(out)));
});

test("a client never creates a token and says where it looked", () => {
  assert.throws(() => clientToken({ outDir: join(root, "c"), env: {} }), /no campaign token: .*fuzzfleet\.token/);
  writeFileSync(join(root, "bad.token"), "x");
});

test("tokens compare in constant time and exactly", () => {
  assert.ok(tokensEqual("abcdefgh", "abcdefgh"));
  assert.ok(!tokensEqual("abcdefgh", "abcdefgi"));
  assert.ok(!tokensEqual("abcdefgh", "abcdefgh "));
});
