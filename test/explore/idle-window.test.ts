// A lone master's ending: the idle window opens only after a fresh rescan found nothing, ends the
// campaign exactly --max-idle later on the clock it is given, and closes again when work appears.
// A real master over real directories; the clock is the test's.
import assert from "node:assert/strict";
import { mkdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { IdleWindow } from "../../src/explore/fleet/endings.ts";
import type { ExploreMaster } from "../../src/explore/master/master.ts";
import { scratchDirs } from "../helpers/scratch.ts";
import { loneMaster } from "../helpers/explore.ts";

const { freshDir } = scratchDirs("idle-window");
const MAX_IDLE = 1000;

function setup(): { master: ExploreMaster; inputDir: string; window: IdleWindow; log: string[] } {
  const dir = freshDir();
  const inputDir = join(dir, "in");
  mkdirSync(inputDir);
  mkdirSync(join(dir, "corpus"));
  const master = loneMaster({ dir, corpusDir: join(dir, "corpus"), inputDir });
  const log: string[] = [];
  return { master, inputDir, window: new IdleWindow(master, MAX_IDLE, (line) => log.push(line)), log };
}

describe("IdleWindow", () => {
  it("ends exactly max-idle after the fresh rescan found nothing, and says how long it waited", () => {
    const { window, log } = setup();
    assert.equal(window.untilEnd(0), Infinity, "not idle yet: no deadline");
    assert.equal(window.step(5000, 0), null, "the rescan comes first");
    assert.equal(window.untilEnd(5000), MAX_IDLE);
    assert.equal(window.step(5999, 0), null);
    assert.equal(window.untilEnd(5999), 1);
    assert.equal(window.step(6000, 0), "idle");
    assert.deepEqual(log, ["no more work in sight — ending in 1s unless some appears", "no more inputs after 1.000s (limit 1s)"]);
  });

  it("work found on a turn closes the window; the next idle turn opens a new one", () => {
    const { window } = setup();
    window.step(0, 0);
    assert.equal(window.step(900, 1), null, "a turn that found work");
    assert.equal(window.untilEnd(900), Infinity);
    assert.equal(window.step(1000, 0), null, "a new window opens here");
    assert.equal(window.step(1999, 0), null);
    assert.equal(window.step(2000, 0), "idle");
  });

  it("an input that appears before the window opens is admitted by the rescan, and the master is not idle", () => {
    const { master, inputDir, window } = setup();
    writeFileSync(join(inputDir, "late"), "late\n");
    utimesSync(join(inputDir, "late"), new Date(Date.now() - 3600_000), new Date(Date.now() - 3600_000));
    assert.equal(window.step(0, 0), null);
    assert.equal(master.pendingCount, 1, "the rescan admitted it");
    assert.equal(window.untilEnd(0), Infinity, "no window while there is work");
    assert.equal(window.step(10_000, 0), null, "pending work keeps the campaign going, however long");
    assert.ok(master.nextTask("local-0"));
    assert.equal(master.idle, false, "a running task is not idle either");
    assert.equal(window.step(20_000, 0), null);
  });

  it("an input still being written holds the window shut until it settles and is admitted", () => {
    const { master, inputDir, window } = setup();
    writeFileSync(join(inputDir, "fresh"), "fresh\n");
    assert.equal(window.step(0, 0), null);
    assert.equal(master.pendingCount, 0, "not admitted yet: it may still change");
    assert.equal(master.idle, false, "a file settling is work in sight");
    assert.equal(window.untilEnd(0), Infinity, "no window while it settles");
    assert.equal(window.step(10_000, 0), null);
  });
});
