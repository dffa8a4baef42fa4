// A finished explore campaign keeps its growth history with its corpus: after a clean end (its
// work directory and lease records removed) `report --corpus` draws what the live view drew, with
// the totals of the final statistics, and counts the tasks done as the executions they were.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import type { DashboardSnapshot } from "../../src/ui/source.ts";
import { CLI } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";

describe("a finished explore campaign's history", () => {
  const e = new ExploreDir();
  after(() => e.cleanup());

  test("report --corpus after a clean end shows the growth series and the final statistics' totals", () => {
    e.seed("a", "ok\n");
    e.seed("b", "ok too\n");
    // Each input shorter than 30 bytes writes one child one byte longer, and "ok" (redundant after the first).
    const t = e.script("t.sh", [`c="$(cat "$1")"`, `if [ \${#c} -lt 30 ]; then printf '%sx' "$c" > "$SYMCC_OUTPUT_DIR/longer"; printf 'ok' > "$SYMCC_OUTPUT_DIR/ok"; fi`, `sleep 0.1`].join("\n"));
    const r = e.run(["-j", "2", "--max-idle", "1"], [t, "@@"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const stats = e.stats();
    assert.ok(stats.generated > 0 && stats.observations > 0, JSON.stringify(stats));
    assert.ok(!readdirSync(join(e.corpus, ".fuzzfleet")).some((n) => n.startsWith("work-")), "a clean end removed the work directory");

    const out = join(e.dir, "report");
    const rep = spawnSync(process.execPath, [CLI, "report", "--corpus", e.corpus, "-o", out], { cwd: e.dir, encoding: "utf8", timeout: 60_000 });
    assert.equal(rep.status, 0, rep.stdout + rep.stderr);
    const html = readFileSync(join(out, "index.html"), "utf8");
    const m = /<script id="embedded" type="application\/json">([^<]*)<\/script>/.exec(html);
    assert.ok(m && existsSync(out));
    const v = (JSON.parse(m[1]!) as { snapshot: DashboardSnapshot }).snapshot.explore!;
    assert.ok(v.series.t.length >= 2, `the growth history is drawn: ${JSON.stringify(v.series)}`);
    assert.equal(v.totals.generated, stats.generated, "the last point is the final statistics' test cases generated");
    assert.equal(v.series.generated.at(-1), stats.generated);
    assert.equal(v.totals.executions, stats.observations, "executions are the final statistics' analysis observations");
    assert.ok(v.frontier.done > 0, "tasks done (the explored ledger's lines), not 0 beside the executions");
    assert.ok(v.totals.unique !== null && v.totals.unique > 0);
  });
});
