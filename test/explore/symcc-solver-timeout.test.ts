// What the SymCC fixture's children depend on besides its input: QSYM gives Z3 a wall-clock
// timeout (10 s) per solver check, and a check that times out answers "unknown", after which the
// runtime solves the negated branch alone ("optimistic") and writes other children, or fewer. A
// run frozen inside a check past that timeout shows it; frozen between checks, or not at all, it
// writes exactly its children. This is why the exploration's reference figures (fixture README)
// hold only while no check of any run outlives 10 s, and why the SymCC test's explanation of a
// differing count looks for such a check in the runs' logs. Needs Debian's libz3-4.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { checksAnnounced, FIXTURE, longestCheck, requireRuntime, runDirect, runFrozenAt, SOLVER_TIMEOUT_US, type DirectRun } from "./symcc-fixture.ts";

// Longer than QSYM's solver timeout, so that a check under way when the run is stopped times out.
const FREEZE_MS = SOLVER_TIMEOUT_US / 1000 + 500;
// A stop can land after the check it aims at has ended (a check takes a few ms): that check is
// frozen again, up to this many times in all.
const ATTEMPTS = 5;

interface Frozen {
  input: string;
  check: number;
  run: DirectRun;
}

const timedOut = (r: DirectRun): boolean => longestCheck(r.log) >= SOLVER_TIMEOUT_US;

test("tlv-symcc writes other children only when a solver check outlives QSYM's 10 s timeout, and its log shows that check", { timeout: 5 * 60_000 }, async () => {
  requireRuntime();
  const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-symcc-timeout-"));
  try {
    const seeds = ["seed-a", "seed-k"].map((n) => join(FIXTURE, "seeds", n));
    const unfrozen = new Map<string, DirectRun>();
    for (const [i, input] of seeds.entries()) {
      const first = runDirect(input, join(dir, `plain-${i}`));
      const second = runDirect(input, join(dir, `again-${i}`));
      assert.deepEqual(second.children, first.children, `two undisturbed runs of ${input} write the same children`);
      assert.ok(!timedOut(first), `an undisturbed run has no check of 10 s: ${first.log}`);
      unfrozen.set(input, first);
    }
    // Every check of both seeds, each frozen in its own run (the runs wait in parallel).
    let pending = seeds.flatMap((input) => Array.from({ length: checksAnnounced(unfrozen.get(input)!.log) }, (_, k) => ({ input, check: k + 1 })));
    const frozen: Frozen[] = [];
    for (let attempt = 1; attempt <= ATTEMPTS && pending.length > 0; attempt++) {
      const runs = await Promise.all(pending.map((p, i) => runFrozenAt(p.input, join(dir, `frozen-${attempt}-${i}`), p.check, FREEZE_MS)));
      const landed = pending.map((p, i) => ({ ...p, run: runs[i]! }));
      // A run whose stop missed its check is checked like the others, then its check tried again.
      frozen.push(...landed);
      pending = landed.filter((f) => !timedOut(f.run)).map(({ input, check }) => ({ input, check }));
    }
    const differs = (f: Frozen) => JSON.stringify(f.run.children) !== JSON.stringify(unfrozen.get(f.input)!.children);
    const unexplained = frozen.filter((f) => differs(f) && !timedOut(f.run));
    assert.deepEqual(unexplained.map((f) => `${f.input} check ${f.check}`), [], "children differ only in a run whose log shows a check of 10 s or more");
    const changed = frozen.filter((f) => differs(f) && timedOut(f.run));
    assert.ok(
      frozen.some((f) => timedOut(f.run)) && changed.length > 0,
      `a check frozen past the solver's timeout changes what the run writes (${frozen.filter((f) => timedOut(f.run)).length} of ${frozen.length} runs had a check time out; ${changed.length} wrote other children)`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
