// `fuzzfleet report --corpus C -o D` on a real explore campaign, interrupted so that its lease
// records (and with them the growth history) are kept: D/index.html embeds the totals, the growth
// series and the findings by signature with their output tails, loads in a headless Chromium from
// file:// without a console error or a request; reading it leaves everything beside the corpus as
// it was, a lease journal left behind included. A
// directory no explore campaign ran in, a symlinked corpus and an output inside the corpus are
// refused with the fix, and nothing is written.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, describe, test } from "node:test";
import { chromium } from "playwright-core";
import type { DashboardSnapshot, FailureDetail } from "../../src/ui/source.ts";
import { CLI } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { snapshot as snapshotTree } from "../helpers/tree-snapshot.ts";

const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

function cli(args: string[], cwd: string) {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The JSON a static report embeds. */
function embedded(html: string): { snapshot: DashboardSnapshot; details: FailureDetail[] } {
  const m = /<script id="embedded" type="application\/json">([^<]*)<\/script>/.exec(html);
  assert.ok(m, "the page embeds its data");
  return JSON.parse(m[1]!) as { snapshot: DashboardSnapshot; details: FailureDetail[] };
}

/** The executions the master committed so far: the lines of its explored ledger. */
function executions(corpus: string): number {
  const dir = join(corpus, ".fuzzfleet", "explored");
  if (!existsSync(dir)) return 0;
  return readdirSync(dir)
    .filter((n) => n.endsWith(".log"))
    .reduce((n, name) => n + readFileSync(join(dir, name), "utf8").split("\n").filter((l) => l !== "").length, 0);
}

async function until(what: string, ok: () => boolean, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("fuzzfleet report --corpus", () => {
  const e = new ExploreDir();
  after(() => e.cleanup());

  before(async () => {
    // Inputs starting "abort" crash with one message, "hang" sleeps past the 1 s limit; the rest
    // pass and write two children: themselves one byte longer (up to 60), and "ok" (redundant after the first).
    e.seed("a1", "abort one\n");
    e.seed("a2", "abort two\n");
    e.seed("h", "hang\n");
    e.seed("ok", "ok, a longer input to mutate\n");
    const t = e.script("t.sh", [
      `c="$(cat "$1")"`,
      `case "$c" in`,
      `  abort*) echo 'boom at 0x1234' >&2; kill -ABRT $$ ;;`,
      `  hang) sleep 60 ;;`,
      `  *) if [ \${#c} -lt 60 ]; then printf '%sx' "$c" > "$SYMCC_OUTPUT_DIR/longer"; printf 'ok' > "$SYMCC_OUTPUT_DIR/ok"; fi ;;`,
      `esac`,
      `sleep 0.05`,
    ].join("\n"));
    const m = e.start(["-j", "2", "-t", "1", "--max-idle", "60"], [t, "@@"]);
    const findings = join(e.corpus, ".fuzzfleet", "findings");
    await until("a crash and a hang recorded", () => existsSync(findings) && readdirSync(findings).filter((n) => n.endsWith(".json")).length >= 3);
    // Enough passing inputs ran for the "ok" child to come again (redundant), the frontier far from done.
    await until("eight executions in the explored ledger", () => executions(e.corpus) >= 8);
    m.child.kill("SIGINT");
    const done = await m.done;
    assert.equal(done.code, 6, `interrupted before the frontier was exhausted (docs/exit-codes.md)\n${m.output()}`);
  });

  test("reading the files writes nothing beside the corpus, a lease journal left behind included", () => {
    const before = snapshotTree(e.corpus, true);
    const r = cli(["report", "--corpus", e.corpus, "-o", join(e.dir, "report-first")], e.dir);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(snapshotTree(e.corpus, true), before, "nothing beside the corpus changed");
  });

  test("writes D/index.html with the totals, the growth series and the findings by signature", async () => {
    const out = join(e.dir, "report");
    const r = cli(["report", "--corpus", e.corpus, "-o", out], e.dir);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /wrote .*report\/index\.html/);
    const html = readFileSync(join(out, "index.html"), "utf8");
    assert.ok(!/<script src=|<link [^>]*stylesheet[^>]*href=/.test(html), "nothing is loaded from elsewhere");
    assert.ok(html.includes("uPlot"), "uPlot is inlined");
    const { snapshot: s, details } = embedded(html);
    assert.equal(s.kind, "explore");
    const v = s.explore!;
    assert.match(s.status.headline, /unfinished epoch\(s\) kept for --resume/);
    assert.equal(v.totals.corpus, e.corpusFiles().length);
    assert.ok(v.totals.executions > 0);
    assert.ok(v.totals.generated !== null && v.totals.generated > 0, JSON.stringify(v.totals));
    assert.ok(v.totals.unique !== null && v.totals.unique > 0 && v.totals.unique < v.totals.generated, "the \"ok\" child is generated again and again");
    assert.equal(v.totals.redundant, v.totals.generated - v.totals.unique);
    assert.ok(v.series.t.length > 0, "the growth history is embedded");
    assert.equal(v.series.generated.at(-1), v.totals.generated);
    assert.equal(v.series.unique.at(-1), v.totals.unique);
    // The same findings as `failures --corpus` reads, each with its output tail.
    const f = JSON.parse(cli(["failures", "--corpus", e.corpus, "--json"], e.dir).stdout) as { totals: { signatures: number; inputs: number }; signatures: { signature: string }[] };
    assert.deepEqual(v.findings.map((g) => g.signature).sort(), f.signatures.map((g) => g.signature).sort());
    assert.equal(v.findingsTotal.inputs, f.totals.inputs);
    assert.ok(v.findings.some((g) => g.kind === "crash" && /signal 6 \| boom at <addr>/.test(g.signature)), JSON.stringify(v.findings));
    assert.ok(v.findings.some((g) => g.kind === "hang"));
    assert.equal(details.length, v.findings.length);
    assert.ok(details.some((d) => /boom at 0x1234/.test(d.report)), "a crash's output tail is embedded");
  });

  test("the page renders from file:// in Chromium: plots and findings, no console error, no request", async () => {
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is not installed: apt-get install -y chromium`);
    const out = join(e.dir, "report-browser");
    assert.equal(cli(["report", "--corpus", e.corpus, "-o", out], e.dir).code, 0);
    const profile = mkdtempSync(join(tmpdir(), "fuzzfleet-chromium-"));
    const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    try {
      const problems: string[] = [];
      const requests: string[] = [];
      const page = await context.newPage();
      page.on("console", (m) => {
        if (m.type() === "error") problems.push(`console: ${m.text()}`);
      });
      page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
      page.on("request", (q) => requests.push(q.url()));
      const url = pathToFileURL(join(out, "index.html")).href;
      await page.goto(url);
      await page.waitForSelector("#findings tbody tr");
      assert.ok(await page.$("#growth-chart canvas"), "the unique/generated plot is drawn");
      assert.ok(await page.$("#redundancy-chart canvas"), "the redundancy plot is drawn");
      assert.match((await page.textContent("#findings"))!, /boom at <addr>/);
      assert.match((await page.textContent("#mode"))!, /static report/);
      assert.deepEqual(problems, []);
      assert.deepEqual(requests.filter((u) => u !== url && !u.startsWith("data:")), [], "the page loads nothing");
    } finally {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    }
  });

  test("refuses a directory no explore campaign ran in, a symlinked corpus, and an output inside the corpus", () => {
    const plain = join(e.dir, "plain");
    mkdirSync(plain);
    const none = cli(["report", "--corpus", plain, "-o", join(e.dir, "r1")], e.dir);
    assert.equal(none.code, 2, none.stderr);
    assert.match(none.stderr, /no explore campaign ran here .*point --corpus at the -o directory of an explore campaign/);
    assert.ok(!existsSync(join(e.dir, "r1")), "nothing is written for a refusal");

    const link = join(e.dir, "corpus-link");
    symlinkSync(e.corpus, link);
    const linked = cli(["report", "--corpus", link, "-o", join(e.dir, "r2")], e.dir);
    assert.equal(linked.code, 2, linked.stderr);
    assert.match(linked.stderr, /symbolic link, which is never followed/);

    const before = snapshotTree(e.corpus);
    for (const o of [join(e.corpus, "report"), e.corpus, join(link, "sub", "report")]) {
      const inside = cli(["report", "--corpus", e.corpus, "-o", o], e.dir);
      assert.equal(inside.code, 2, `${o}: ${inside.stderr}`);
      assert.match(inside.stderr, /^fuzzfleet: -o .* lies in the corpus .*, which fuzzfleet never writes the report into; choose a path outside it\n$/);
    }
    assert.deepEqual(snapshotTree(e.corpus), before, "nothing was written into the corpus");
  });
});
