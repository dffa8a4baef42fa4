// When to stop an explore campaign, on real campaigns: the final statistics (printed and in
// --stats-json), `report --corpus` and `ui --corpus` give the estimate of
// core/discovery-estimate.ts over the campaign's executions and the signatures of the findings it
// made, and a later campaign on the same corpus estimates from its own sample only (the earlier
// campaign's findings are not its incidences).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { estimateDiscovery, type DiscoveryEstimate } from "../../src/core/discovery-estimate.ts";
import type { DashboardSnapshot } from "../../src/ui/source.ts";
import { CLI } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";

/** The estimate as JSON carries it. */
const json = (e: DiscoveryEstimate) => JSON.parse(JSON.stringify(e)) as DiscoveryEstimate;

describe("when to stop, on explore campaigns", () => {
  const e = new ExploreDir();
  after(() => e.cleanup());
  // An input "<word> <n>" crashes with "boom <word>" (its signature) unless the word is "ok".
  const target = [
    e.script(
      "t.sh",
      `read -r word rest < "$1"
case "$word" in
  ok) exit 0 ;;
  *) echo "boom $word" >&2; kill -ABRT $$ ;;
esac`,
    ),
    "@@",
  ];

  test("the final statistics, report --corpus and ui's snapshot give the campaign's estimate", () => {
    // Signature A: 3 inputs, B: 2, C and D: 1 each (two singletons, one doubleton); 3 pass.
    for (const [name, text] of Object.entries({ a1: "A 1", a2: "A 2", a3: "A 3", b1: "B 1", b2: "B 2", c1: "C 1", d1: "D 1", o1: "ok 1", o2: "ok 2", o3: "ok 3" })) e.seed(name, `${text}\n`);
    const r = e.run(["-j", "2", "-t", "5", "--max-idle", "1"], target);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const expected = json(estimateDiscovery(10, [3, 2, 1, 1]));
    const s = e.stats();
    assert.equal(s.observations, 10);
    assert.deepEqual(s.discovery, expected);
    assert.deepEqual([expected.observed, expected.singletons, expected.doubletons, expected.nextNewProbability], [4, 2, 1, 0.2]);
    assert.match(r.stdout, /new signature chance: +0\.20 per execution \(one in ~5 executions\)/);
    assert.match(r.stdout, new RegExp(`signatures in all: +~${Math.round(expected.estimatedTotal * 10) / 10} estimated \\(4 seen, 95 %: ${expected.interval[0]}–${expected.interval[1]}\\)`));

    const out = join(e.dir, "report");
    const rep = spawnSync(process.execPath, [CLI, "report", "--corpus", e.corpus, "-o", out], { cwd: e.dir, encoding: "utf8", timeout: 60_000 });
    assert.equal(rep.status, 0, rep.stderr);
    const m = /<script id="embedded" type="application\/json">([^<]*)<\/script>/.exec(readFileSync(join(out, "index.html"), "utf8"));
    const snapshot = JSON.parse(m![1]!) as { snapshot: DashboardSnapshot };
    assert.deepEqual(snapshot.snapshot.explore?.discovery, expected);
  });

  test("a later campaign on the corpus estimates from its own executions and findings only", () => {
    // Only new content runs: one new signature (E, a singleton) and one input that passes.
    e.seed("e1", "E 1\n");
    e.seed("o4", "ok 4\n");
    const r = e.run(["-j", "2", "-t", "5", "--max-idle", "1"], target);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const s = e.stats();
    assert.equal(s.observations, 2);
    assert.equal(s.findings.groups.length, 5, "the statistics list every signature on the corpus");
    assert.deepEqual(s.discovery, json(estimateDiscovery(2, [1])));
  });
});
