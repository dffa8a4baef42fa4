// How an explore campaign ends, said plainly: a per-run timeout that leaves no room in the wall
// budget is refused before anything runs; the end ("frontier exhausted", "wall budget reached")
// is printed and in --stats-json; a campaign whose target never writes a child says so.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ExploreDir } from "../helpers/explore.ts";

test("-t not shorter than --wall-timeout is refused (exit 2) naming both and the fix, and nothing is explored", () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "a\n");
    const r = e.run(["-t", "90", "--wall-timeout", "60"], [e.script("t.sh", "exit 0"), "@@"]);
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /-t 1m30s is not shorter than --wall-timeout 1m00s: no run could start and finish inside the budget.*shorter -t \(below 1m00s\) or a longer --wall-timeout/);
  } finally {
    e.cleanup();
  }
});

test("a target that writes no child: the frontier is exhausted, the end is said, and so is the missing children", () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "a\n");
    e.seed("b", "b\n");
    const r = e.run(["-j", "1", "--max-idle", "1"], [e.script("t.sh", "exit 0"), "@@"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /^ended: frontier exhausted$/m);
    assert.match(r.stdout, /^warning: no run produced a child input — check that the target writes its children/m);
    const s = e.stats() as unknown as { ended: string; observations: number; generated: number };
    assert.deepEqual([s.ended, s.observations, s.generated], ["frontier exhausted", 2, 0]);
  } finally {
    e.cleanup();
  }
});

test("a campaign stopped by its wall budget says so, distinct from an exhausted frontier", () => {
  const e = new ExploreDir();
  try {
    for (let i = 0; i < 40; i++) e.seed(`s${i}`, `${i}\n`);
    const r = e.run(["-j", "1", "-t", "1", "--wall-timeout", "2"], [e.script("t.sh", "sleep 0.2"), "@@"]);
    assert.equal(r.code, 5, "wall budget reached: exit 5, not the 0 of an exhausted frontier\n" + r.stdout + r.stderr);
    assert.match(r.stdout, /^ended: wall budget reached$/m);
    assert.equal((e.stats() as unknown as { ended: string }).ended, "wall budget reached");
  } finally {
    e.cleanup();
  }
});
