// SweepConsole's lines: on a coordinator (lines of many workers interleaved) a chunk's result
// names its chunk, lane and range; on a single host it stays as short as before.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Assignment, InFlight, WorkerView } from "../../src/sweep/engine/sweep-engine.ts";
import type { IngestResult } from "../../src/sweep/generator/ingest.ts";
import { SweepConsole } from "../../src/sweep/views/console.ts";

const worker: WorkerView = { label: "vm#1", jobs: 2, workerId: 1, rates: new Map(), lastCount: new Map(), strikes: new Map(), broken: new Map(), disabled: new Set() };
const flight: InFlight = { chunkId: 17, lane: "small", laneId: 1, seedFrom: 4841, seedTo: 14560, worker, logPath: "/x.log", scratchDir: "/x", startedMs: 0, cutBySessionEnd: false, lastBeatMs: 0 };
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

function drawn(rate: number | null, act: (c: SweepConsole) => void): string {
  let last = "";
  const live = Object.assign((text: string) => void (last = text), { clear: () => {} });
  const c = new SweepConsole({ live, write: () => {}, remaining: () => 239 });
  act(c);
  c.close();
  return last;
}
const rated = (rate: number | null): WorkerView => ({ ...worker, rates: new Map([["small", rate]]) });
// A chunk of 2,000 seeds started with 4 minutes left: its target is the time left, its expected time 2,000 / rate.
const chunk = { chunkId: 3, lane: "small", laneId: 1, seedFrom: 1, seedTo: 2000, argv: [], cwd: "/", scratchDir: "/x", logPath: "/x.log", targetSeconds: 239, hardTimeoutSeconds: 717, nice: 0, idleIo: false } as unknown as Assignment;

test("the live chunk progress is against the chunk's expected time (its seeds at the lane's rate), not the time left", () => {
  const text = drawn(100, (c) => c.chunkStarted(chunk, rated(100), 239));
  assert.match(text, /chunk {4}\[\.{24}\] small 1\.\.2,000 {2}0% of ~20s expected \(0s\) {2}finds so far \?/);
});

test("a lane's first chunk, with no rate, draws no bar and says why; the session line does not read 0 seeds/s meanwhile", () => {
  const text = drawn(null, (c) => c.chunkStarted(chunk, rated(null), 239));
  assert.match(text, /chunk {4}small 1\.\.2,000 {2}0s, the lane's first chunk: no rate to expect a time from yet/);
  assert.match(text, /session {2}first chunk running, no rate yet \| finds 0 \(0 new\) \| 3m59s left/);
  assert.doesNotMatch(text, /0\.0 seeds\/s/);
  const resumed = drawn(100, (c) => c.chunkStarted(chunk, rated(100), 239));
  assert.match(resumed, /session {2}first chunk running \(~100\.0 seeds\/s expected from the lane's last rate\)/);
});
