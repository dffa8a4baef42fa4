// A sweep's generator never sees the campaign token: `run` started with FUZZFLEET_TOKEN (and the
// dashboard's scrape credential) in its environment hands the generator every variable but those.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Campaign } from "../helpers/campaign.ts";
import { envDumpingGenerator, seenEnvironments } from "../helpers/env-dump.ts";

const TOKEN = "sweep-secret-token-0123456789";

test("the generator of `run` gets the user's environment without the token variables", { timeout: 60_000 }, () => {
  const c = new Campaign();
  try {
    c.writeConfig({ generator: envDumpingGenerator(c) });
    const r = c.cli(["run", "--for", "4s"], { env: { FUZZFLEET_TOKEN: TOKEN, FUZZFLEET_SCRAPE_TOKEN: `scrape-${TOKEN}`, USER_MARK: "kept" } });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const envs = seenEnvironments(c);
    assert.ok(envs.length >= 1, "the generator ran");
    for (const env of envs) {
      assert.match(env, /^USER_MARK=kept$/m);
      assert.doesNotMatch(env, /FUZZFLEET_TOKEN|FUZZFLEET_SCRAPE_TOKEN/);
      assert.ok(!env.includes(TOKEN));
    }
  } finally {
    c.cleanup();
  }
});
