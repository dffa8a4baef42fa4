// The pending-minimization block that `status` and `failures` print: its counts read like every
// other count on the screen, with thousands separators.
import assert from "node:assert/strict";
import { test } from "node:test";
import { pendingLines, totalsLine } from "../../src/sweep/views/failures.ts";

test("the pending block and the totals line group thousands; seeds stay as typed", () => {
  const lines = pendingLines([
    { state: "open", bucket: "crash", signature: "TypeError at line N", finds: 1872, hits: 12345, running: 1024, failed: 1500, distinct: 2, first_seed: 1000264, lane_name: "small" },
  ]);
  assert.deepEqual(lines, [
    "pending minimization — not distinct failures yet (1,872 finds in 1 signature):",
    "  open  crash           1,872 finds hits 12,345 seed 1000264    TypeError at line N  (1,024 minimizing, 1,500 could not be minimized, 2 distinct failures known)",
    "",
  ]);
  assert.equal(
    totalsLine({ distinct: 3, distinct_hits: 4500, pending_finds: 1872, pending_hits: 12345, hits: 16845 }),
    "3 distinct failures (4,500 hits) + 1,872 finds pending minimization (12,345 hits) = 16,845 hits",
  );
});
