// The growth history's writer: the periodic rewrite is made in libuv's pool and renamed on the
// loop, and close() writes the last point after any rewrite still under way, so the file ends
// where the final statistics do and no temporary file is left behind.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { HISTORY_SCHEMA, historyDir, historyName, HistoryWriter, type HistoryFile } from "../../src/explore/state/history.ts";

function setUp(): { state: string; counters: { observations: number; generated: number; claimedChildren: number }; done: () => void } {
  const state = mkdtempSync(join(tmpdir(), "ff-history-"));
  return { state, counters: { observations: 0, generated: 0, claimedChildren: 0 }, done: () => rmSync(state, { recursive: true, force: true }) };
}

function read(state: string): HistoryFile {
  return JSON.parse(readFileSync(join(historyDir(state), historyName("e1", 0)), "utf8")) as HistoryFile;
}

test("a running writer rewrites the file every few samples; close() leaves the last point and no temporary file", async () => {
  const { state, counters, done } = setUp();
  const logged: string[] = [];
  try {
    const w = new HistoryWriter({ state, epoch: "e1", rank: 0, counters: () => ({ ...counters, corpus: 7 }), log: (l) => logged.push(l), sampleMs: 10 });
    const file = join(historyDir(state), historyName("e1", 0));
    for (let i = 1; !existsSync(file); i++) {
      counters.observations = i;
      await new Promise((r) => setTimeout(r, 10));
      assert.ok(i < 3000, "the periodic rewrite never appeared");
    }
    assert.equal(read(state).schema, HISTORY_SCHEMA);
    counters.observations = 1000;
    counters.generated = 2000;
    // close() right as the next rewrite may be in the pool: the last point still wins.
    await w.close();
    const last = read(state).points.at(-1)!;
    assert.deepEqual(last.slice(1), [1000, 2000, 0]);
    assert.equal(read(state).corpus, 7);
    assert.deepEqual(readdirSync(historyDir(state)), [historyName("e1", 0)], "no temporary file left");
    assert.deepEqual(logged, []);
  } finally {
    done();
  }
});

test("close() while a rewrite is in the pool waits for it, then writes the last point over it", async () => {
  const { state, counters, done } = setUp();
  try {
    // A sample every millisecond, so a rewrite is started every five and one is likely in the pool at close().
    const w = new HistoryWriter({ state, epoch: "e1", rank: 0, counters: () => counters, log: () => {}, sampleMs: 1 });
    for (let i = 0; i < 50; i++) {
      counters.observations = i;
      await new Promise((r) => setImmediate(r));
    }
    counters.observations = 99;
    await w.close();
    assert.equal(read(state).points.at(-1)![1], 99);
    assert.deepEqual(readdirSync(historyDir(state)), [historyName("e1", 0)]);
  } finally {
    done();
  }
});
