// `fuzzfleet ui --explore DIR`: an explore campaign's dashboard read from its files while nothing
// runs. A campaign that ended cleanly shows its corpus, findings and explored ledger (its lease
// records are gone); one interrupted keeps its work directory, and its lease records give the
// frontier, the generated and unique counts and the history. Nothing is written beside the
// corpus; a symlink is never followed.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import type { DashboardSnapshot } from "../../src/ui/source.ts";
import { CLI } from "../helpers/campaign.ts";
import { ExploreDir, MAZE, MAZE_SEEDS } from "../helpers/explore.ts";
import { snapshot as snapshotTree } from "../helpers/tree-snapshot.ts";
import { parseExposition } from "./exposition.ts";
import { get } from "./serve.ts";

/** The executions the master committed so far: the lines of its explored ledger. */
function executions(corpus: string): number {
  const dir = join(corpus, ".fuzzfleet", "explored");
  if (!existsSync(dir)) return 0;
  return readdirSync(dir)
    .filter((n) => n.endsWith(".log"))
    .reduce((n, name) => n + readFileSync(join(dir, name), "utf8").split("\n").filter((l) => l !== "").length, 0);
}

const BANNER = /^dashboard \(read-only\): (http:\/\/127\.0\.0\.1:\d+\/)/m;

/** The maze, made to abort at the treasure (a finding is a run a signal ended). */
function mazeTarget(e: ExploreDir): string[] {
  return [e.script("maze.sh", `"${process.execPath}" "${MAZE}" "$1"\nrc=$?\nif [ $rc -ge 128 ]; then echo "maze: the treasure" >&2; kill -ABRT $$; fi\nexit $rc`), "@@"];
}

async function served(e: ExploreDir, args: string[]): Promise<{ url: string; stop: () => Promise<number | null> }> {
  const s = e.startWith(["ui", "--listen", "127.0.0.1:0", ...args]);
  const end = Date.now() + 30_000;
  for (;;) {
    const m = BANNER.exec(s.output());
    if (m) {
      return {
        url: m[1]!,
        stop: async () => {
          s.child.kill("SIGINT");
          return (await s.done).code;
        },
      };
    }
    if (s.child.exitCode !== null || Date.now() > end) throw new Error(`no banner:\n${s.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("fuzzfleet ui --explore", () => {
  const clean = new ExploreDir();
  const stopped = new ExploreDir();
  after(() => {
    clean.cleanup();
    stopped.cleanup();
  });

  test("a campaign that ended cleanly: corpus, findings and explored ledger, read-only", async () => {
    cpSync(MAZE_SEEDS, clean.seeds, { recursive: true });
    const r = clean.run(["-j", "2", "--max-idle", "0.5"], mazeTarget(clean), { MAZE_DEPTH: "5" });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const stats = clean.stats();
    const before = snapshotTree(clean.corpus);
    const ui = await served(clean, ["--corpus", clean.corpus]);
    try {
      const s = JSON.parse((await get(ui.url + "snapshot.json")).body) as DashboardSnapshot;
      assert.equal(s.kind, "explore");
      assert.equal(s.live, false);
      const v = s.explore!;
      assert.match(s.status.headline, /ended cleanly/);
      assert.equal(v.totals.corpus, clean.corpusFiles().length);
      assert.equal(v.totals.executions, stats.observations, "one ledger line per completed task");
      assert.equal(v.totals.generated, stats.generated, "the growth history kept with the corpus has it after the lease records are gone");
      assert.ok(v.series.t.length > 0, "and draws what the live view drew");
      assert.ok(v.frontier.done > 0, "tasks done: the explored ledger's lines");
      assert.equal(v.findingsTotal.inputs, stats.findings.inputs.length);
      assert.ok(v.findingsTotal.crashes >= 1, "the treasure");
      assert.deepEqual(v.findings.map((f) => f.signature), stats.findings.groups.map((g) => g.signature));
      const detail = JSON.parse((await get(ui.url + "failure/1")).body) as { report: string; repro: string };
      assert.match(detail.report, /maze: the treasure/);
      assert.equal((await get(ui.url + "failure/99")).status, 404);
      const fams = parseExposition((await get(ui.url + "metrics")).body);
      assert.equal(fams.get("fuzzfleet_up")!.samples[0]!.value, 0);
      assert.equal(fams.get("fuzzfleet_explore_executions_total")!.samples[0]!.value, stats.observations);
      assert.equal(fams.get("fuzzfleet_explore_generated_inputs_total")!.samples[0]!.value, stats.generated);
    } finally {
      assert.equal(await ui.stop(), 0);
    }
    assert.deepEqual(snapshotTree(clean.corpus), before, "nothing beside the corpus changed");
  });

  test("an interrupted campaign: its lease records give the frontier, the counts and the history", async () => {
    stopped.seed("hello", "hello, maze!!!!\n");
    stopped.seed("door", "DDRRRU..........");
    const m = stopped.start(["-j", "1", "--max-idle", "30"], mazeTarget(stopped), { MAZE_COST_MS: "30" });
    const end = Date.now() + 60_000;
    while (!/\d+ initial input\(s\) seen/.test(m.output()) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    // Some tasks done and their children generated, the maze's frontier far from exhausted.
    while (executions(stopped.corpus) < 10 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    assert.ok(executions(stopped.corpus) >= 10, `ten executions within a minute\n${m.output()}`);
    m.child.kill("SIGINT");
    const done = await m.done;
    assert.equal(done.code, 6, `interrupted before the frontier was exhausted (docs/exit-codes.md)\n${m.output()}`);
    const ui = await served(stopped, ["--corpus", stopped.corpus]);
    try {
      const s = JSON.parse((await get(ui.url + "snapshot.json")).body) as DashboardSnapshot;
      const v = s.explore!;
      assert.match(s.status.headline, /unfinished epoch\(s\) kept for --resume/);
      assert.ok(v.frontier.done > 0, `done records: ${JSON.stringify(v.frontier)}`);
      assert.equal(v.totals.executions, v.frontier.done, "every done record has its ledger line");
      assert.ok(v.totals.generated !== null && v.totals.generated > 0);
      assert.ok(v.totals.unique !== null && v.totals.unique > 0 && v.totals.unique <= v.totals.generated!);
      assert.ok(v.series.t.length > 0);
      assert.equal(v.series.generated.at(-1), v.totals.generated);
      assert.equal(v.series.unique.at(-1), v.totals.unique);
    } finally {
      assert.equal(await ui.stop(), 0);
    }
  });

  test("a symlink is never followed: --corpus on a link is refused, a linked state directory is not read", async () => {
    const link = join(stopped.dir, "corpus-link");
    symlinkSync(stopped.corpus, link);
    const refused = spawnUi(stopped, ["--corpus", link]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /symbolic link, which is never followed/);
    // A corpus whose .fuzzfleet is a link to another campaign's state.
    const other = new ExploreDir();
    try {
      other.seed("x", "x");
      const corpus = join(other.dir, "corpus");
      mkdirSync(corpus);
      symlinkSync(join(stopped.corpus, ".fuzzfleet"), join(corpus, ".fuzzfleet"));
      const ui = await served(other, ["--corpus", corpus]);
      try {
        const s = JSON.parse((await get(ui.url + "snapshot.json")).body) as DashboardSnapshot;
        assert.match(s.status.headline, /is not a directory \(a link\?\): it is not read/);
        assert.equal(s.explore!.frontier.done, 0);
        assert.equal(s.explore!.findingsTotal.inputs, 0);
      } finally {
        await ui.stop();
      }
    } finally {
      other.cleanup();
    }
  });
});

function spawnUi(e: ExploreDir, args: string[]): { code: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, "ui", "--listen", "127.0.0.1:0", ...args], { cwd: e.dir, encoding: "utf8", timeout: 30_000 });
  return { code: r.status, stderr: r.stderr };
}
