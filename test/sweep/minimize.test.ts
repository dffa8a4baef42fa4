// Background minimization on one host, with the bundled planted generator and its --minimize
// mode: finds a chunk left unshrunk are pending minimization under their signature, never
// distinct failures; minimize units merge them into the planted distinct failures, each find
// once, and a unit killed with its process gives its finds back at the next start.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { exitForSummary } from "../helpers/books.ts";
import { Campaign, PLANTED, PLANTED_FORMS } from "../helpers/campaign.ts";


const gen = JSON.stringify(PLANTED);
// The sweep and the minimizer are the same generator; `env -u PLANTED_FIX` lets a test repair
// the bugs for the sweep only (no new finds) while the minimizer still sees them.
const generator = (minimize: string) => `[generator]
command = ["node", ${gen}, "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"]
identity = [${JSON.stringify(PLANTED.replace(/planted\.mjs$/, "*.mjs"))}]
check = ["node", ${gen}, "--check", "--seeds", "{seeds}", "--json"]
minimize = ${minimize}
`;
const MINIMIZE = `["env", "-u", "PLANTED_FIX", "node", ${gen}, "--minimize", "--seeds", "{seeds}", "--out", "{out}", "--jobs", "{jobs}"]`;

interface FailuresJson {
  failures: { id: number; bucket: string; hits: number; signature: string; artifact_dir: string }[];
  pending: { finds: number; hits: number }[];
  totals: { distinct: number; distinct_hits: number; pending_finds: number; pending_hits: number; hits: number };
}

describe("a planted sweep with a shrink cap of 1 converges to the planted distinct failures", () => {
  const c = new Campaign({
    defaults: { max_shrinks: 1, chunk_minutes: 0.05 },
    costMs: 1,
    generator: generator(MINIMIZE),
    extra: "[minimize]\nshare = 1\nbatch = 32\n",
  });
  after(() => c.cleanup());

  test("finds pending minimization are counted apart, then minimized into the planted forms, each once", () => {
    const first = c.cli(["run", "--for", "8s"]);
    assert.equal(first.code, 1, first.stderr);
    const finds = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure_seed").n;
    const unshrunk = c.one<{ n: number }>("SELECT COALESCE(SUM(unshrunk), 0) AS n FROM chunk WHERE status = 'complete'").n;
    assert.ok(unshrunk >= 10, `the cap left many finds unshrunk (${unshrunk} of ${finds})`);
    const mid = JSON.parse(c.cli(["failures", "--json"]).stdout) as FailuresJson;
    assert.equal(mid.totals.hits, finds, "distinct and pending hits add up to every failing seed");
    assert.equal(mid.totals.distinct_hits + mid.totals.pending_hits, finds);

    // The sweep goes on with the bugs repaired, so only the minimizer still finds them: it drains the queue.
    const second = c.cli(["run", "--for", "15s"], { env: { PLANTED_FIX: "crash,wrong-result,hang-detected" } });
    assert.equal(second.code, exitForSummary(second.stdout), second.stdout + second.stderr);
    assert.match(second.stdout, /minimized: +\d+ find\(s\) in \d+ unit\(s\)/);
    const end = JSON.parse(c.cli(["failures", "--json"]).stdout) as FailuresJson;
    assert.equal(end.totals.pending_finds, 0, `every find was minimized: ${JSON.stringify(end.pending)}`);
    assert.equal(end.totals.hits, finds, "no find lost or counted twice");
    assert.ok(end.failures.length <= PLANTED_FORMS.size, `at most the ${PLANTED_FORMS.size} planted forms: ${end.failures.length}`);
    for (const f of end.failures) {
      const min = readFileSync(join(f.artifact_dir, "input.min.txt"), "utf8").trim();
      assert.ok(PLANTED_FORMS.has(min), `failure #${f.id} (${f.signature}) is a planted form:\n${min}`);
    }
    // Exactly once: every find that was pending was handed to one unit that completed, and is done.
    const twice = c.one<{ n: number }>(
      `SELECT COUNT(*) AS n FROM (SELECT m.failure_id FROM minimize_find m JOIN minimize_unit u ON u.id = m.unit_id
         WHERE u.status = 'complete' GROUP BY m.failure_id HAVING COUNT(*) > 1)`,
    ).n;
    assert.equal(twice, 0, "no find was minimized by two units");
    const states = c.query<{ s: string | null; n: number }>("SELECT minimize_state AS s, COUNT(*) AS n FROM failure GROUP BY minimize_state");
    assert.deepEqual(
      states.filter((r) => r.s !== null && r.s !== "done"),
      [],
      `only distinct failures and minimized finds remain: ${JSON.stringify(states)}`,
    );
    const status = JSON.parse(c.cli(["status", "--json"]).stdout) as { failure_totals: FailuresJson["totals"]; minimize: { done: number; pending: number } };
    assert.deepEqual(status.failure_totals, end.totals, "status counts what failures counts");
    assert.equal(status.minimize.pending, 0);
    assert.ok(status.minimize.done > 0);
    const text = c.cli(["failures"]).stdout;
    assert.equal(text.split("\n").filter((l) => l.startsWith("#")).length, end.failures.length, "one line per distinct failure");
    assert.match(text, new RegExp(`${end.failures.length} distinct failures? \\(${end.totals.distinct_hits} hits?\\) \\+ 0 finds pending minimization`));
  });
});

describe("a minimize unit killed with its process gives its finds back", () => {
  const c = new Campaign({
    defaults: { max_shrinks: 0, chunk_minutes: 0.05 },
    costMs: 1,
    // A minimizer that never finishes: the unit is still running when the process is killed.
    generator: generator(`["sh", "-c", "sleep 600", "{seeds}", "{out}"]`),
    extra: "[minimize]\nshare = 1\n",
  });
  after(() => c.cleanup());

  test("SIGKILL while a unit runs: the next start releases its finds, once, and a completed run books them", async () => {
    const child = c.spawn(["run", "--for", "30s"]);
    const deadline = Date.now() + 25_000;
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 300));
      try {
        if (c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE minimize_state = 'running'").n > 0) break;
      } catch {
        // The store is not there yet.
      }
    }
    const held = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE minimize_state = 'running'").n;
    assert.ok(held > 0, "a unit holds finds");
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    // The real minimizer this time, with the bugs repaired for the sweep.
    c.writeConfig({ defaults: { max_shrinks: 0, chunk_minutes: 0.05 }, costMs: 1, generator: generator(MINIMIZE), extra: "[minimize]\nshare = 1\nbatch = 64\n" });
    const next = c.cli(["run", "--for", "12s"], { env: { PLANTED_FIX: "crash,wrong-result,hang-detected" } });
    assert.equal(next.code, exitForSummary(next.stdout), next.stdout + next.stderr);
    assert.match(next.stdout + next.stderr, new RegExp(`${held} find\\(s\\) a minimize unit held when its process died wait for minimization again`));
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM minimize_unit WHERE status = 'aborted:lost'").n, 1);
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE minimize_state IN ('pending', 'running')").n, 0);
  });
});
