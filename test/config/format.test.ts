import { test } from "node:test";
import assert from "node:assert/strict";
import { formatInt, formatRate } from "../../src/config/format.ts";

test("formatInt groups thousands with commas", () => {
  const cases: [number, string][] = [
    [0, "0"],
    [7, "7"],
    [999, "999"],
    [1000, "1,000"],
    [10002983, "10,002,983"],
    [123456789012, "123,456,789,012"],
    [-1234567, "-1,234,567"],
    [1234.6, "1,235"],
  ];
  for (const [n, text] of cases) assert.equal(formatInt(n), text, `formatInt(${n})`);
});

test("formatRate prints one decimal, or - when there is no estimate", () => {
  assert.equal(formatRate(null), "-");
  assert.equal(formatRate(Number.NaN), "-");
  assert.equal(formatRate(0), "0.0");
  assert.equal(formatRate(12.345), "12.3");
  assert.equal(formatRate(3), "3.0");
  assert.equal(formatRate(1234.56), "1234.6");
});
