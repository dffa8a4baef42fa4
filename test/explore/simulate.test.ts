import assert from "node:assert/strict";
import { readFileSync, readdirSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { RuntimeFailure } from "../../src/errors.ts";
import { DEFAULT_BUDGETS, FileProblem, type Budgets } from "../../src/explore/state/corpus.ts";
import { CHUNK_BYTES } from "../../src/explore/state/stable-read.ts";
import { simulateMutants, seededRandom, type RandomInt } from "../../src/explore/executor/simulate.ts";
import { BudgetError } from "../../src/explore/state/staging.ts";
import { scratchDirs } from "../helpers/scratch.ts";

const { scratch, freshDir } = scratchDirs("simulate");

function inputFile(content: Buffer | string): string {
  const path = join(freshDir(), "current_input");
  writeFileSync(path, content);
  return path;
}

function patterned(size: number): Buffer {
  const buf = Buffer.alloc(size);
  for (let i = 0; i < size; i++) buf[i] = (i * 131 + (i >> 16)) & 0xff;
  return buf;
}

/** The whole-buffer algorithm the streamed implementation must reproduce. */
function referenceMutants(input: Buffer, random: RandomInt, count: number): Buffer[] {
  const mutants: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const m = Buffer.from(input);
    const n = 1 + random(Math.min(3, input.length));
    for (let j = 0; j < n; j++) {
      const pos = random(input.length);
      m[pos] = random(256);
    }
    mutants.push(m);
  }
  return mutants;
}

/** A RandomInt that replays fixed values and records the ranges it was asked for. */
function scripted(values: number[]): { random: RandomInt; ranges: number[] } {
  const ranges: number[] = [];
  let next = 0;
  return {
    ranges,
    random: (max) => {
      ranges.push(max);
      assert.ok(next < values.length, "random drawn more often than scripted");
      return values[next++];
    },
  };
}

function neverCalled(): RandomInt {
  return () => assert.fail("random must not be drawn");
}

function budgets(over: Partial<Budgets>): Budgets {
  return { ...DEFAULT_BUDGETS, ...over };
}

describe("simulateMutants", () => {
  it("writes sim_0000..sim_0004, byte-identical across runs with the same seed and to the reference algorithm", () => {
    const input = patterned(CHUNK_BYTES + 4096);
    const path = inputFile(input);
    const first = freshDir();
    const second = freshDir();
    const names = simulateMutants(path, first, { budgets: DEFAULT_BUDGETS, random: seededRandom("seed-1") });
    assert.deepEqual(names, ["sim_0000", "sim_0001", "sim_0002", "sim_0003", "sim_0004"]);
    assert.deepEqual(simulateMutants(path, second, { budgets: DEFAULT_BUDGETS, random: seededRandom("seed-1") }), names);
    assert.deepEqual(readdirSync(first).sort(), names);
    const expected = referenceMutants(input, seededRandom("seed-1"), 5);
    for (const [i, name] of names.entries()) {
      const a = readFileSync(join(first, name));
      assert.ok(a.equals(readFileSync(join(second, name))), `${name} differs between runs`);
      assert.ok(a.equals(expected[i]), `${name} differs from the reference`);
      let diffs = 0;
      for (let k = 0; k < input.length; k++) if (a[k] !== input[k]) diffs++;
      assert.ok(diffs <= 3, `${name} changes ${diffs} bytes`);
    }
  });

  it("draws count then (position, value) pairs and patches across chunk boundaries, later draws winning", () => {
    const size = 2 * CHUNK_BYTES + 5;
    const input = Buffer.alloc(size, 0x11);
    const path = inputFile(input);
    const out = freshDir();
    const { random, ranges } = scripted([
      2, CHUNK_BYTES - 1, 0xaa, CHUNK_BYTES, 0xbb, CHUNK_BYTES - 1, 0xcc, // mutant 0: three positions
      0, size - 1, 0x01, // mutant 1: one position, the last byte
    ]);
    assert.deepEqual(simulateMutants(path, out, { budgets: DEFAULT_BUDGETS, random, count: 2 }), ["sim_0000", "sim_0001"]);
    assert.deepEqual(ranges, [3, size, 256, size, 256, size, 256, 3, size, 256]);
    const m0 = Buffer.from(input);
    m0[CHUNK_BYTES - 1] = 0xcc;
    m0[CHUNK_BYTES] = 0xbb;
    const m1 = Buffer.from(input);
    m1[size - 1] = 0x01;
    assert.ok(readFileSync(join(out, "sim_0000")).equals(m0));
    assert.ok(readFileSync(join(out, "sim_0001")).equals(m1));
  });

  it("draws at most min(3, size) positions for a tiny input", () => {
    const path = inputFile("x");
    const { random, ranges } = scripted([0, 0, 0x41]);
    assert.deepEqual(simulateMutants(path, freshDir(), { budgets: DEFAULT_BUDGETS, random, count: 1 }), ["sim_0000"]);
    assert.deepEqual(ranges, [1, 1, 256]);
  });

  it("checks the object and byte budgets before drawing or writing anything", () => {
    const path = inputFile("0123456789");
    const out = freshDir();
    const objects = (() => {
      try {
        simulateMutants(path, out, { budgets: budgets({ maxChildren: 4 }), random: neverCalled() });
      } catch (err) {
        return err;
      }
    })();
    assert.ok(objects instanceof BudgetError);
    assert.deepEqual([objects.resource, objects.observed, objects.limit], ["objects", 5, 4]);
    const bytes = (() => {
      try {
        simulateMutants(path, out, { budgets: budgets({ maxResultBytes: 49 }), random: neverCalled() });
      } catch (err) {
        return err;
      }
    })();
    assert.ok(bytes instanceof BudgetError);
    assert.deepEqual([bytes.resource, bytes.observed, bytes.limit], ["bytes", 50, 49]);
    assert.deepEqual(readdirSync(out), []);
    assert.equal(simulateMutants(path, out, { budgets: budgets({ maxResultBytes: 50, maxChildren: 5 }), random: seededRandom("s") }).length, 5);
  });

  it("yields no mutants for an empty, symlinked or non-regular input", () => {
    const out = freshDir();
    const empty = inputFile("");
    assert.deepEqual(simulateMutants(empty, out, { budgets: DEFAULT_BUDGETS, random: neverCalled() }), []);
    const link = join(freshDir(), "link");
    symlinkSync(inputFile("data"), link);
    assert.deepEqual(simulateMutants(link, out, { budgets: DEFAULT_BUDGETS, random: neverCalled() }), []);
    assert.deepEqual(simulateMutants(freshDir(), out, { budgets: DEFAULT_BUDGETS, random: neverCalled() }), []);
    assert.deepEqual(readdirSync(out), []);
  });

  it("rejects a mutant count that is not a positive integer", () => {
    const path = inputFile("data");
    assert.throws(() => simulateMutants(path, freshDir(), { budgets: DEFAULT_BUDGETS, random: neverCalled(), count: 0 }), assert.AssertionError);
    assert.throws(() => simulateMutants(path, freshDir(), { budgets: DEFAULT_BUDGETS, random: neverCalled(), count: 1.5 }), assert.AssertionError);
  });

  it("never overwrites an existing sim_ file and publishes nothing then", () => {
    const path = inputFile("data");
    const out = freshDir();
    writeFileSync(join(out, "sim_0003"), "engine output");
    assert.throws(() => simulateMutants(path, out, { budgets: DEFAULT_BUDGETS, random: seededRandom("s") }), RuntimeFailure);
    assert.deepEqual(readdirSync(out), ["sim_0003"]);
    assert.equal(readFileSync(join(out, "sim_0003"), "utf8"), "engine output");
  });

  it("rolls back the mutants already published when a name appears during the run", () => {
    const path = inputFile(patterned(100));
    const out = freshDir();
    const hooks = { afterChunk: () => writeFileSync(join(out, "sim_0002"), "appeared") };
    assert.throws(() => simulateMutants(path, out, { budgets: DEFAULT_BUDGETS, random: seededRandom("s"), count: 5, hooks: hooks }), /already exists/);
    assert.deepEqual(readdirSync(out), ["sim_0002"]);
    assert.equal(readFileSync(join(out, "sim_0002"), "utf8"), "appeared");
  });

  it("leaves nothing behind when the input changes while it is read", () => {
    const input = patterned(CHUNK_BYTES + 10);
    const path = inputFile(input);
    const replacement = join(scratch, "replacement");
    writeFileSync(replacement, input);
    const out = freshDir();
    let err: unknown;
    try {
      simulateMutants(path, out, { budgets: DEFAULT_BUDGETS, random: seededRandom("s"), count: 5, hooks: {
        afterChunk: (n) => {
          if (n === CHUNK_BYTES) renameSync(replacement, path);
        },
      } });
    } catch (e) {
      err = e;
    }
    assert.ok(err instanceof FileProblem);
    assert.equal(err.problem, "changed");
    assert.deepEqual(readdirSync(out), []);
  });

  it("leaves nothing behind when the stream fails midway", () => {
    const path = inputFile(patterned(CHUNK_BYTES + 10));
    const out = freshDir();
    const hooks = {
      afterChunk: () => {
        throw new Error("disk full");
      },
    };
    assert.throws(() => simulateMutants(path, out, { budgets: DEFAULT_BUDGETS, random: seededRandom("s"), count: 5, hooks: hooks }), /disk full/);
    assert.deepEqual(readdirSync(out), []);
  });
});

describe("seededRandom", () => {
  it("is deterministic per seed, stays in range and differs between seeds", () => {
    const a = seededRandom("seed");
    const b = seededRandom(Buffer.from("seed"));
    const c = seededRandom("other");
    const ranges = [1, 2, 3, 256, 1000, 2 ** 28, 2 ** 48];
    const seqA = Array.from({ length: 200 }, (_, i) => a(ranges[i % ranges.length]));
    const seqB = Array.from({ length: 200 }, (_, i) => b(ranges[i % ranges.length]));
    const seqC = Array.from({ length: 200 }, (_, i) => c(ranges[i % ranges.length]));
    assert.deepEqual(seqA, seqB);
    assert.notDeepEqual(seqA, seqC);
    seqA.forEach((v, i) => assert.ok(Number.isInteger(v) && v >= 0 && v < ranges[i % ranges.length]));
  });

  it("covers every value of a small range", () => {
    const r = seededRandom("cover");
    const seen = new Set(Array.from({ length: 4000 }, () => r(256)));
    assert.equal(seen.size, 256);
  });

  it("rejects an empty or non-integer range", () => {
    const r = seededRandom("x");
    assert.throws(() => r(0), assert.AssertionError);
    assert.throws(() => r(2.5), assert.AssertionError);
    assert.throws(() => r(2 ** 48 + 1), assert.AssertionError);
  });
});
