// resweep closes what a fix fixed and nothing else; reset restarts a generation or one lane,
// and a lane reset holds across later runs.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, coverageViolations } from "../helpers/campaign.ts";

describe("resweep and reset", () => {
  const c = new Campaign({
    lanes: { small: 'base_seed = 1\nargs = ["--size", "small"]' },
    defaults: { max_shrinks: 1000 },
  });
  before(() => {
    const r = c.cli(["run", "--for", "7s"]);
    assert.equal(r.code, 1, r.stderr);
  });
  after(() => c.cleanup());

  const byBucket = () =>
    Object.fromEntries(
      c
        .query<{ bucket: string; state: string; n: number }>("SELECT bucket, state, COUNT(*) AS n FROM failure GROUP BY bucket, state")
        .map((r) => [`${r.bucket}/${r.state}`, r.n]),
    );

  test("with nothing fixed, resweep closes nothing", () => {
    const before = byBucket();
    const r = c.cli(["resweep"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /0 fixed, \d+ still open/);
    assert.deepEqual(byBucket(), before);
  });

  test("after the planted crash bug is switched off, resweep marks the crash failures fixed and leaves the others open", () => {
    const before = byBucket();
    assert.ok(before["crash/open"]! > 0 && before["wrong-result/open"]! > 0, JSON.stringify(before));
    const r = c.cli(["resweep"], { env: { PLANTED_FIX: "crash" } });
    assert.equal(r.code, 0, r.stderr);
    const now = byBucket();
    assert.equal(now["crash/fixed"], before["crash/open"]);
    assert.equal(now["crash/open"], undefined);
    assert.equal(now["wrong-result/open"], before["wrong-result/open"]);
    assert.match(r.stdout, new RegExp(`${before["crash/open"]!.toLocaleString("en-US")} fixed`), r.stdout);
    const fixed = c.query<{ resolved_at: string | null }>("SELECT resolved_at FROM failure WHERE state = 'fixed'");
    assert.ok(fixed.every((f) => f.resolved_at !== null));
  });

  test("reset --lane restarts the lane, and the reset holds across the next run", () => {
    const old = c.one<{ id: number; cursor: number }>("SELECT id, cursor FROM lane WHERE retired = 0");
    assert.ok(old.cursor > 1, `the lane had swept something before the reset (cursor ${old.cursor})`);
    const refused = c.cli(["reset", "--lane", "small"]);
    assert.equal(refused.code, 3, "no terminal and no --yes: refused");
    const r = c.cli(["reset", "--lane", "small", "--yes"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /lane 'small' reset to 1/);
    const run = c.cli(["run", "--for", "4s"]);
    assert.equal(run.code, exitOwed(c, run.stdout), run.stdout + run.stderr);
    const lane = c.one<{ id: number; cursor: number }>("SELECT id, cursor FROM lane WHERE retired = 0");
    assert.notEqual(lane.id, old.id);
    const first = c.one<{ seed_from: number }>("SELECT seed_from FROM chunk WHERE lane_id = ? ORDER BY id LIMIT 1", lane.id);
    assert.equal(first.seed_from, 1, "the old chunks were not absorbed back into the cursor");
    assert.deepEqual(coverageViolations(c), []);
  });

  test("reset without --lane starts a new generation and makes open failures stale", () => {
    const open = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE state = 'open'").n;
    const r = c.cli(["reset", "--yes"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /generation 2 started/);
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE state = 'open'").n, 0);
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE state = 'stale'").n, open);
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM lane WHERE retired = 0").n, 0);
  });
});
