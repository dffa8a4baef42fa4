// Quarantine in status: counted per reason; the warning only for reasons that mean an invalid test
// (the generator's bug), never for inconclusive ones (a reference build that ran too long), and
// the caller's explanation where quarantine is expected (the demo's planted generator).
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { renderStatus, type StatusData } from "../../src/sweep/views/status.ts";
import { failureTotals } from "../../src/sweep/views/failures.ts";
import type { QuarantineGroup } from "../../src/store/quarantine.ts";
import { exitOwed } from "../helpers/books.ts";
import { Campaign } from "../helpers/campaign.ts";

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

test("status: invalid tests emitted on purpose ('planted:') are counted without the warning; others beside them still warn", () => {
  const planted = { reason: "planted: stack underflow, 1 test in 1,000", inconclusive: false, count: 3 };
  const only = renderStatus(data([planted]));
  assert.match(only, /^quarantine: 3 invalid test\(s\) the generator emitted on purpose: planted: stack underflow, 1 test in 1,000: 3$/m);
  assert.doesNotMatch(only, /QUARANTINE|trustworthy/);
  const mixed = renderStatus(data([planted, invalid]));
  assert.match(mixed, /^QUARANTINE: 2 test\(s\) the generator emitted were invalid \(stack underflow at line 3: 2\)/m);
  assert.match(mixed, /^quarantine: 3 invalid test\(s\) the generator emitted on purpose/m);
});

describe("the bundled example's planted invalid tests", () => {
  // Seeds 1..3,000 of the small lane hold five planted slips (examples/planted/README.md).
  const c = new Campaign({ defaults: { bootstrap_seeds: 3000 } });
  after(() => c.cleanup());

  test("run's chunk line, its summary and status count them without the warning to fix the generator", () => {
    const r = c.cli(["run", "--for", "6s"]);
    assert.equal(r.code, exitOwed(c, r.stdout), r.stdout + r.stderr);
    assert.match(r.stdout, /^ +[\d,]+ clean, .* [1-9]\d* quarantined/m, r.stdout);
    assert.match(r.stdout, /^ {2}quarantine: +[1-9]\d* invalid test\(s\) the generator emitted on purpose \(planted: stack underflow/m, r.stdout);
    assert.doesNotMatch(r.stdout, /QUARANTINE|before trusting/, r.stdout);
    const status = c.cli(["status"]);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /^quarantine: [1-9]\d* invalid test\(s\) the generator emitted on purpose: planted: /m, status.stdout);
    assert.doesNotMatch(status.stdout, /QUARANTINE|trustworthy/, status.stdout);
  });
});
