// A child never sees fuzzfleet's secrets: the environment a child is started with loses the
// campaign token (and every FUZZFLEET_…_TOKEN) whatever the caller passes, with either process
// starter; the user's own variables pass unchanged. And what is kept of a child's output can be
// redacted: whole occurrences of a secret, and a piece of one cut at the edge of a tail.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { nativeStarterProblem } from "../../src/exec/native-spawn.ts";
import { runChild } from "../../src/exec/run-child.ts";
import { childEnvironment, REDACTED, redactor, secretValues } from "../../src/exec/secrets.ts";
import { scratchDirs } from "../helpers/scratch.ts";

const { freshDir } = scratchDirs("child-env");
const TOKEN = "c0ffee-campaign-token-5ecret";
const SCRAPE = "scrape-credential-0123456789";

/** The NAME=value lines `env` printed into `log`, as a map. */
function printedEnv(log: string): Map<string, string> {
  return new Map(
    readFileSync(log, "utf8")
      .split("\n")
      .filter((l) => l.includes("="))
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
}

test("childEnvironment removes fuzzfleet's token variables and nothing of the user's", () => {
  const base = {
    PATH: "/usr/bin:/bin",
    FUZZFLEET_TOKEN: TOKEN,
    FUZZFLEET_SCRAPE_TOKEN: SCRAPE,
    FUZZFLEET_WORKER_TOKEN: "another-secret-of-ours",
    FUZZFLEET_SPAWN: "node",
    FUZZFLEET_JOB_ID: "77",
    GITHUB_TOKEN: "the-user-s-own",
    MY_TOKEN: "also-the-user-s",
  };
  const env = childEnvironment(base);
  assert.deepEqual(env, { PATH: "/usr/bin:/bin", FUZZFLEET_SPAWN: "node", FUZZFLEET_JOB_ID: "77", GITHUB_TOKEN: "the-user-s-own", MY_TOKEN: "also-the-user-s" });
  assert.equal(base.FUZZFLEET_TOKEN, TOKEN, "the caller's object is left as it was");
  const clean = { PATH: "/bin", HOME: "/root" };
  assert.equal(childEnvironment(clean), clean, "an environment without secrets is passed as it is, not copied");
  const frozen = Object.freeze({ ...base });
  const once = childEnvironment(frozen);
  assert.ok(Object.isFrozen(once) && once.FUZZFLEET_TOKEN === undefined && once.PATH === "/usr/bin:/bin");
  assert.equal(childEnvironment(frozen), once, "a frozen environment is cleaned once");
});

test("secretValues lists the token-length values of the secret variables only", () => {
  assert.deepEqual(secretValues({ FUZZFLEET_TOKEN: ` ${TOKEN}\n`, FUZZFLEET_SCRAPE_TOKEN: "short", GITHUB_TOKEN: "the-user-s-own", PATH: "/bin" }), [TOKEN]);
});

test("a redactor replaces every occurrence of a secret, and a piece of one at either edge of the text", () => {
  const redact = redactor([TOKEN, null, undefined, "", "tiny"]);
  assert.equal(redact(`FUZZFLEET_TOKEN=${TOKEN}\nagain ${TOKEN}${TOKEN}.`), `FUZZFLEET_TOKEN=${REDACTED}\nagain ${REDACTED}${REDACTED}.`);
  // A tail that begins in the middle of the token, and a text that ends in its beginning.
  assert.equal(redact(`${TOKEN.slice(9)}\nSegmentation fault`), `${REDACTED}\nSegmentation fault`);
  assert.equal(redact(`token is ${TOKEN.slice(0, 12)}`), `token is ${REDACTED}`);
  // Fewer than four characters of it are left alone: they match ordinary text by chance.
  assert.equal(redact(`${TOKEN.slice(-3)} ok`), `${TOKEN.slice(-3)} ok`);
  assert.equal(redact("tiny values are never secrets"), "tiny values are never secrets");
  assert.equal(redactor([])("unchanged " + TOKEN), "unchanged " + TOKEN);
  // A secret that contains another is replaced whole.
  assert.equal(redactor(["campaign-token", TOKEN])(`x ${TOKEN} y`), `x ${REDACTED} y`);
});

for (const starter of ["native", "node"] as const) {
  describe(`starter: ${starter}`, { skip: starter === "native" && nativeStarterProblem() !== null ? `native starter: ${nativeStarterProblem()}` : false }, () => {
    test("a child given an environment with the token sees every variable but the secret ones", async () => {
      const log = join(freshDir(), "env.log");
      const r = await runChild({
        argv: ["env"],
        env: { PATH: process.env.PATH, FUZZFLEET_TOKEN: TOKEN, FUZZFLEET_SCRAPE_TOKEN: SCRAPE, USER_MARK: "kept" },
        logPath: log,
        hardTimeoutMs: 30_000,
        starter,
      });
      assert.equal(r.outcome, "complete");
      assert.equal(r.exitCode, 0);
      const seen = printedEnv(log);
      assert.equal(seen.get("USER_MARK"), "kept");
      assert.equal(seen.get("PATH"), process.env.PATH);
      assert.equal(seen.has("FUZZFLEET_TOKEN"), false);
      assert.equal(seen.has("FUZZFLEET_SCRAPE_TOKEN"), false);
      assert.ok(!readFileSync(log, "utf8").includes(TOKEN) && !readFileSync(log, "utf8").includes(SCRAPE));
    });

    test("a child started with this process's environment does not inherit its token", async () => {
      const log = join(freshDir(), "env.log");
      const before = process.env.FUZZFLEET_TOKEN;
      process.env.FUZZFLEET_TOKEN = TOKEN;
      process.env.FUZZFLEET_TEST_USER_MARK = "inherited";
      try {
        const r = await runChild({ argv: ["env"], logPath: log, hardTimeoutMs: 30_000, starter });
        assert.equal(r.exitCode, 0);
      } finally {
        if (before === undefined) delete process.env.FUZZFLEET_TOKEN;
        else process.env.FUZZFLEET_TOKEN = before;
        delete process.env.FUZZFLEET_TEST_USER_MARK;
      }
      const seen = printedEnv(log);
      assert.equal(seen.get("FUZZFLEET_TEST_USER_MARK"), "inherited");
      assert.equal(seen.has("FUZZFLEET_TOKEN"), false);
      assert.ok(!readFileSync(log, "utf8").includes(TOKEN));
    });
  });
}
