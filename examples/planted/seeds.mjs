// Per-seed work, identical in the main thread and in worker threads. Every function here is a
// pure function of its arguments (plus the test hooks in `settings`), which is why results do
// not depend on --jobs.
//
// settings = { size, costMs, fixed: string[], hangSeed: number | null }

import { checkProgram, formatProgram } from "./machine.mjs";
import { generateProgram } from "./generate.mjs";
import { shrinkProgram } from "./shrink.mjs";

/** The verdict for one seed: `{ seed, bucket: "ok" | "quarantine" | <bucket>, msg, program }`. */
function verdictFor(seed, settings, fixed) {
  if (settings.hangSeed === seed) sleepForever(seed);
  burn(settings.costMs);
  const program = generateProgram(seed, settings.size);
  const { bucket, msg } = checkProgram(program, fixed);
  if (bucket === "invalid") return { seed, bucket: "quarantine", msg: `invalid emitted test: ${msg}`, program };
  return { seed, bucket, msg, program };
}

/**
 * Sweep phase 1: checks seeds from..from+count-1 and returns every seed that is not ok, in seed
 * order, as `{ seed, bucket, msg, text }`.
 */
export function sweepRange(from, count, settings) {
  const fixed = new Set(settings.fixed);
  const found = [];
  for (let seed = from; seed < from + count; seed++) {
    const v = verdictFor(seed, settings, fixed);
    if (v.bucket !== "ok") found.push({ seed, bucket: v.bucket, msg: v.msg, text: formatProgram(v.program) });
  }
  return found;
}

/** Check mode: `{ seed, bucket, msg }` for each seed, in the order given. */
export function checkSeeds(seeds, settings) {
  const fixed = new Set(settings.fixed);
  return seeds.map((seed) => {
    const { bucket, msg } = verdictFor(seed, settings, fixed);
    return { seed, bucket, msg };
  });
}

/** Sweep phase 2: the minimised text of each failing seed, `{ seed, minText, length, minLength }`. */
export function shrinkSeeds(seeds, settings) {
  const fixed = new Set(settings.fixed);
  return seeds.map((seed) => {
    const program = generateProgram(seed, settings.size);
    const { bucket } = checkProgram(program, fixed);
    const min = shrinkProgram(program, (candidate) => checkProgram(candidate, fixed).bucket === bucket);
    return { seed, minText: formatProgram(min), length: program.length, minLength: min.length };
  });
}

/** Test hook (PLANTED_HANG_SEED): block this thread for good, without spinning. */
function sleepForever(seed) {
  process.stderr.write(`planted: PLANTED_HANG_SEED=${seed} reached; sleeping forever\n`);
  const cell = new Int32Array(new SharedArrayBuffer(4));
  for (;;) Atomics.wait(cell, 0, 0);
}

/** Spends about `ms` of CPU, so a seed costs what a benchmark asks for. Results never depend on it. */
function burn(ms) {
  if (!(ms > 0)) return;
  const end = performance.now() + ms;
  let x = 1;
  while (performance.now() < end) {
    for (let i = 0; i < 256; i++) x = Math.imul(x, 0x2c1b3c6d) + 0x297a2d39;
  }
  return x;
}
