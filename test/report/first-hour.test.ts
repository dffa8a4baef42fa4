// What a newcomer meets around `status` and `reset`: the real state of the campaign directory,
// never a hint that leads nowhere, and a lane that has not started told apart from a misspelt one.
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { spawnSync } from "node:child_process";
import { Campaign, CLI } from "../helpers/campaign.ts";

const c = new Campaign({ lanes: { small: 'base_seed = 1\nargs = ["--size", "small"]', large: 'base_seed = 1000000\nargs = ["--size", "large"]' } });
after(() => c.cleanup());

test("status in a directory with no config and no store says there is no campaign and how to start one (exit 2)", () => {
  const empty = mkdtempSync(join(tmpdir(), "fuzzfleet-empty-"));
  try {
    const r = spawnSync(process.execPath, [CLI, "status"], { cwd: empty, encoding: "utf8" });
    assert.equal(r.status, 2, r.stdout + r.stderr);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /^fuzzfleet: no campaign here: neither .*fuzzfleet\.toml nor .*fuzzfleet\.db exists\. 'fuzzfleet init' writes a config/);
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});

test("status with a config but no store yet says nothing was swept, and the hint works", () => {
  const r = c.cli(["status"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "no sweeps recorded yet — fuzzfleet run --for 30m\n");
});

test("after reset, status lists the configured lanes as not started; reset --lane tells not started from no such lane", () => {
  // Every planted bug fixed: the sweep finds nothing, so a run that ends at its deadline exits 0.
  const run = c.cli(["run", "--for", "4s", "--lane", "small"], { env: { PLANTED_FIX: "crash,hang-detected,wrong-result" } });
  assert.equal(run.code, 0, run.stderr);
  assert.equal(c.cli(["reset", "--yes"]).code, 0);
  const status = c.cli(["status"]);
  assert.equal(status.code, 0, status.stderr);
  assert.match(status.stdout, /^small +0 +1 +- +--size small   \(not started in this generation yet\)$/m);
  assert.match(status.stdout, /^large +0 +1,000,000 +- +--size large   \(not started in this generation yet\)$/m);
  const json = JSON.parse(c.cli(["status", "--json"]).stdout) as { lanes: { name: string; started: boolean; cursor: number }[] };
  assert.deepEqual(json.lanes.map((l) => [l.name, l.started, l.cursor]), [["small", false, 1], ["large", false, 1000000]]);

  const notStarted = c.cli(["reset", "--lane", "small", "--yes"]);
  assert.equal(notStarted.code, 0, notStarted.stderr);
  assert.match(notStarted.stdout, /lane 'small' has not started in generation 2 yet: the next run starts it at 1; nothing to reset/);
  const misspelt = c.cli(["reset", "--lane", "smal", "--yes"]);
  assert.equal(misspelt.code, 2);
  assert.match(misspelt.stderr, /fuzzfleet: no such lane 'smal' \(configured: small, large\)/);
});

test("a broken config does not hide the store's report: status warns with the config error and still reports (exit 0)", () => {
  appendFileSync(c.configPath, "\n[broken\n");
  const r = c.cli(["status"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /^fuzzfleet: warning: .*fuzzfleet\.toml:\d+:\d+: invalid TOML/);
  assert.match(r.stderr, /the report below comes from the store alone/);
  assert.match(r.stdout, /^generation 2 /);
});

test("the demo explains its deliberate quarantine in its own words and says where its files stay", () => {
  const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-demo-test-"));
  try {
    const r = spawnSync(process.execPath, [CLI, "demo", "--for", "6s", "--dir", join(dir, "d")], { encoding: "utf8", env: { ...process.env, PLANTED_COST_MS: "0" } });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.doesNotMatch(r.stdout, /fix it before trusting its verdicts/);
    assert.doesNotMatch(r.stdout, /QUARANTINE/);
    // Which seeds a short demo reaches depends on its chunk sizes; the quarantine lines follow the store.
    const db = new Database(join(dir, "d", "fuzzfleet.db"), { readonly: true });
    const quarantined = (db.prepare("SELECT COALESCE(SUM(quarantine), 0) AS n FROM chunk").get() as { n: number }).n;
    db.close();
    if (quarantined > 0) assert.match(r.stdout, new RegExp(`quarantine: +${quarantined} — invalid tests the planted generator emits on purpose`));
    else assert.doesNotMatch(r.stdout, /quarantine:/);
    assert.match(r.stdout, new RegExp(`The demo's files stay in ${join(dir, "d").replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} \\(remove them with: rm -rf `));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
