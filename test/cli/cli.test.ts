// The command line as a user meets it: help, bad flags, the demo.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { EXIT } from "../../src/exit-codes.ts";
import { CLI } from "../helpers/campaign.ts";

const fuzzfleet = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", env: { ...process.env, ...env }, timeout: 120_000 });

test("--help explains the commands and the exit codes; every subcommand has help", () => {
  const r = fuzzfleet(["--help"]);
  assert.equal(r.status, 0);
  for (const cmd of ["init", "run", "status", "failures", "export", "resweep", "reset", "demo", "coordinate", "worker", "explore"]) {
    assert.match(r.stdout, new RegExp(`\\n  ${cmd} `));
    const sub = fuzzfleet([cmd, "--help"]);
    assert.equal(sub.status, 0, cmd);
    assert.match(sub.stdout, new RegExp(`Usage: fuzzfleet ${cmd}`));
  }
  assert.match(r.stdout, /Exit codes: 0 ok, 1 'run'\/'coordinate' recorded a newly distinct \(or reopened\) failure/);
  assert.match(r.stdout, /FUZZFLEET_SPAWN=node\|native +how generators and targets are started/);
});

test("an unknown flag, an unknown command and a bad number are usage errors (exit 2) that name the value", () => {
  const flag = fuzzfleet(["status", "--bogus"]);
  assert.equal(flag.status, 2);
  assert.match(flag.stderr, /unknown option '--bogus'/);
  const cmd = fuzzfleet(["sweep"]);
  assert.equal(cmd.status, 2);
  assert.match(cmd.stderr, /unknown command 'sweep'/);
  const num = fuzzfleet(["failures", "--lines", "many"]);
  assert.equal(num.status, 2);
  assert.match(num.stderr, /'many' is invalid/);
  const state = fuzzfleet(["failures", "--state", "closed"]);
  assert.equal(state.status, 2);
  assert.match(state.stderr, /Allowed choices are open, fixed, stale, all/);
});

test("a FUZZFLEET_SPAWN other than native or node is a usage error (exit 2) that names the value", () => {
  const r = fuzzfleet(["status"], { FUZZFLEET_SPAWN: "fork" });
  assert.equal(r.status, EXIT.usage);
  assert.match(r.stderr, /FUZZFLEET_SPAWN must be 'native' or 'node' \(got 'fork'\); unset it to let fuzzfleet choose/);
  const ok = fuzzfleet(["--version"], { FUZZFLEET_SPAWN: "node" });
  assert.equal(ok.status, 0, ok.stderr);
});

test("demo runs a real campaign in a fresh directory and ends with status and failures", () => {
  const root = mkdtempSync(join(tmpdir(), "fuzzfleet-demo-test-"));
  try {
    const dir = join(root, "demo");
    // A short budget for the demo's 6 s chunks (the deadline floor is 5 s).
    const r = fuzzfleet(["demo", "--for", "6s", "--dir", dir], { PLANTED_COST_MS: "0.2" });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /session 1 done/);
    assert.match(r.stdout, /\$ fuzzfleet --config .* status\n generation 1|\$ fuzzfleet --config .* status\ngeneration 1/);
    assert.match(r.stdout, /\$ fuzzfleet --config .* failures\n#\d+\s+\S+/);
    assert.ok(existsSync(join(dir, "fuzzfleet.db")));
    const again = fuzzfleet(["demo", "--dir", dir]);
    assert.equal(again.status, 3, "a used directory is refused");
    assert.match(again.stderr, /is not empty/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("run and coordinate --help give their exit codes from the one table: 4 when every lane got disabled, 70 lifecycle incomplete", () => {
  const run = fuzzfleet(["run", "--help"]);
  assert.equal(run.status, 0);
  assert.match(run.stdout, /4 runtime error, or every lane got disabled/);
  assert.match(run.stdout, /--for must be longer than that/);
  const coordinate = fuzzfleet(["coordinate", "--help"]);
  assert.equal(coordinate.status, 0);
  assert.match(coordinate.stdout, new RegExp(`\\n${EXIT.lifecycle} lifecycle incomplete \\(a worker did not acknowledge the stop`));
  assert.equal(EXIT.lifecycle, 70);
});
