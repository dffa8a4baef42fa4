// status's section of coverage per app build (sweep/views/builds.ts), from plain values: the
// ranges in seed order, the ones below those shown counted, a range above the cursor marked as not
// coverage, chunks that named no build named so, and the current build's share of the prefix.
import assert from "node:assert/strict";
import { test } from "node:test";
import { buildLines, buildsNamed, rangesText } from "../../src/sweep/views/builds.ts";

test("a lane's line counts the earlier ranges, marks the current build and a range ahead of the cursor", () => {
  const builds = {
    ranges: [
      { app_build: null, seed_from: 1_001, seed_to: 2_000, ahead: false },
      { app_build: "aaaaaaaaaaaa", seed_from: 2_001, seed_to: 3_000, ahead: false },
      { app_build: "bbbbbbbbbbbb", seed_from: 3_001, seed_to: 3_500, ahead: false },
      { app_build: "bbbbbbbbbbbb", seed_from: 4_001, seed_to: 4_200, ahead: true },
    ],
    earlier_ranges: 3,
    current_build_covered: 500,
  };
  assert.deepEqual(buildLines([{ name: "small", covered: 3_500, builds }, { name: "fresh", covered: 0, builds: null }], "bbbbbbbbbbbb"), [
    "seed ranges by app build (current build: bbbbbbbbbbbb):",
    "  small            … 3 earlier ranges, 1,001..2,000 (no build named), 2,001..3,000 aaaaaaaaaaaa, 3,001..3,500 bbbbbbbbbbbb (current), " +
      "4,001..4,200 bbbbbbbbbbbb (current) (ahead, not coverage)",
    "                   current build: 500 of 3,500 covered seeds (14.3%)",
  ]);
  assert.equal(rangesText({ ranges: [], earlier_ranges: 0, current_build_covered: 0 }, null), "nothing swept");
});

test("the section is shown only when a build is named somewhere", () => {
  const unnamed = { ranges: [{ app_build: null, seed_from: 1, seed_to: 9, ahead: false }], earlier_ranges: 0, current_build_covered: 9 };
  assert.equal(buildsNamed([{ builds: unnamed }], null), false, "no [app], ever: nothing to say");
  assert.equal(buildsNamed([{ builds: unnamed }], "aaaaaaaaaaaa"), true, "[app] set now: the prefix was swept under no build");
  assert.equal(buildsNamed([{ builds: { ...unnamed, ranges: [{ ...unnamed.ranges[0]!, app_build: "aaaaaaaaaaaa" }] } }], null), true, "[app] removed since");
});
