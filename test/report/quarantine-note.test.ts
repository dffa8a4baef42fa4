// Quarantine in status: counted per reason; the warning only for reasons that mean an invalid test
// (the generator's bug), never for inconclusive ones (a reference build that ran too long), and
// the caller's explanation where quarantine is expected (the demo's planted generator).
import assert from "node:assert/strict";
import { test } from "node:test";
import { renderStatus, type StatusData } from "../../src/report/status.ts";
import { failureTotals } from "../../src/report/failures.ts";
import type { QuarantineGroup } from "../../src/store/quarantine.ts";

const data = (reasons: QuarantineGroup[]): StatusData => ({
  generation: { id: 1, gen_hash: "ab".repeat(32), created_at: "2026-12-01T00:00:00Z", note: null },
  generator_now: null,
  app_build: null,
  current_build: null,
  lanes: [],
  totals: { seeds: 1000, seconds: 2, chunks: 3, aborted: 0, reissued: 0, quarantine: reasons.reduce((n, r) => n + r.count, 0) },
  app_builds: [],
  discovery: null,
  failures: [],
  pending: [],
  failure_totals: failureTotals([], []),
  minimize: { pending: 0, running: 0, failed: 0, done: 0, units: 0, unit_seconds: 0 },
  quarantine_reasons: reasons,
  stale_failures: 0,
  quarantine_samples: "/c/q",
  sessions: [],
});

const invalid = { reason: "stack underflow at line 3", inconclusive: false, count: 2 };
const slow = { reason: "reference binary ran over 10 s", inconclusive: true, count: 25 };

test("status: invalid tests are an alarm that names their reasons", () => {
  assert.match(
    renderStatus(data([invalid])),
    /^QUARANTINE: 2 test\(s\) the generator emitted were invalid \(stack underflow at line 3: 2\) — its\n {2}verdicts are only trustworthy while this is 0\. Samples: \/c\/q$/m,
  );
});

test("status: inconclusive tests are counted by reason without the warning; mixed, only the invalid ones warn", () => {
  const only = renderStatus(data([slow]));
  assert.match(only, /^quarantine: 25 inconclusive test\(s\), no verdict \(not a generator bug\): reference binary ran over 10 s: 25$/m);
  assert.doesNotMatch(only, /QUARANTINE|trustworthy/);
  const mixed = renderStatus(data([slow, invalid]));
  assert.match(mixed, /^quarantine: 25 inconclusive/m);
  assert.match(mixed, /^QUARANTINE: 2 test\(s\) the generator emitted were invalid \(stack underflow at line 3: 2\)/m);
});

test("status: where quarantine is expected, the caller's explanation replaces the warning", () => {
  const explained = renderStatus(data([invalid]), { quarantineNote: "on purpose" });
  assert.match(explained, /^quarantine: 2 — on purpose \(stack underflow at line 3: 2\)\. Samples: \/c\/q$/m);
  assert.doesNotMatch(explained, /QUARANTINE|trustworthy/);
  assert.doesNotMatch(renderStatus(data([]), { quarantineNote: "on purpose" }), /quarantine/i);
});
