// A failure that resweep marked fixed and a later sweep hits again is a regression: it is
// reopened, shown on the chunk line and in the summary, and the run exits 1 as for a new failure.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { Campaign } from "../helpers/campaign.ts";

describe("regressions", () => {
  // Two lanes with the same args and base seed sweep the same tests, so lane b only meets
  // failures lane a has already recorded.
  const lanes = {
    a: 'base_seed = 1\nargs = ["--size", "small"]',
    b: 'base_seed = 1\nargs = ["--size", "small"]',
  };
  const c = new Campaign({ lanes, defaults: { max_shrinks: 100000, bootstrap_seeds: 20000 } });
  after(() => c.cleanup());

  test("a fixed failure hit again is reopened, and the run exits 1 though nothing is newly distinct", () => {
    const first = c.cli(["run", "--lane", "a", "--for", "4s"]);
    assert.equal(first.code, 1, first.stderr);
    assert.ok(c.one<{ cursor: number }>("SELECT cursor FROM lane WHERE name = 'a'").cursor > 20000);
    const fix = c.cli(["resweep"], { env: { PLANTED_FIX: "crash,wrong-result,hang-detected" } });
    assert.equal(fix.code, 0, fix.stderr);
    const distinct = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure").n;
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE state = 'fixed'").n, distinct);

    // At >= 5 ms a seed lane b sweeps far fewer than the 20,000 seeds lane a swept; its first
    // chunk, seeds 1..100, holds a find (seeds 90..99).
    c.writeConfig({ lanes, costMs: 5, defaults: { max_shrinks: 100000, bootstrap_seeds: 100 } });
    const second = c.cli(["run", "--lane", "b", "--for", "4s"]);
    assert.equal(second.code, 1, `a regression alerts like a new failure\n${second.stdout}\n${second.stderr}`);
    assert.ok(c.one<{ cursor: number }>("SELECT cursor FROM lane WHERE name = 'b'").cursor <= 20001);
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure").n, distinct, "nothing newly distinct");
    const reopened = c.query<{ state: string; resolved_at: string | null; resolved_app_build: string | null }>(
      "SELECT state, resolved_at, resolved_app_build FROM failure WHERE state = 'open'",
    );
    assert.ok(reopened.length >= 1);
    assert.ok(reopened.every((f) => f.resolved_at === null && f.resolved_app_build === null));
    assert.match(second.stdout, /\d+ finds?, 0 new, \d+ reopened[,\w ]* in /);
    assert.match(second.stdout, new RegExp(`REOPENED: +${reopened.length} failure\\(s\\) marked fixed were hit again`));
    assert.match(second.stdout, /failures: +0 newly distinct\n/);
  });
});
