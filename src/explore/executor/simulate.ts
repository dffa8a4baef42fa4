// `--simulate`: when a run produced no output, stand in for the engine with a few random mutants of
// the input so the campaign machinery still has children to stage. Every mutant is the input with
// 1..min(3, size) byte positions overwritten by random values. The random draws happen in a fixed
// order (per mutant: count, then (position, value) pairs), so a seeded generator reproduces the
// same mutants. The input is streamed once in 1 MiB chunks whatever its size, and the mutants
// appear all together or not at all, never over an existing name.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { closeSync, constants, linkSync, openSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { RuntimeFailure } from "../../errors.ts";
import { randomHex } from "../../util/random-hex.ts";
import { FileProblem, type Budgets } from "../state/corpus.ts";
import { openRegular, streamOpened, type StreamHooks } from "../state/stable-read.ts";
import { lstatOrNull, writeFully } from "../state/durable.ts";
import { BudgetError } from "../state/staging.ts";

export const SIMULATED_MUTANTS = 5;
const MAX_POSITIONS = 3;

/** Returns an integer in [0, maxExclusive). */
export type RandomInt = (maxExclusive: number) => number;

interface Mutation {
  positions: number[];
  values: number[];
}

export function simulatedName(index: number): string {
  return `sim_${String(index).padStart(4, "0")}`;
}

function draw(random: RandomInt, maxExclusive: number): number {
  const v = random(maxExclusive);
  assert.ok(Number.isSafeInteger(v) && v >= 0 && v < maxExclusive, `random source returned ${v}, outside [0, ${maxExclusive})`);
  return v;
}

function drawMutations(random: RandomInt, size: number, count: number): Mutation[] {
  const mutations: Mutation[] = [];
  for (let i = 0; i < count; i++) {
    const n = 1 + draw(random, Math.min(MAX_POSITIONS, size));
    const m: Mutation = { positions: [], values: [] };
    for (let j = 0; j < n; j++) {
      m.positions.push(draw(random, size));
      m.values.push(draw(random, 256));
    }
    mutations.push(m);
  }
  return mutations;
}

/**
 * Writes `count` mutants of inputPath into outDir as sim_0000, sim_0001, … and returns their names.
 * An empty, symlinked or non-regular input yields no mutants. Budgets are checked before anything
 * is drawn or written. Mutants are written under hidden temp names and hard-linked to their final
 * names only when all are complete; a final name that already exists aborts the whole set.
 */
export function simulateMutants(
  inputPath: string,
  outDir: string,
  m: {
    budgets: Budgets;
    random: RandomInt;
    /** Default SIMULATED_MUTANTS. */
    count?: number;
    hooks?: StreamHooks;
  },
): string[] {
  const { budgets, random, count = SIMULATED_MUTANTS, hooks } = m;
  assert.ok(Number.isSafeInteger(count) && count >= 1, `mutant count must be a positive integer (got ${count})`);
  let opened: ReturnType<typeof openRegular>;
  try {
    opened = openRegular(inputPath, Number.MAX_SAFE_INTEGER);
  } catch (err) {
    if (err instanceof FileProblem && (err.problem === "symlink" || err.problem === "not-regular")) return [];
    throw err;
  }
  const { fd, identity } = opened;
  const temps: string[] = [];
  const published: string[] = [];
  const outs: number[] = [];
  try {
    const size = identity.size;
    if (size === 0) return [];
    if (count > budgets.maxChildren) throw new BudgetError("objects", count, budgets.maxChildren);
    if (size * count > budgets.maxResultBytes) throw new BudgetError("bytes", size * count, budgets.maxResultBytes);

    const names = Array.from({ length: count }, (_, i) => simulatedName(i));
    for (const name of names) {
      if (lstatOrNull(join(outDir, name)) !== null) {
        throw new RuntimeFailure(`${join(outDir, name)} already exists; simulated mutants never replace an output`);
      }
    }
    const mutations = drawMutations(random, size, count);

    const tag = randomHex(8);
    for (let i = 0; i < count; i++) {
      const temp = join(outDir, `.sim-${tag}-${i}`);
      outs.push(openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600));
      temps.push(temp);
    }
    let offset = 0;
    streamOpened(
      inputPath,
      opened,
      (chunk) => {
        const end = offset + chunk.length;
        for (let i = 0; i < count; i++) {
          const { positions, values } = mutations[i];
          let patched: Buffer | null = null;
          // Draw order is application order, so a later draw on the same position wins.
          for (let j = 0; j < positions.length; j++) {
            if (positions[j] < offset || positions[j] >= end) continue;
            patched ??= Buffer.from(chunk);
            patched[positions[j] - offset] = values[j];
          }
          writeFully(outs[i], patched ?? chunk);
        }
        offset = end;
      },
      hooks,
    );
    while (outs.length > 0) closeSync(outs.pop() as number);

    for (let i = 0; i < count; i++) {
      const dest = join(outDir, names[i]);
      try {
        linkSync(temps[i], dest);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "EEXIST") {
          throw new RuntimeFailure(`${dest} already exists; simulated mutants never replace an output`, { cause: err });
        }
        throw err;
      }
      published.push(dest);
    }
    return names;
  } catch (err) {
    for (const path of published) unlinkQuietly(path);
    throw err;
  } finally {
    for (const out of outs) closeSync(out);
    for (const temp of temps) unlinkQuietly(temp);
    closeSync(fd);
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Cleanup is best effort; the failure that led here is what gets reported.
  }
}

/**
 * A deterministic RandomInt: bytes come from SHA-256(seed || 64-bit big-endian counter), six
 * bytes per draw, with rejection sampling so every value in range is equally likely.
 */
export function seededRandom(seed: Buffer | string): RandomInt {
  const seedBytes = typeof seed === "string" ? Buffer.from(seed, "utf8") : Buffer.from(seed);
  const SPACE = 2 ** 48;
  let counter = 0n;
  let block = Buffer.alloc(0);
  let used = 0;
  const take6 = (): number => {
    if (used + 6 > block.length) {
      const ctr = Buffer.alloc(8);
      ctr.writeBigUInt64BE(counter++);
      const next = createHash("sha256").update(seedBytes).update(ctr).digest();
      block = Buffer.concat([block.subarray(used), next]);
      used = 0;
    }
    const v = block.readUIntBE(used, 6);
    used += 6;
    return v;
  };
  return (maxExclusive: number): number => {
    assert.ok(Number.isSafeInteger(maxExclusive) && maxExclusive >= 1 && maxExclusive <= SPACE, `random range must be an integer in [1, 2^48] (got ${maxExclusive})`);
    const limit = SPACE - (SPACE % maxExclusive);
    for (;;) {
      const v = take6();
      if (v < limit) return v % maxExclusive;
    }
  };
}
