import { test } from "node:test";
import assert from "node:assert/strict";
import { formatDuration, parseDuration, parseSeconds } from "../../src/config/duration.ts";
import { UsageError } from "../../src/errors.ts";

test("parseDuration reads unit groups, bare minutes, decimals, case and whitespace", () => {
  const cases: [string, number][] = [
    ["2h", 7200],
    ["90m", 5400],
    ["45s", 45],
    ["1h30m", 5400],
    ["1h 30m", 5400],
    ["1h30m15s", 5415],
    ["1.5h", 5400],
    ["0.5m", 30],
    ["90", 5400],
    ["1.5", 90],
    ["  2H ", 7200],
    ["1H30M", 5400],
    ["2 h", 7200],
    ["30m1h", 5400],
  ];
  for (const [text, seconds] of cases) {
    assert.equal(parseDuration(text), seconds, `parseDuration(${JSON.stringify(text)})`);
  }
  assert.equal(parseDuration("0.6s"), 1, "fractions of a second round to the nearest second");
  assert.equal(Number.isInteger(parseDuration("0.01h")), true);
  assert.equal(parseDuration("0.01h"), 36);
});

test("parseDuration rejects malformed input with a message naming the input and examples", () => {
  for (const text of ["", "   ", "abc", "2d", "h", "1h30", "-5", "-1h", "1h-30m", "1..5h", "2 hours", "1e3", "5m and"]) {
    assert.throws(
      () => parseDuration(text),
      (err: unknown) => {
        assert.ok(err instanceof UsageError, `${JSON.stringify(text)} throws UsageError`);
        assert.equal(err.message, `bad duration '${text}' (try 2h, 90m, 1h30m, 45s)`);
        return true;
      },
    );
  }
});

test("parseDuration rejects a zero total", () => {
  for (const text of ["0", "0h", "0m0s", "0.4s", "0.0"]) {
    assert.throws(() => parseDuration(text), (err: unknown) => {
      assert.ok(err instanceof UsageError);
      assert.match(err.message, new RegExp(`^bad duration '${text.replace(/\./g, "\\.")}': must be at least one second`));
      return true;
    });
  }
});

test("formatDuration prints XhYYm from an hour, XmYYs from a minute, else Xs", () => {
  const cases: [number, string][] = [
    [0, "0s"],
    [9, "9s"],
    [59, "59s"],
    [60, "1m00s"],
    [282, "4m42s"],
    [3599, "59m59s"],
    [3600, "1h00m"],
    [7200, "2h00m"],
    [7259, "2h00m"],
    [5400, "1h30m"],
    [90000, "25h00m"],
    [9.9, "9s"],
    [-65, "-1m05s"],
  ];
  for (const [seconds, text] of cases) assert.equal(formatDuration(seconds), text, `formatDuration(${seconds})`);
});

test("formatDuration and parseDuration round-trip whole minutes and hours", () => {
  for (const seconds of [45, 60, 282, 3600, 5400, 86400]) {
    const text = formatDuration(seconds);
    assert.equal(parseDuration(text), seconds, text);
  }
});

test("parseSeconds: a bare number is seconds (fractions kept), or the duration syntax, unrounded", () => {
  const cases: [string, number][] = [
    ["90", 90],
    ["0.5", 0.5],
    ["0", 0],
    ["1s", 1],
    ["0.5s", 0.5],
    ["2m", 120],
    ["1h30m", 5400],
    [" 15S ", 15],
  ];
  for (const [text, seconds] of cases) assert.equal(parseSeconds(text), seconds, text);
  for (const bad of ["", "s", "1x", "-1", "1s2", "abc"]) assert.equal(parseSeconds(bad), null, bad);
});
