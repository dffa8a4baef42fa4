// Argument errors found by the parser speak like every other fuzzfleet error: "fuzzfleet: <message>"
// on stderr and exit 2 (docs/exit-codes.md), with the hint to --help.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { CLI } from "../helpers/campaign.ts";

function cli(args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8" });
}

test("an unknown command, an unknown option and a missing value are 'fuzzfleet: …' lines, exit 2", () => {
  for (const [args, message] of [
    [["frobnicate"], "fuzzfleet: unknown command 'frobnicate'"],
    [["status", "--bogus"], "fuzzfleet: unknown option '--bogus'"],
    [["run", "--for"], "fuzzfleet: option '--for <duration>' argument missing"],
  ] as const) {
    const r = cli([...args]);
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stderr.split("\n")[0], message);
    assert.match(r.stderr, /\(run with --help for usage\)/);
    assert.doesNotMatch(r.stderr, /^error:/m);
  }
});

test("--version prints the version alone and exits 0", () => {
  const r = cli(["--version"]);
  assert.equal(r.status, 0);
  assert.equal(r.stdout, "0.1.0\n");
  assert.equal(r.stderr, "");
});

test("explore's flags in seconds take durations like every other duration flag, and a bad one is named", () => {
  const bad = cli(["explore", "-i", "in", "-o", "out", "--max-idle", "soon", "--", "/bin/true"]);
  assert.equal(bad.status, 2, bad.stderr);
  assert.equal(bad.stderr.split("\n")[0], "fuzzfleet: --max-idle wants seconds >= 0 or a duration such as 45s, 2m or 1h30m (got 'soon')");
  const negative = cli(["explore", "-i", "in", "-o", "out", "-t", "-1s", "--", "/bin/true"]);
  assert.equal(negative.status, 2, negative.stderr);
  assert.match(negative.stderr, /^fuzzfleet: -t wants seconds >= 0\.001 or a duration/);
});
