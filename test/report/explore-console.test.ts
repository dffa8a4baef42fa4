// The explore terminal view, rendered from a snapshot given as plain values: the AFL-style lines
// (frontier and its bar, rates, growth and redundancy, findings, masters, workers at a glance,
// the idle window), cut to the width and escaped; the one status line for a log; and the console
// drawing through a redraw function on a terminal and writing no escape code without one.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ExploreConsole, exploreStatusLine, renderExploreView } from "../../src/explore/views/console.ts";
import type { DashboardSnapshot, WorkerRow } from "../../src/ui/source.ts";

function snap(over: Partial<NonNullable<DashboardSnapshot["explore"]>> = {}, workers: WorkerRow[] = []): DashboardSnapshot {
  return {
    kind: "explore",
    title: "t",
    takenMs: 0,
    live: true,
    status: { headline: "h", elapsedSeconds: 75.4, budgetSeconds: 600, draining: null },
    sweep: null,
    workers,
    explore: {
      epoch: "ab".repeat(32),
      role: "lone master",
      frontier: { pending: 20, inputBacklog: 0, running: 2, leased: 22, committing: 1, expired: 0, done: 55, leaseCountsAgeSeconds: 1 },
      totals: { executions: 55, generated: 1000, unique: 120, redundant: 880, corpus: 140, externalInputs: 2, skippedExplored: 0, problems: 0 },
      rates: { executionsPerSecond: 7.04, generatedPerSecond: 93 },
      series: { t: [], executionsPerSecond: [], unique: [], generated: [], redundancy: [] },
      findings: [{ id: 1, signature: "signal 6 | boom\u001b[2J", kind: "crash", inputs: 3, timesSeen: 3, firstSeen: "a", lastSeen: "b", example: "c".repeat(64) }],
      findingsTotal: { inputs: 4, crashes: 3, hangs: 1, signatures: 2 },
      masters: [{ rank: 0, host: "vm", self: true, phase: "working" }],
      idle: { windowSeconds: 60, remainingSeconds: null },
      wall: null,
      ...over,
    },
  };
}

const worker = (label: string, liveness: WorkerRow["liveness"], busy: boolean): WorkerRow => ({ label, liveness, lastHeartbeatSeconds: 0, holding: busy ? [{ text: "task 1", ageSeconds: 1 }] : [], note: null });

test("the view: frontier with its bar, rates, growth and redundancy, findings, masters, workers and the idle window", () => {
  const lines = renderExploreView(snap({}, [worker("local-0", "alive", true), worker("local-1", "alive", false), worker("vm#1", "alive", true), worker("vm#2", "slow", true), worker("old#3", "left", false)]), 200);
  assert.equal(lines[0], `fuzzfleet explore ── epoch ${"ab".repeat(6)}… lone master ── 1m15s of 10m00s`);
  assert.equal(lines[1], "  frontier  pending 20 │ running 2 │ leased 22 │ committing 1 │ expired 0 │ done 55");
  assert.equal(lines[2], `            [${"#".repeat(21)}${".".repeat(9)}] 55 done of 78 known`);
  assert.equal(lines[3], "  rates     7.0 exec/s │ 93.0 generated/s");
  assert.equal(lines[4], "  growth    55 analysis observations │ 1,000 test cases generated │ 120 unique │ 880 redundant children (88.0%) │ corpus 140");
  assert.match(lines[5]!, /^ {2}findings {2}3 crashes, 1 hang under 2 signatures — top: signal 6 \| boom.* \(x3\)$/);
  assert.doesNotMatch(lines.join("\n"), /\u001b/, "text from outside cannot draw on the terminal");
  assert.equal(lines[6], "  masters   r0* working");
  assert.equal(lines[7], "  workers   2 local (1 busy) │ 3 remote: 1 alive, 1 slow, 1 left");
  assert.equal(lines[8], "  idle      window 1m00s, not counting: work in sight");
  assert.equal(lines.length, 9);
});

test("the idle window counting down, the wall budget, unknown counts, and every line cut to the width", () => {
  const lines = renderExploreView(snap({ idle: { windowSeconds: 3, remainingSeconds: 1.24 }, wall: { budgetSeconds: 600, remainingSeconds: 524.6 }, totals: { executions: 9, generated: null, unique: null, redundant: null, corpus: 3, externalInputs: null, skippedExplored: null, problems: null } }), 40);
  assert.ok(lines.every((l) => l.length <= 40), lines.join("\n"));
  const wide = renderExploreView(snap({ idle: { windowSeconds: 3, remainingSeconds: 1.24 }, wall: { budgetSeconds: 600, remainingSeconds: 524.6 } }), 200);
  assert.equal(wide.at(-2), "  idle      ends in 1.2s of 3s unless work appears");
  assert.equal(wide.at(-1), "  wall      8m45s left of 10m00s");
  const unknown = renderExploreView(snap({ totals: { executions: 9, generated: null, unique: null, redundant: null, corpus: 3, externalInputs: null, skippedExplored: null, problems: null } }), 200);
  assert.equal(unknown[4], "  growth    9 analysis observations │ – test cases generated │ – unique │ – redundant children │ corpus 3");
});

test("the status line for a log: one line, no escape code", () => {
  const line = exploreStatusLine(snap({ idle: { windowSeconds: 3, remainingSeconds: 2 } }, [worker("local-0", "alive", true)]), new Date(2026, 0, 1, 6, 4, 5));
  assert.equal(
    line,
    "[06:04:05] status: done 55, pending 20, running 2 | 7.0 exec/s | 120 unique of 1,000 generated (88.0%) | findings 4 (2 signatures) | workers 1 local (1 busy) | idle window 2.0s left",
  );
});

test("on a terminal the console redraws through log-update's function and clears before a log line; without one it writes plain lines only", () => {
  const drawn: string[] = [];
  let clears = 0;
  const live = Object.assign((text: string) => drawn.push(text), { clear: () => clears++ });
  const written: string[] = [];
  const c = new ExploreConsole({ snapshot: () => snap(), live, write: (l) => written.push(l), columns: () => 200 });
  c.redraw();
  assert.equal(drawn.length, 1);
  assert.match(drawn[0]!, /^fuzzfleet explore ── /);
  c.line("finding: 47da7305926c crash (signal 6)\u001b[31m");
  assert.equal(clears, 1, "the view is erased before the line");
  assert.deepEqual(written, ["finding: 47da7305926c crash (signal 6)\\x1b[31m"]);
  assert.equal(drawn.length, 2, "and drawn again below it");
  c.close();
  assert.equal(clears, 2, "closing erases the view");
  c.redraw();
  assert.equal(drawn.length, 2, "nothing is drawn once closed");

  const plain: string[] = [];
  const p = new ExploreConsole({ snapshot: () => snap(), live: null, write: (l) => plain.push(l) });
  p.line("a log line");
  p.redraw();
  p.close();
  assert.deepEqual(plain, ["a log line"]);
});
