// A long explore campaign: 200,000 corpus objects executed and 10,000 findings under 500
// signatures, forged quickly (test/report/long-explore-corpus.ts) as a finished campaign leaves
// them. The views read from the files (`report --corpus`, `ui --corpus`: snapshot and /metrics)
// answer with the campaign's numbers and its when-to-stop estimate, and what they cost does not
// grow with the corpus: the same view over a corpus of 2,000 objects with the same findings costs
// about as much CPU (it used to list and stat every corpus object: about 5 µs each), and the
// static report reads the findings once (it used to read all of them again for each of the 50
// signatures it embeds: 11 s of CPU here).
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { estimateDiscovery } from "../../src/core/discovery-estimate.ts";
import { ExploreDashboardSource } from "../../src/explore/views/dashboard-source.ts";
import { FindingsStore, findingsDir } from "../../src/explore/state/findings.ts";
import { stateDir } from "../../src/explore/state/work-dir.ts";
import { ExploreCampaignFiles } from "../../src/explore/views/campaign-files.ts";
import { exploreStaticReportHtml } from "../../src/explore/views/static-report.ts";
import type { DashboardSnapshot } from "../../src/ui/source.ts";
import { writeMetrics } from "../../src/ui/metrics.ts";
import { CLI } from "../helpers/campaign.ts";
import { parseExposition } from "../ui/exposition.ts";
import { get } from "../ui/serve.ts";
import { forgeLongExplore, type LongExploreFacts } from "./long-explore-corpus.ts";

const ENTRIES = 200_000;
const SMALL = 2_000;
const FINDINGS = { findings: 10_000, signatures: 500, singletons: 120 };

/** CPU milliseconds (user + system) of `fn` in this process: the median of three runs. */
function cpuMs(fn: () => unknown): number {
  const runs: number[] = [];
  for (let i = 0; i < 3; i++) {
    const c = process.cpuUsage();
    fn();
    const u = process.cpuUsage(c);
    runs.push((u.user + u.system) / 1000);
  }
  return runs.sort((a, b) => a - b)[1]!;
}

function embedded(html: string): { snapshot: DashboardSnapshot } {
  const m = /<script id="embedded" type="application\/json">([^<]*)<\/script>/.exec(html);
  assert.ok(m, "the page embeds its data");
  return JSON.parse(m[1]!) as { snapshot: DashboardSnapshot };
}

describe("an explore campaign of 200,000 corpus objects and 10,000 findings", () => {
  const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-long-explore-"));
  const corpus = join(dir, "large");
  const small = join(dir, "small");
  let facts: LongExploreFacts;
  before(() => {
    facts = forgeLongExplore(corpus, { entries: ENTRIES, ...FINDINGS });
    forgeLongExplore(small, { entries: SMALL, ...FINDINGS });
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("report --corpus -o writes the page with the campaign's totals, findings and when-to-stop estimate", () => {
    const out = join(dir, "report");
    const r = spawnSync(process.execPath, [CLI, "report", "--corpus", corpus, "-o", out], { cwd: dir, encoding: "utf8", timeout: 120_000 });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    const v = embedded(readFileSync(join(out, "index.html"), "utf8")).snapshot.explore!;
    assert.deepEqual(
      { corpus: v.totals.corpus, executions: v.totals.executions, generated: v.totals.generated, unique: v.totals.unique, done: v.frontier.done },
      { corpus: ENTRIES, executions: facts.executions, generated: facts.generated, unique: facts.unique, done: ENTRIES },
    );
    assert.deepEqual(v.findingsTotal, { inputs: FINDINGS.findings, crashes: FINDINGS.findings, hangs: 0, signatures: FINDINGS.signatures });
    assert.equal(v.findings.length, 100, "the page lists the first 100 signatures");
    assert.ok(v.series.t.length > 0 && v.series.t.length <= 240, `a plot of at most 240 points (${v.series.t.length})`);
    const expected = JSON.parse(JSON.stringify(estimateDiscovery(facts.executions, facts.incidences.values())));
    assert.deepEqual(v.discovery, expected);
    assert.equal(v.discovery!.singletons, FINDINGS.singletons);
  });

  test("ui --corpus serves /snapshot.json and /metrics with the same numbers", async () => {
    const child = spawn(process.execPath, [CLI, "ui", "--corpus", corpus, "--listen", "127.0.0.1:0"], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
    const done = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    try {
      let out = "";
      child.stdout!.setEncoding("utf8");
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout!.on("data", (d: string) => {
          out += d;
          const m = /^dashboard \(read-only\): (http:\/\/127\.0\.0\.1:\d+\/)/m.exec(out);
          if (m) resolve(m[1]!);
        });
        child.on("close", (code) => reject(new Error(`ui exited ${code} before its banner: ${out}`)));
      });
      const snap = await get(url + "snapshot.json");
      assert.equal(snap.status, 200, snap.body);
      const v = (JSON.parse(snap.body) as DashboardSnapshot).explore!;
      assert.equal(v.totals.corpus, ENTRIES);
      assert.equal(v.totals.executions, facts.executions);
      const m = await get(url + "metrics");
      assert.equal(m.status, 200, m.body);
      const fams = parseExposition(m.body);
      const d = v.discovery!;
      assert.equal(fams.get("fuzzfleet_explore_corpus_inputs")?.samples[0]?.value, ENTRIES);
      assert.equal(fams.get("fuzzfleet_explore_finding_signatures")?.samples[0]?.value, FINDINGS.signatures);
      assert.equal(fams.get("fuzzfleet_explore_discovery_next_new_probability")?.samples[0]?.value, d.nextNewProbability);
      assert.equal(fams.get("fuzzfleet_explore_discovery_executions_to_next_new")?.samples[0]?.value, d.unitsToNextNew);
      assert.equal(fams.get("fuzzfleet_explore_discovery_estimated_signatures_low")?.samples[0]?.value, d.interval[0]);
      assert.equal(fams.get("fuzzfleet_explore_discovery_estimated_signatures_high")?.samples[0]?.value, d.interval[1]);
    } finally {
      child.kill("SIGINT");
      await done;
    }
  });

  test("the snapshot and /metrics from the files cost no more CPU over 200,000 objects than over 2,000", () => {
    const view = (c: string) => () => {
      const source = new ExploreDashboardSource({ title: "t", live: null, files: new ExploreCampaignFiles(c) });
      JSON.stringify(source.snapshot());
      writeMetrics(source.metrics());
    };
    view(small)();
    const smallMs = cpuMs(view(small));
    const largeMs = cpuMs(view(corpus));
    assert.ok(largeMs < 2 * smallMs + 100, `${largeMs.toFixed(0)} ms of CPU over ${ENTRIES} objects, ${smallMs.toFixed(0)} ms over ${SMALL}`);
  });

  test("the static report reads the findings about once, not once for every signature it embeds", () => {
    const readAll = cpuMs(() => new FindingsStore(findingsDir(stateDir(corpus))).list());
    const report = cpuMs(() => exploreStaticReportHtml(corpus, "t"));
    assert.ok(report < 3 * readAll + 200, `the report took ${report.toFixed(0)} ms of CPU; reading every finding once takes ${readAll.toFixed(0)} ms`);
  });
});
