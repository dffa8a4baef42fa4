// SweepConsole's lines: on a coordinator (lines of many workers interleaved) a chunk's result
// names its chunk, lane and range; on a single host it stays as short as before.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { InFlight, WorkerView } from "../../src/engine/sweep-engine.ts";
import type { IngestResult } from "../../src/generator/ingest.ts";
import { SweepConsole } from "../../src/report/sweep-console.ts";

const worker: WorkerView = { label: "vm#1", jobs: 2, workerId: 1, rates: new Map(), lastCount: new Map(), strikes: new Map(), broken: new Map(), disabled: new Set() };
const flight: InFlight = { chunkId: 17, lane: "small", laneId: 1, seedFrom: 4841, seedTo: 14560, worker, logPath: "/x.log", scratchDir: "/x", startedMs: 0, lastBeatMs: 0 };
const ingest = { finds: 0, newFailures: 0, reopened: 0, unshrunk: 0, quarantine: 0, malformed: [], refused: null } as unknown as IngestResult;

function lines(showWorker: boolean, act: (c: SweepConsole) => void): string[] {
  const out: string[] = [];
  const c = new SweepConsole({ live: null, write: (l) => out.push(l), remaining: () => 60, showWorker });
  act(c);
  c.close();
  return out;
}

test("a coordinator's chunk lines name the chunk, the lane and the range", () => {
  assert.deepEqual(
    lines(true, (c) => {
      c.chunkRecorded(flight, worker, ingest, 3, 208.8, 9720);
      c.chunkAborted(flight, worker, "timeout", 30, true);
    }),
    [
      "       chunk 17 small 4,841..14,560: 9,720 clean in 3s (208.8 seeds/s) from vm#1",
      "       chunk 17 (small 4,841..14,560) aborted on vm#1 (timeout) after 30s — range will be re-swept",
      "       see /x.log",
    ],
  );
});

test("a single host's lines stay short: the chunk's start line above already names it", () => {
  assert.deepEqual(
    lines(false, (c) => c.chunkRecorded(flight, worker, ingest, 3, 208.8, 9720)),
    ["       9,720 clean in 3s (208.8 seeds/s)"],
  );
});

test("a minimize unit that reopened a fixed failure says so on its own line; one that only merged stays quiet", () => {
  const unit = { unitId: 4, lane: "small", laneId: 1, seeds: [5, 9], worker, scratchDir: "/x", logPath: "/x.log", startedMs: 0, cutBySessionEnd: false, lastBeatMs: 0 };
  const out = lines(false, (c) => {
    c.minimizeRecorded(unit, { merged: 12, newFailures: 0, failed: 0, reopened: 0, aborted: null }, 4);
    c.minimizeRecorded(unit, { merged: 12, newFailures: 0, failed: 0, reopened: 2, aborted: null }, 4);
  });
  assert.equal(out.length, 1, out.join("\n"));
  assert.match(out[0]!, /^\[\d\d:\d\d:\d\d\] minimized small finds \(unit 4\): 12 merged, 2 reopened in 4s$/);
});
