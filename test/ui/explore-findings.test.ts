// Findings as the explore dashboard shows them: grouped by signature, largest group first, with
// their counts and sightings; and a repro line quoted for a POSIX shell, the input in @@'s place
// or on stdin.
import assert from "node:assert/strict";
import { test } from "node:test";
import { findingsView, reproLine } from "../../src/explore/views/finding-groups.ts";

const rec = (hash: string, signature: string, first: string, last: string, times = 1) => ({
  input_hash: hash.repeat(64),
  signature,
  kind: signature.startsWith("timeout") ? ("hang" as const) : ("crash" as const),
  times_seen: times,
  first_seen: first,
  last_seen: last,
});

test("groups by signature, largest first, with counts, first and last sightings and an example", () => {
  const v = findingsView([rec("a", "signal 6 | boom", "2026-01-01T00:00:02Z", "2026-01-01T00:00:05Z", 2), rec("b", "timeout", "2026-01-01T00:00:03Z", "2026-01-01T00:00:03Z"), rec("c", "signal 6 | boom", "2026-01-01T00:00:01Z", "2026-01-01T00:00:09Z")]);
  assert.deepEqual(v.findingsTotal, { inputs: 3, crashes: 2, hangs: 1, signatures: 2 });
  assert.deepEqual(
    v.findings.map((f) => [f.id, f.signature, f.kind, f.inputs, f.timesSeen, f.firstSeen, f.lastSeen, f.example[0]]),
    [
      [1, "signal 6 | boom", "crash", 2, 3, "2026-01-01T00:00:01Z", "2026-01-01T00:00:09Z", "a"],
      [2, "timeout", "hang", 1, 1, "2026-01-01T00:00:03Z", "2026-01-01T00:00:03Z", "b"],
    ],
  );
});

test("the repro line: @@ becomes the input's path, else the input goes on stdin; anything odd is quoted", () => {
  assert.equal(reproLine(["./target", "-x", "@@"], "/c/ab"), "./target -x /c/ab");
  assert.equal(reproLine(["./target", "--in=@@"], "/c/ab"), "./target --in=/c/ab");
  assert.equal(reproLine(["./my target", "$(rm -rf ~)", "it's"], "/c d/ab"), "'./my target' '$(rm -rf ~)' 'it'\\''s' < '/c d/ab'");
});
