// The live dashboard of an explore master over a corpus with 10,000 findings (forged quickly:
// test/report/long-explore-corpus.ts) as other masters of the fleet left them: each snapshot, on
// the master's own event loop, looks over a bounded slice of the finding records (it used to stat
// and read all ten thousand in one call), every finding still appears after enough snapshots, a
// finding the master records itself appears in the very next snapshot, and a record gone from the
// directory leaves the view once a pass has looked again. The work is counted (finding records
// stat'ed or read per snapshot, by wrapping the pinned directory the reader goes through), not
// timed.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { findingsDir } from "../../src/explore/state/findings.ts";
import { LeaseTable } from "../../src/explore/state/lease-table.ts";
import { stateDir } from "../../src/explore/state/work-dir.ts";
import type { ExploreMaster } from "../../src/explore/master/master.ts";
import { ExploreDashboardSource } from "../../src/explore/views/dashboard-source.ts";
import { PinnedDir } from "../../src/files/pinned-dir.ts";
import type { DashboardSnapshot } from "../../src/ui/source.ts";
import { loneMaster, TEST_BUILD } from "../helpers/explore.ts";
import { forgeLongExplore, objectHash } from "./long-explore-corpus.ts";

const FINDINGS = { findings: 10_000, signatures: 500, singletons: 120 };
const RECORD = /^[0-9a-f]{64}\.json$/;
/** Records a snapshot may look over (FINDINGS_PER_SNAPSHOT in dashboard-source.ts): a few ms of the loop. */
const FINDINGS_PER_SNAPSHOT = 250;

/** Finding records stat'ed or read through any pinned directory while `fn` runs (names, with repeats). */
function recordsTouched<T>(fn: () => T): { value: T; touched: number } {
  const proto = PinnedDir.prototype as unknown as Record<"lstat" | "readFile", (name: string, ...rest: unknown[]) => unknown>;
  const saved = { lstat: proto.lstat, readFile: proto.readFile };
  let touched = 0;
  for (const k of ["lstat", "readFile"] as const) {
    const orig = saved[k];
    proto[k] = function (this: unknown, name: string, ...rest: unknown[]) {
      if (RECORD.test(name)) touched++;
      return orig.call(this, name, ...rest);
    };
  }
  try {
    return { value: fn(), touched };
  } finally {
    proto.lstat = saved.lstat;
    proto.readFile = saved.readFile;
  }
}

describe("the live dashboard of an explore master over 10,000 findings", () => {
  const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-long-explore-live-"));
  const corpusDir = join(dir, "corpus");
  let master: ExploreMaster;
  let source: ExploreDashboardSource;
  let clock = 0;
  before(() => {
    const { epoch } = forgeLongExplore(corpusDir, { entries: 20, ...FINDINGS });
    const inputDir = join(dir, "seeds");
    mkdirSync(inputDir);
    const leases = new LeaseTable({ root: join(dir, "leases"), durability: "fence" });
    master = loneMaster({ dir, corpusDir, inputDir }, { leases, epoch });
    source = new ExploreDashboardSource({
      title: "explore",
      files: null,
      live: {
        master,
        leases,
        corpusDir,
        target: ["./target", "@@"],
        epoch,
        rank: 0,
        ranks: [0],
        role: "single",
        ending: () => null,
        slots: 1,
        remote: () => null,
        maxIdleSeconds: 5,
        wallTimeoutSeconds: 0,
        leaseTtlMs: 60_000,
        heartbeatSeconds: 5,
        // A second between snapshots, as the page's stream asks.
        now: () => clock,
        startMs: 0,
      },
    });
  });
  after(() => {
    master.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** One snapshot a second later, and the finding records it stat'ed or read. */
  function snap(): { s: DashboardSnapshot; touched: number } {
    clock += 1000;
    const { value, touched } = recordsTouched(() => source.snapshot());
    return { s: value, touched };
  }

  /** Snapshots until `done` holds, each within the bound; the last one. */
  function until(done: (s: DashboardSnapshot) => boolean, what: string): DashboardSnapshot {
    // A whole pass over the records, and one more for a pass that was under way.
    const calls = 2 * Math.ceil((FINDINGS.findings + 2) / FINDINGS_PER_SNAPSHOT) + 4;
    let most = 0;
    for (let i = 0; i < calls; i++) {
      const { s, touched } = snap();
      most = Math.max(most, touched);
      // A record looked over is stat'ed, and read when it changed: two touches at most.
      assert.ok(touched <= 2 * FINDINGS_PER_SNAPSHOT, `snapshot ${i + 1} stat'ed or read ${touched} finding records in one call (at most ${2 * FINDINGS_PER_SNAPSHOT})`);
      if (done(s)) return s;
    }
    assert.fail(`${what} after ${calls} snapshots (at most ${most} records touched per call)`);
  }

  test("each snapshot looks over a bounded slice of the records, and every finding appears", () => {
    const s = until((x) => x.explore!.findingsTotal.inputs === FINDINGS.findings, "not every finding appeared");
    assert.deepEqual(s.explore!.findingsTotal, { inputs: FINDINGS.findings, crashes: FINDINGS.findings, hangs: 0, signatures: FINDINGS.signatures });
    assert.equal(s.explore!.discovery!.singletons, FINDINGS.singletons);
  });

  test("a finding the master records appears in the next snapshot, while a pass is under way", () => {
    // A change to the directory starts a new pass over the ten thousand records.
    unlinkSync(join(findingsDir(stateDir(corpusDir)), `${objectHash(0)}.json`));
    const first = snap();
    assert.ok(first.touched <= 2 * FINDINGS_PER_SNAPSHOT, `${first.touched} records touched`);
    const hash = objectHash(FINDINGS.findings + 1);
    assert.equal(master.findings.record(hash, "f".repeat(16) + ":0:1:1", { kind: "hang", signal: null, exit_code: null, stderr_tail: "stuck\n" }, new Date(), TEST_BUILD), "new");
    const next = snap();
    assert.ok(next.touched <= 2 * FINDINGS_PER_SNAPSHOT, `${next.touched} records touched`);
    assert.equal(next.s.explore!.findingsTotal.hangs, 1, "the master's own finding is shown at once");
    assert.equal(next.s.explore!.findingsTotal.signatures, FINDINGS.signatures + 1);
  });

  test("a record gone from the directory leaves the view once a pass looked again; the master's own stays", () => {
    const s = until((x) => x.explore!.findingsTotal.inputs === FINDINGS.findings, "the removed finding is still shown");
    assert.deepEqual({ crashes: s.explore!.findingsTotal.crashes, hangs: s.explore!.findingsTotal.hangs }, { crashes: FINDINGS.findings - 1, hangs: 1 });
  });
});
