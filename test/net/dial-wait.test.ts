// The dial's retry delays (net/dial-wait.ts): doubling from the first step to the cap, each one
// drawn from the upper half of its step, so ranks started together spread out and still back off.
import assert from "node:assert/strict";
import { test } from "node:test";
import { RETRY_FIRST_MS, RETRY_MAX_MS, retryDelayMs } from "../../src/net/dial-wait.ts";

test("retry delays double from 250 ms to the 4 s cap, jittered within the upper half of each step", () => {
  const steps = [250, 500, 1000, 2000, 4000, 4000, 4000];
  assert.equal(RETRY_FIRST_MS, steps[0]);
  assert.equal(RETRY_MAX_MS, 4000);
  steps.forEach((step, attempt) => {
    assert.equal(retryDelayMs(attempt, () => 0), step / 2, `attempt ${attempt}: the least`);
    assert.ok(retryDelayMs(attempt, () => 0.999999) < step && retryDelayMs(attempt, () => 0.999999) > step * 0.99, `attempt ${attempt}: the most`);
  });
  assert.equal(retryDelayMs(1000, () => 0.5), 3000, "a long wait stays at the cap");
  const drawn = new Set(Array.from({ length: 50 }, () => retryDelayMs(3)));
  assert.ok(drawn.size > 40, "two ranks rarely retry at the same moment");
  for (const d of drawn) assert.ok(d >= 1000 && d < 2000);
});
