// Input admission waits until a file stopped changing: a producer that creates a file and writes
// it afterwards (AFL++'s queue) never has its empty or half-written file admitted or run, while a
// static directory of old seeds is admitted at first sight.
import assert from "node:assert/strict";
import { appendFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, it } from "node:test";
import { DEFAULT_BUDGETS } from "../../src/explore/defaults.ts";
import { InputAdmission, RELIST_MS, SETTLE_MS } from "../../src/explore/master/admission.ts";
import type { ExploreMaster } from "../../src/explore/master/master.ts";
import { ExploreDir, loneMaster } from "../helpers/explore.ts";
import { scratchDirs, sha256 } from "../helpers/scratch.ts";

const { freshDir } = scratchDirs("admission-settle");

function setup(): { master: ExploreMaster; inputDir: string; corpusDir: string } {
  const dir = freshDir();
  const inputDir = join(dir, "in");
  const corpusDir = join(dir, "corpus");
  mkdirSync(inputDir);
  mkdirSync(corpusDir);
  return { master: loneMaster({ dir, corpusDir, inputDir }), inputDir, corpusDir };
}

function published(corpusDir: string): string[] {
  return readdirSync(corpusDir).filter((n) => /^[0-9a-f]{64}$/.test(n)).sort();
}

/** An hour ago, as utimes takes it. */
const OLD = new Date(Date.now() - 3600_000);

describe("input admission waits for files to settle", () => {
  it("a static directory of old files is admitted at first sight, a batch at a time", () => {
    const { master, inputDir } = setup();
    for (let i = 0; i < 600; i++) {
      const p = join(inputDir, `seed-${i}`);
      writeFileSync(p, `seed ${i}\n`);
      utimesSync(p, OLD, OLD);
    }
    assert.equal(master.admitInputs(256), 256, "the first scan admits a full batch, no settle wait");
    assert.equal(master.inputBacklogCount, 600 - 256);
    assert.equal(master.admitInputs(256), 256);
    assert.equal(master.admitInputs(256), 600 - 512);
    assert.equal(master.inputBacklogCount, 0);
    assert.equal(master.external.size, 600);
    assert.equal(master.pendingCount, 600);
  });

  it("a fresh file, and an empty one, keep the master from being idle until they settle; then both are admitted", async () => {
    const { master, inputDir } = setup();
    writeFileSync(join(inputDir, "fresh"), "fresh seed\n");
    writeFileSync(join(inputDir, "empty"), "");
    assert.equal(master.admitInputs(), 0, "no scan waits: the files are still settling");
    assert.equal(master.pendingCount, 0);
    assert.equal(master.idle, false, "a file still settling is work in sight");
    // The master's scan reads the real monotonic clock: look again until the settle time has passed.
    const start = performance.now();
    let admitted = 0;
    while (admitted === 0 && performance.now() - start < 20 * SETTLE_MS) {
      assert.equal(master.idle, false, "still work in sight until both are admitted");
      await sleep(SETTLE_MS / 10);
      admitted = master.admitInputs();
    }
    assert.ok(performance.now() - start >= SETTLE_MS, "not admitted before the settle time");
    assert.equal(admitted, 2);
    assert.ok(master.external.has(sha256("fresh seed\n")));
    assert.ok(master.external.has(sha256("")), "an empty file that stayed empty is an input");
    assert.equal(master.admitInputs(), 0);
  });
});

/** An admission of `inputDir` on the monotonic clock `clock`, and the hashes it admitted. */
function admission(inputDir: string, corpusDir: string, clock: { t: number }): { a: InputAdmission; admitted: string[] } {
  const admitted: string[] = [];
  const a = new InputAdmission({
    inputDir,
    corpusDir,
    budgets: DEFAULT_BUDGETS,
    everyoneOwns: true,
    owns: () => true,
    admit: (hash) => (admitted.push(hash), true),
    counters: { refusedInputs: 0, lateInputs: 0, symlinkedInputs: 0 },
    log: () => {},
    problem: (m) => assert.fail(m),
    integrity: (m) => assert.fail(m),
    now: () => clock.t,
  });
  return { a, admitted };
}

describe("the settle rule on the scan's monotonic clock", () => {

  it("a fresh file waits, counted as settling, until a look the settle time after the first finds it the same", () => {
    const { inputDir, corpusDir } = setup();
    const clock = { t: 1000 };
    const { a, admitted } = admission(inputDir, corpusDir, clock);
    writeFileSync(join(inputDir, "fresh"), "fresh\n");
    assert.equal(a.scan(256), 0);
    assert.equal(a.settlingCount, 1, "work in sight while it settles");
    assert.equal(a.backlogCount, 0);
    clock.t += SETTLE_MS - 1;
    assert.equal(a.scan(256), 0, "not yet the settle time");
    clock.t += 1;
    assert.equal(a.scan(256), 1);
    assert.equal(a.settlingCount, 0);
    assert.deepEqual(admitted, [sha256("fresh\n")]);
  });

  it("a file created empty and filled 300 ms later is admitted once, with its final content", () => {
    const { inputDir, corpusDir } = setup();
    const clock = { t: 0 };
    const { a, admitted } = admission(inputDir, corpusDir, clock);
    const path = join(inputDir, "id:000001,src:000000,op:havoc");
    writeFileSync(path, "");
    for (let t = 0; t < 300; t += 25, clock.t += 25) assert.equal(a.scan(256), 0, "nothing is admitted while the file is empty");
    writeFileSync(path, "final content\n");
    assert.equal(a.scan(256), 0, "the change restarts the wait");
    clock.t += SETTLE_MS;
    assert.equal(a.scan(256), 1);
    assert.deepEqual(admitted, [sha256("final content\n")]);
    assert.deepEqual(published(corpusDir), [sha256("final content\n")]);
    assert.ok(!existsSync(join(corpusDir, sha256(""))), "the empty content was never published");
    clock.t += 3 * SETTLE_MS;
    assert.equal(a.scan(256), 0, "admitted once");
  });

  it("a file that keeps growing is not admitted until it stops", () => {
    const { inputDir, corpusDir } = setup();
    const clock = { t: 0 };
    const { a, admitted } = admission(inputDir, corpusDir, clock);
    const path = join(inputDir, "growing");
    writeFileSync(path, "x");
    for (let i = 0; i < 15; i++) {
      clock.t += SETTLE_MS / 5;
      appendFileSync(path, "x");
      assert.equal(a.scan(256), 0, "not admitted while it grows");
    }
    const final = readFileSync(path, "utf8");
    // The wait runs from the look that found the last growth.
    clock.t += SETTLE_MS - 1;
    assert.equal(a.scan(256), 0, "not yet the settle time after it stopped");
    clock.t += 1;
    assert.equal(a.scan(256), 1, "admitted once it stopped growing");
    assert.deepEqual(admitted, [sha256(final)]);
  });

  it("a change restarts the wait, and a name removed while it settles is forgotten", () => {
    const { inputDir, corpusDir } = setup();
    const clock = { t: 0 };
    const { a, admitted } = admission(inputDir, corpusDir, clock);
    writeFileSync(join(inputDir, "a"), "");
    writeFileSync(join(inputDir, "b"), "b");
    assert.equal(a.scan(256), 0);
    assert.equal(a.settlingCount, 2);
    clock.t += SETTLE_MS;
    writeFileSync(join(inputDir, "a"), "a, written");
    rmSync(join(inputDir, "b"));
    assert.equal(a.scan(256), 0, "a changed since the first look, b is gone");
    assert.equal(a.settlingCount, 1);
    clock.t += SETTLE_MS;
    assert.equal(a.scan(256), 1);
    assert.deepEqual(admitted, [sha256("a, written")]);
  });
});

describe("explore on a producer's queue", () => {
  it("a campaign does not end while an input file still grows: it waits, then runs the file once, complete", async () => {
    const d = new ExploreDir();
    try {
      d.seed("seed", "old seed\n");
      utimesSync(join(d.seeds, "seed"), OLD, OLD);
      const ran = join(d.dir, "ran.log");
      const target = d.script("target.sh", `input=$(cat "$1"); printf '%s\\n' "\${#input}" >> '${ran}'`);
      const growing = join(d.seeds, "growing");
      writeFileSync(growing, "x");
      const explore = d.start(["-j", "1", "-t", "1", "--max-idle", "0.3"], [target, "@@"]);
      const start = performance.now();
      while (performance.now() - start < 2000) {
        appendFileSync(growing, "x");
        await sleep(100);
      }
      const size = readFileSync(growing).length;
      const { code } = await explore.done;
      assert.equal(code, 0, explore.output());
      assert.ok(performance.now() - start >= 2000, "the campaign outlived the growing file");
      assert.doesNotMatch(explore.output(), /arrived after the frontier was declared exhausted/);
      assert.deepEqual(readFileSync(ran, "utf8").trim().split("\n").map(Number).sort((a, b) => a - b), [8, size].sort((a, b) => a - b), "the seed and the whole file, once each");
    } finally {
      d.cleanup();
    }
  });


  it("a queue file created empty and written later runs once, with its content, never empty", async () => {
    const d = new ExploreDir();
    try {
      d.seed("seed", "old seed\n");
      utimesSync(join(d.seeds, "seed"), OLD, OLD);
      const ran = join(d.dir, "ran.log");
      // Each run appends the length of its input and the input itself.
      const target = d.script("target.sh", `input=$(cat "$1"); printf '%s:%s\\n' "\${#input}" "$input" >> '${ran}'`);
      const explore = d.start(["--follow", "-j", "1", "-t", "1", "--wall-timeout", "4"], [target, "@@"]);
      // The producer writes its queue file once the campaign runs: after the seed's run.
      const startMs = performance.now();
      while (!(existsSync(ran) && readFileSync(ran, "utf8").includes("8:old seed")) && performance.now() - startMs < 3000) await sleep(20);
      assert.ok(existsSync(ran), "the seed ran within 3 s of the start\n" + explore.output());
      const queued = join(d.seeds, "id:000001");
      writeFileSync(queued, "");
      await sleep(300);
      writeFileSync(queued, "queued\n");
      const { code } = await explore.done;
      assert.equal(code, 5, "followed until the wall budget\n" + explore.output());
      const lines = readFileSync(ran, "utf8").trim().split("\n").sort();
      assert.deepEqual(lines, ["6:queued", "8:old seed"], "the empty file never ran\n" + explore.output());
    } finally {
      d.cleanup();
    }
  });
});

describe("an input directory that did not change is not listed every second", () => {
  function quietDir(): { inputDir: string; corpusDir: string; clock: { t: number }; a: InputAdmission; admitted: string[] } {
    const dir = freshDir();
    const inputDir = join(dir, "in");
    const corpusDir = join(dir, "corpus");
    mkdirSync(inputDir);
    mkdirSync(corpusDir);
    for (const name of ["a", "b"]) {
      writeFileSync(join(inputDir, name), `seed ${name}\n`);
      utimesSync(join(inputDir, name), OLD, OLD);
    }
    // The directory itself unchanged for an hour: a listing of it may stand for the next scans.
    utimesSync(inputDir, OLD, OLD);
    const clock = { t: 0 };
    const { a, admitted } = admission(inputDir, corpusDir, clock);
    return { inputDir, corpusDir, clock, a, admitted };
  }

  /** Rewrites `name` in place (the directory's names and stamp stay as they were) with an old mtime: settled at first sight. */
  function rewriteInPlace(inputDir: string, name: string, text: string): void {
    writeFileSync(join(inputDir, name), text);
    utimesSync(join(inputDir, name), OLD, OLD);
  }

  it("a file rewritten in place under an admitted name is found by the listing RELIST_MS later, not by the scans between", () => {
    const { inputDir, clock, a, admitted } = quietDir();
    assert.equal(a.scan(256), 2);
    rewriteInPlace(inputDir, "a", "seed a, rewritten\n");
    clock.t += 1000;
    assert.equal(a.scan(256), 0, "the directory's stamp is unchanged: not listed");
    clock.t += RELIST_MS - 1001;
    assert.equal(a.scan(256), 0);
    clock.t += 1;
    assert.equal(a.scan(256), 1, "listed again RELIST_MS after the last listing");
    assert.deepEqual(admitted.at(-1), sha256("seed a, rewritten\n"));
  });

  it("a name added is found by the next scan, and a listing of a directory changed just before it is not trusted", () => {
    const { inputDir, clock, a, admitted } = quietDir();
    assert.equal(a.scan(256), 2);
    writeFileSync(join(inputDir, "c"), "seed c\n");
    utimesSync(join(inputDir, "c"), OLD, OLD);
    clock.t += 1000;
    assert.equal(a.scan(256), 1, "a new name changes the directory's stamp");
    // The directory changed moments ago: the next scan lists it again, and so sees a rewrite in place.
    rewriteInPlace(inputDir, "b", "seed b, rewritten\n");
    clock.t += 1000;
    assert.equal(a.scan(256), 1);
    assert.deepEqual(admitted.slice(2), [sha256("seed c\n"), sha256("seed b, rewritten\n")]);
  });

  it("an admission with no limit (the quiescence refresh) always lists", () => {
    const { inputDir, clock, a } = quietDir();
    assert.equal(a.scan(256), 2);
    rewriteInPlace(inputDir, "a", "seed a, once more\n");
    clock.t += 1;
    assert.equal(a.scan(Number.POSITIVE_INFINITY), 1);
  });
});
