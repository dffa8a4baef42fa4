import assert from "node:assert/strict";
import { test } from "node:test";
import { randomHex } from "../../src/util/random-hex.ts";

test("randomHex gives 2 × bytes lowercase hex digits, fresh on every call across pool refills", () => {
  const seen = new Set<string>();
  // 3000 × 8 bytes spans several 4 KiB refills.
  for (let i = 0; i < 3000; i++) {
    const h = randomHex(8);
    assert.match(h, /^[0-9a-f]{16}$/);
    seen.add(h);
  }
  assert.equal(seen.size, 3000);
  assert.match(randomHex(4096), /^[0-9a-f]{8192}$/);
});

test("randomHex refuses sizes it cannot serve from its pool", () => {
  for (const bad of [0, -1, 1.5, 4097, Number.NaN]) assert.throws(() => randomHex(bad), assert.AssertionError);
});
