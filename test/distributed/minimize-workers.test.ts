// Background minimization on workers: a planted sweep with a shrink cap of 1, coordinated over
// real sockets on 127.0.0.1 with two real worker processes. Minimize units ride beside chunks
// within the share of the fleet's slots; the worker holding one is SIGKILLed mid-unit, the unit is
// taken back and its finds minimized by another unit, each find once; the campaign converges to
// the planted distinct failures and its books add up (finds = distinct hits + pending). A
// coordinator SIGKILLed while a worker holds a unit: the next one gives the unit's finds back.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, distributedTable, finished, PLANTED, PLANTED_FORMS, processesMentioning, start, startCoordinator, waitFor } from "../helpers/campaign.ts";


const gen = JSON.stringify(PLANTED);
// The minimizer sees the planted bugs whatever PLANTED_FIX says (so a session can repair them for
// the sweep only), and a worker started with SLOW_MINIMIZE set never finishes a unit.
const MINIMIZE = JSON.stringify([
  "sh",
  "-c",
  `[ -n "\${SLOW_MINIMIZE:-}" ] && sleep 600; exec env -u PLANTED_FIX node '${PLANTED}' --minimize --seeds "$1" --out "$2" --jobs "$3"`,
  "minimize",
  "{seeds}",
  "{out}",
  "{jobs}",
]);
const GENERATOR = `[generator]
command = ["node", ${gen}, "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"]
identity = [${JSON.stringify(PLANTED.replace(/planted\.mjs$/, "*.mjs"))}]
check = ["node", ${gen}, "--check", "--seeds", "{seeds}", "--json"]
minimize = ${MINIMIZE}
`;

interface FailuresJson {
  failures: { id: number; signature: string; artifact_dir: string }[];
  pending: { finds: number; hits: number }[];
  totals: { distinct: number; distinct_hits: number; pending_finds: number; pending_hits: number; hits: number };
}

interface UnitRow {
  id: number;
  worker_id: number;
  status: string;
}

test("two workers, one SIGKILLed while it holds a minimize unit: the unit is taken back and the finds converge to the planted distinct failures, each minimized once", async () => {
  const c = new Campaign({
    defaults: { max_shrinks: 1, chunk_minutes: 0.05, bootstrap_seeds: 200 },
    costMs: 1,
    generator: GENERATOR,
    // Half of two slots: one unit at a time fleet-wide, the other slot keeps sweeping.
    extra: `${distributedTable({ lease: 20, stopGrace: 10 })}\n[minimize]\nshare = 0.5\nbatch = 16\n`,
  });
  try {
    const coord = await startCoordinator(c, ["--for", "35s"]);
    const master = `127.0.0.1:${coord.port}`;
    const slow = start(c, ["worker", "--master", master, "-j", "1"], { SLOW_MINIMIZE: "1" });
    const slowId = await waitFor("the first worker to join", () => c.query<{ id: number }>("SELECT id FROM worker ORDER BY id")[0]?.id);
    const fast = start(c, ["worker", "--master", master, "-j", "1"]);
    const held = await waitFor(
      "the first worker to hold a minimize unit",
      () => c.query<UnitRow>("SELECT id, worker_id, status FROM minimize_unit WHERE worker_id = ? AND status = 'leased'", slowId)[0],
      30_000,
    );
    const heldFinds = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM minimize_find WHERE unit_id = ?", held.id).n;
    assert.ok(heldFinds > 0);
    // The share holds: never more units out than one slot of the two.
    assert.ok(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM minimize_unit WHERE status = 'leased'").n <= 1, "at most floor(0.5 x 2 slots) units at once");
    slow.child.kill("SIGKILL");
    await waitFor("the killed worker's minimizer to die", () => (processesMentioning(join(c.outDir, "tmp", `minimize-${held.id}`)).length === 0 ? true : undefined), 15_000);
    await waitFor("the unit to be taken back", () => (c.one<UnitRow>("SELECT status FROM minimize_unit WHERE id = ?", held.id).status === "reissued" ? true : undefined), 15_000);
    await waitFor(
      "the other worker to minimize the finds the killed one held",
      () =>
        c.one<{ n: number }>(
          `SELECT COUNT(*) AS n FROM minimize_find m JOIN minimize_unit u ON u.id = m.unit_id
            WHERE u.status = 'complete' AND m.failure_id IN (SELECT failure_id FROM minimize_find WHERE unit_id = ?)`,
          held.id,
        ).n === heldFinds
          ? true
          : undefined,
      30_000,
    );
    const [rc, rf] = await Promise.all([finished(coord, 90_000, "the coordinator"), finished(fast, 90_000, "the worker")]);
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assert.equal(rf.code, 0, rf.stdout + rf.stderr);
    assert.match(rf.stdout, /minimize unit \d+: .* — complete \(rc [01]\) in .* \(recorded\)/, "the worker ran and reported minimize units");
    const fastId = c.one<{ id: number }>("SELECT MAX(id) AS id FROM worker WHERE session_id = (SELECT MAX(id) FROM session)").id;
    assert.ok(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM minimize_unit WHERE worker_id = ? AND status = 'complete'", fastId).n > 0);
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM minimize_unit WHERE status IN ('running', 'leased')").n, 0, "nothing left held");

    // A second session with the bugs repaired for the sweep: only the queue of pending finds remains.
    const coord2 = await startCoordinator(c, ["--for", "20s"]);
    const worker2 = start(c, ["worker", "--master", `127.0.0.1:${coord2.port}`, "-j", "1"], { PLANTED_FIX: "crash,wrong-result,hang-detected" });
    const [rc2, rw2] = await Promise.all([finished(coord2, 90_000, "the second coordinator"), finished(worker2, 90_000, "the second worker")]);
    assert.equal(rc2.code, exitOwed(c, rc2.stdout), rc2.stdout + rc2.stderr);
    assert.equal(rw2.code, 0, rw2.stdout + rw2.stderr);

    const finds = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure_seed").n;
    const end = JSON.parse(c.cli(["failures", "--json"]).stdout) as FailuresJson;
    assert.equal(end.totals.pending_finds, 0, `every find was minimized: ${JSON.stringify(end.pending)}`);
    assert.equal(end.totals.hits, finds, "no find lost or counted twice");
    assert.equal(end.totals.distinct_hits + end.totals.pending_hits, finds, "finds = distinct hits + pending");
    assert.ok(end.failures.length >= 1 && end.failures.length <= PLANTED_FORMS.size, `at most the ${PLANTED_FORMS.size} planted forms: ${end.failures.length}`);
    for (const f of end.failures) {
      const min = readFileSync(join(f.artifact_dir, "input.min.txt"), "utf8").trim();
      assert.ok(PLANTED_FORMS.has(min), `failure #${f.id} (${f.signature}) is a planted form:\n${min}`);
    }
    const twice = c.one<{ n: number }>(
      `SELECT COUNT(*) AS n FROM (SELECT m.failure_id FROM minimize_find m JOIN minimize_unit u ON u.id = m.unit_id
         WHERE u.status = 'complete' GROUP BY m.failure_id HAVING COUNT(*) > 1)`,
    ).n;
    assert.equal(twice, 0, "no find was minimized by two units");
    const status = JSON.parse(c.cli(["status", "--json"]).stdout) as { failure_totals: FailuresJson["totals"]; minimize: { pending: number; done: number } };
    assert.deepEqual(status.failure_totals, end.totals, "status counts what failures counts");
    assert.equal(status.minimize.pending, 0);
  } finally {
    c.cleanup();
  }
});

test("a coordinator SIGKILLed while a worker holds a minimize unit: the next coordinator gives its finds back and a worker minimizes them", async () => {
  const c = new Campaign({
    defaults: { max_shrinks: 0, chunk_minutes: 0.05, bootstrap_seeds: 200 },
    costMs: 1,
    generator: GENERATOR,
    extra: `${distributedTable({ lease: 20, stopGrace: 10 })}\n[minimize]\nshare = 1\nbatch = 8\n`,
  });
  try {
    const coord = await startCoordinator(c, ["--for", "5m"]);
    const slow = start(c, ["worker", "--master", `127.0.0.1:${coord.port}`, "-j", "1"], { SLOW_MINIMIZE: "1" });
    const held = await waitFor("the worker to hold a minimize unit", () => c.query<UnitRow>("SELECT id, worker_id, status FROM minimize_unit WHERE status = 'leased'")[0], 30_000);
    const heldFinds = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM minimize_find WHERE unit_id = ?", held.id).n;
    coord.child.kill("SIGKILL");
    const lost = await finished(slow, 30_000, "the worker");
    assert.equal(lost.code, 4, "a worker that loses its coordinator exits 4");
    await waitFor("the worker's minimizer to die", () => (processesMentioning(join(c.outDir, "tmp", `minimize-${held.id}`)).length === 0 ? true : undefined), 15_000);

    const next = await startCoordinator(c, ["--for", "15s"], { PLANTED_FIX: "crash,wrong-result,hang-detected" });
    const worker = start(c, ["worker", "--master", `127.0.0.1:${next.port}`, "-j", "1"], { PLANTED_FIX: "crash,wrong-result,hang-detected" });
    const [rc, rw] = await Promise.all([finished(next, 90_000, "the next coordinator"), finished(worker, 90_000, "the worker")]);
    assert.equal(rw.code, 0, rw.stdout + rw.stderr);
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assert.match(rc.stdout + rc.stderr, new RegExp(`${heldFinds} find\\(s\\) a minimize unit held when its process died wait for minimization again`));
    assert.equal(c.one<UnitRow>("SELECT status FROM minimize_unit WHERE id = ?", held.id).status, "aborted:lost");
    const redone = c.one<{ n: number }>(
      `SELECT COUNT(*) AS n FROM minimize_find m JOIN minimize_unit u ON u.id = m.unit_id
        WHERE u.status = 'complete' AND m.failure_id IN (SELECT failure_id FROM minimize_find WHERE unit_id = ?)`,
      held.id,
    ).n;
    assert.equal(redone, heldFinds, "a unit of the next session minimized every find the lost one held");
  } finally {
    c.cleanup();
  }
});
