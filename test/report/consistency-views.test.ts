// One definition per number: after a campaign of each kind, every view that shows a count shows
// the same one — the dashboard's snapshot, /metrics, `status --json` (sweep) or the final
// statistics (explore), the static report and the session's summary. Distinct failures, finds,
// finds pending minimization, seeds swept (a sweep's executions), executions and unique inputs.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import type { DashboardSnapshot } from "../../src/ui/source.ts";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, PLANTED } from "../helpers/campaign.ts";
import { get, serve } from "../ui/serve.ts";

/** The read-only dashboard's snapshot and /metrics samples (name with labels -> value), then it is stopped. */
async function readDashboard(c: Campaign, args: string[]): Promise<{ snap: DashboardSnapshot; metrics: Map<string, number> }> {
  const ui = await serve(c, ["ui", "--listen", "127.0.0.1:0", ...args], /dashboard \(read-only\): (http:\/\/127\.0\.0\.1:\d+\/)/);
  try {
    const snap = JSON.parse((await get(`${ui.url}snapshot.json`)).body) as DashboardSnapshot;
    const metrics = new Map<string, number>();
    for (const line of (await get(`${ui.url}metrics`)).body.split("\n")) {
      const m = /^(fuzzfleet_[^ ]+) (\S+)$/.exec(line);
      if (m) metrics.set(m[1]!, Number(m[2]));
    }
    return { snap, metrics };
  } finally {
    ui.child.kill("SIGINT");
    assert.equal(await ui.done, 0, "the read-only dashboard stops cleanly on Ctrl-C");
  }
}

/** The snapshot a static report embeds. */
function reportSnapshot(c: Campaign, args: string[]): DashboardSnapshot {
  const dir = join(c.dir, `report-${args.length}`);
  const r = c.cli(["report", "-o", dir, ...args]);
  assert.equal(r.code, 0, r.stderr);
  const html = readFileSync(join(dir, "index.html"), "utf8");
  const json = /<script id="embedded" type="application\/json">(.*?)<\/script>/s.exec(html)?.[1];
  assert.ok(json, "the report embeds its snapshot");
  return (JSON.parse(json) as { snapshot: DashboardSnapshot }).snapshot;
}

function metric(metrics: Map<string, number>, name: string): number {
  const v = metrics.get(name);
  assert.ok(v !== undefined, `/metrics has ${name}: ${[...metrics.keys()].join(", ")}`);
  return v;
}

const int = (text: string) => Number(text.replace(/,/g, ""));

describe("a sweep with failures and finds pending minimization", () => {
  const gen = JSON.stringify(PLANTED);
  const c = new Campaign({
    // A shrink cap of 1 leaves most finds to the minimizer, which runs beside the chunks two finds at a
    // time: some get minimized, more than it can take stay pending.
    defaults: { max_shrinks: 1, bootstrap_seeds: 400 },
    costMs: 0.5,
    lanes: { small: 'base_seed = 1\nweight = 2\nargs = ["--size", "small"]', large: 'base_seed = 5000000\nargs = ["--size", "large"]' },
    generator: `[generator]
command = ["node", ${gen}, "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"]
identity = [${JSON.stringify(PLANTED.replace(/planted\.mjs$/, "*.mjs"))}]
minimize = ["node", ${gen}, "--minimize", "--seeds", "{seeds}", "--out", "{out}", "--jobs", "{jobs}"]
`,
    extra: "[minimize]\nshare = 0.25\nbatch = 2\n",
  });
  after(() => c.cleanup());

  test("summary, status, dashboard, /metrics and the static report agree on seeds, finds, distinct failures and pending finds", async () => {
    const run = c.cli(["run", "--for", "8s"]);
    assert.equal(run.code, exitOwed(c, run.stdout), run.stdout + run.stderr);
    const out = run.stdout;
    const summary = {
      seeds: int(/^ {2}seeds swept: +([\d,]+)$/m.exec(out)![1]!),
      finds: int(/^ {2}finds: +([\d,]+) failing seed/m.exec(out)![1]!),
      distinct: [.../^ {2}open failures: ([^;\n]*) distinct/m.exec(out)?.[1]?.matchAll(/ ([\d,]+)(?:,|$)/g) ?? []].reduce((n, m) => n + int(m[1]!), 0),
      pending: int(/([\d,]+) find\(s\) pending minimization/.exec(out)?.[1] ?? "0"),
    };
    assert.ok(summary.finds > 0 && summary.distinct > 0 && summary.pending > 0, `the session found failures and left finds pending:\n${out}`);

    const status = JSON.parse(c.cli(["status", "--json"]).stdout) as {
      totals: { seeds: number };
      failure_totals: { distinct: number; distinct_hits: number; pending_finds: number; hits: number };
      minimize: { pending: number };
    };
    const { snap, metrics } = await readDashboard(c, []);
    const report = reportSnapshot(c, []);
    const views = { summary, status, snap: snap.sweep!.totals, report: report.sweep!.totals };

    const seeds = [summary.seeds, status.totals.seeds, snap.sweep!.totals.seedsSwept, metric(metrics, "fuzzfleet_seeds_swept_total"), report.sweep!.totals.seedsSwept];
    assert.deepEqual(seeds, Array(5).fill(summary.seeds), `seeds swept: summary, status, dashboard, /metrics, report ${JSON.stringify(views)}`);

    const finds = [
      summary.finds,
      status.failure_totals.hits,
      snap.sweep!.totals.finds,
      metric(metrics, "fuzzfleet_finds_total"),
      report.sweep!.totals.finds,
      snap.sweep!.series.finds.at(-1),
    ];
    assert.deepEqual(finds, Array(6).fill(summary.finds), `finds: summary, status, dashboard, /metrics, report, the finds series' end ${JSON.stringify(views)}`);

    const failures = ["open", "fixed", "stale"].reduce((n, s) => n + metric(metrics, `fuzzfleet_failures{state="${s}"}`), 0);
    const distinct = [summary.distinct, status.failure_totals.distinct, snap.sweep!.totals.distinct, failures, report.sweep!.totals.distinct, snap.sweep!.series.distinct.at(-1)];
    assert.deepEqual(distinct, Array(6).fill(summary.distinct), `distinct failures: summary, status, dashboard, /metrics, report, the distinct series' end ${JSON.stringify(views)}`);

    const hits = [status.failure_totals.distinct_hits, snap.sweep!.totals.hits, metric(metrics, "fuzzfleet_failure_hits_total"), report.sweep!.totals.hits];
    assert.deepEqual(hits, Array(4).fill(status.failure_totals.distinct_hits), `hits of distinct failures: status, dashboard, /metrics, report ${JSON.stringify(views)}`);

    const pending = [summary.pending, status.failure_totals.pending_finds, snap.sweep!.totals.pending.finds, metric(metrics, "fuzzfleet_pending_finds"), report.sweep!.totals.pending.finds];
    assert.deepEqual(pending, Array(5).fill(status.failure_totals.pending_finds), `pending finds: summary, status, dashboard, /metrics, report ${JSON.stringify(views)}`);
  });
});

/** A target of a few lines: children append "a" and "b" up to three bytes; "xab" aborts (SIGABRT), a finding. */
const TARGET = `#!/bin/sh
c=$(cat "$1")
[ "$c" = "xab" ] && kill -ABRT $$
if [ \${#c} -lt 3 ]; then
  printf '%sa' "$c" > "$SYMCC_OUTPUT_DIR/a"
  printf '%sb' "$c" > "$SYMCC_OUTPUT_DIR/b"
fi
exit 0
`;

describe("an explore campaign with a finding", () => {
  const c = new Campaign();
  after(() => c.cleanup());

  test("final statistics, --stats-json, dashboard, /metrics, the static report and failures --corpus agree on executions, unique inputs and findings", async () => {
    const seeds = join(c.dir, "seeds");
    const corpus = join(c.dir, "corpus");
    mkdirSync(seeds);
    writeFileSync(join(seeds, "x"), "x");
    const target = join(c.dir, "target.sh");
    writeFileSync(target, TARGET);
    chmodSync(target, 0o755);
    const statsJson = join(c.dir, "stats.json");
    const r = c.cli(["explore", "-i", seeds, "-o", corpus, "-j", "2", "--max-idle", "1", "--stats-json", statsJson, "--", "sh", target, "@@"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const out = r.stdout;
    // x, xa, xb, xaa, xab, xba, xbb: seven runs, six children new to the corpus, one of them (xab) a crash.
    const final = {
      executions: int(/^ {2}analysis observations: +([\d,]+)$/m.exec(out)![1]!),
      unique: int(/^ {2}new interesting inputs: +([\d,]+)$/m.exec(out)![1]!),
      crashes: int(/^ {2}findings: +([\d,]+) crash\(es\)/m.exec(out)![1]!),
    };
    assert.deepEqual(final, { executions: 7, unique: 6, crashes: 1 }, out);

    const stats = JSON.parse(readFileSync(statsJson, "utf8")) as { observations: number; interesting: number; new_findings: number; findings: { crashes: number } };
    const { snap, metrics } = await readDashboard(c, ["--corpus", corpus]);
    const report = reportSnapshot(c, ["--corpus", corpus]);
    const found = JSON.parse(c.cli(["failures", "--corpus", corpus, "--json"]).stdout) as { totals: { inputs: number; crashes: number } };
    const e = snap.explore!;
    const views = JSON.stringify({ stats, totals: e.totals, findings: e.findingsTotal, report: report.explore!.totals });

    assert.deepEqual(
      [stats.observations, e.totals.executions, metric(metrics, 'fuzzfleet_explore_executions_total{master="0"}'), report.explore!.totals.executions],
      Array(4).fill(final.executions),
      `executions: --stats-json, dashboard, /metrics, report ${views}`,
    );
    assert.deepEqual(
      [stats.interesting, e.totals.unique, metric(metrics, 'fuzzfleet_explore_unique_inputs_total{master="0"}'), report.explore!.totals.unique, e.series.unique.at(-1), report.explore!.series.unique.at(-1)],
      Array(6).fill(final.unique),
      `unique inputs: --stats-json, dashboard, /metrics, report, the unique series' end on both ${views}`,
    );
    assert.deepEqual(
      [stats.new_findings, stats.findings.crashes, e.findingsTotal.crashes, metric(metrics, 'fuzzfleet_explore_findings{kind="crash"}'), report.explore!.findingsTotal.crashes, found.totals.crashes],
      Array(6).fill(final.crashes),
      `crashes: --stats-json (new, all), dashboard, /metrics, report, failures --corpus ${views}`,
    );
  });
});
