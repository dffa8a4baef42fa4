// Where quarantine is expected (the demo's planted generator emits invalid tests on purpose), the
// reports say so in those words instead of the warning a real generator's quarantine deserves.
import assert from "node:assert/strict";
import { test } from "node:test";
import { renderStatus, type StatusData } from "../../src/report/status.ts";

const data = (quarantine: number): StatusData => ({
  generation: { id: 1, gen_hash: "ab".repeat(32), created_at: "2026-12-01T00:00:00Z", note: null },
  generator_now: null,
  app_build: null,
  lanes: [],
  totals: { seeds: 1000, seconds: 2, chunks: 3, aborted: 0, reissued: 0, quarantine },
  failures: [],
  stale_failures: 0,
  quarantine_samples: "/c/q",
  sessions: [],
});

test("status: a quarantine count is an alarm, or the caller's explanation where quarantine is expected", () => {
  assert.match(renderStatus(data(2)), /^QUARANTINE: 2 test\(s\) the generator emitted were invalid — its\n {2}verdicts are only trustworthy while this is 0\. Samples: \/c\/q$/m);
  const explained = renderStatus(data(2), { quarantineNote: "on purpose" });
  assert.match(explained, /^quarantine: 2 — on purpose\. Samples: \/c\/q$/m);
  assert.doesNotMatch(explained, /QUARANTINE|trustworthy/);
  assert.doesNotMatch(renderStatus(data(0), { quarantineNote: "on purpose" }), /quarantine/i);
});
