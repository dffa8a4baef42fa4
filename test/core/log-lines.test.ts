// printable() and LineThrottle, with plain values and a fake clock.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { LineThrottle, printable } from "../../src/core/log-lines.ts";

test("printable shows control characters as \\xNN and leaves other text alone", () => {
  assert.equal(printable("x\x1b[2J\x1b[H"), "x\\x1b[2J\\x1b[H");
  assert.equal(printable("evil\nREFUSED forged"), "evil\\x0aREFUSED forged");
  assert.equal(printable("a\rb\tc\x00d\x7fe\u009bf"), "a\\x0db\\x09c\\x00d\\x7fe\\x9bf");
  assert.equal(printable("tab\tkept", { tabs: true }), "tab\tkept");
  assert.equal(printable("C:\\path\\x41 é ü 日本 🐛"), "C:\\path\\x41 é ü 日本 🐛", "backslashes and printable Unicode pass");
});

test("printable shows line separators, bidirectional controls and lone surrogates as \\uNNNN", () => {
  assert.equal(printable("a\u2028b\u2029c"), "a\\u2028b\\u2029c");
  assert.equal(printable("x\u202ey\u2066z\u200f"), "x\\u202ey\\u2066z\\u200f");
  assert.equal(printable("lone \ud800 and \udc00"), "lone \\ud800 and \\udc00");
  assert.equal(printable("pair \ud83d\udc1b"), "pair \ud83d\udc1b");
});

test("printable cuts at max output characters and names what it cut, never splitting an escape or a pair", () => {
  assert.equal(printable("abcdefghij", { max: 4 }), "abcd… (+6 characters)");
  assert.equal(printable("ab\x1bcd", { max: 4 }), "ab… (+3 characters)", "a 4-character escape does not fit in the 2 left");
  assert.equal(printable("a🐛🐛", { max: 2 }), "a… (+2 characters)", "a surrogate pair is one character, kept whole or not at all");
  assert.equal(printable("x".repeat(600)).length, 500 + "… (+100 characters)".length, "the default bound");
  assert.equal(printable("short", { max: 0 }), "… (+5 characters)");
});

test("printable output never holds a control character, is bounded, and is a fixed point", () => {
  fc.assert(
    fc.property(fc.string({ unit: "binary", maxLength: 300 }), fc.integer({ min: 0, max: 400 }), (s, max) => {
      const out = printable(s, { max });
      assert.doesNotMatch(out, /[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
      assert.ok(out.length <= max + "… (+000 characters)".length);
      if (!out.includes("… (+")) assert.equal(printable(out, { max }), out);
    }),
    { numRuns: 300 },
  );
});

test("LineThrottle shows the first perWindow lines of a window and reports the rest once when it closes", () => {
  const t = new LineThrottle(2, 1000);
  assert.deepEqual(t.admit(0), { show: true, suppressed: 0 });
  assert.deepEqual(t.admit(10), { show: true, suppressed: 0 });
  assert.deepEqual(t.admit(20), { show: false, suppressed: 0 });
  assert.deepEqual(t.admit(999), { show: false, suppressed: 0 });
  assert.equal(t.windowEndsAt(), 1000);
  assert.equal(t.settle(999), 0, "the window is still open");
  assert.equal(t.settle(1000), 2);
  assert.equal(t.settle(1001), 0, "a count is reported once");
  assert.equal(t.windowEndsAt(), null);
  assert.deepEqual(t.admit(5000), { show: true, suppressed: 0 }, "a new window starts with the next line");
  assert.equal(t.windowEndsAt(), 6000);
});

test("LineThrottle hands an unsettled count to the first line of the next window; drain ends the window at once", () => {
  const t = new LineThrottle(1, 100);
  t.admit(0);
  t.admit(1);
  t.admit(2);
  assert.deepEqual(t.admit(150), { show: true, suppressed: 2 });
  assert.deepEqual(t.admit(160), { show: false, suppressed: 0 });
  assert.equal(t.drain(), 1);
  assert.equal(t.drain(), 0);
  assert.throws(() => new LineThrottle(0, 100), /perWindow/);
  assert.throws(() => new LineThrottle(1, 0), /windowMs/);
});
