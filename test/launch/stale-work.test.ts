// What earlier explore campaigns left beside a corpus (explore/state/stale-work.ts): each work
// directory found, with the resume and the removal command; a link is not a work directory.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { findStaleWork, shellQuote, staleWorkLines } from "../../src/explore/state/stale-work.ts";

const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-stale "));
after(() => rmSync(dir, { recursive: true, force: true }));

test("work directories of earlier epochs are reported, oldest first, with --resume and the rm that removes them", () => {
  const state = join(dir, "corpus", ".fuzzfleet");
  const e1 = "a".repeat(64);
  const e2 = "b".repeat(64);
  for (const e of [e1, e2]) {
    mkdirSync(join(state, `work-${e}`, "leases"), { recursive: true });
    writeFileSync(join(state, `work-${e}`, "state.json"), "{}");
  }
  mkdirSync(join(state, "work-notanepoch"));
  symlinkSync(join(state, `work-${e1}`), join(state, "work-link"));
  writeFileSync(join(state, "fuzzfleet.token"), "x");
  const hour = Date.now() / 1000 - 3600;
  for (const p of [join(state, `work-${e1}`), join(state, `work-${e1}`, "leases"), join(state, `work-${e1}`, "state.json")]) utimesSync(p, hour, hour);
  const found = findStaleWork(state);
  assert.equal(found.length, 3, "the link is no work directory");
  assert.equal(found[0]!.epoch, e1);
  assert.ok(found[0]!.ageSeconds >= 3590);
  const lines = staleWorkLines(found);
  assert.match(lines[0]!, /^stale state: 3 earlier campaign\(s\) on this corpus did not end cleanly/);
  assert.ok(lines[1]!.startsWith(`  ${join(state, `work-${e1}`)} (last written `), lines[1]);
  assert.ok(lines[1]!.includes(` ago): continue it with --resume ${e1}, or remove it with: rm -rf -- `), lines[1]);
  assert.ok(lines[1]!.includes(`rm -rf -- ${shellQuote(join(state, `work-${e1}`))}`));
  assert.ok(lines.some((l) => l.includes("work-notanepoch") && !l.includes("--resume")), "a name that is no epoch cannot be resumed, only removed");
  assert.deepEqual(staleWorkLines(findStaleWork(join(dir, "nothing-here"))), []);
});

test("shellQuote makes one shell word of any path", () => {
  assert.equal(shellQuote("/srv/corpus/.fuzzfleet/work-ab"), "/srv/corpus/.fuzzfleet/work-ab");
  assert.equal(shellQuote("/tmp/a b/it's"), `'/tmp/a b/it'\\''s'`);
});
