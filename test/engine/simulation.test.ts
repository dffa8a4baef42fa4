// The deterministic simulation of a distributed sweep (sweep-world.ts): a seeded random scheduler
// drives the real engine, queue and store through want / report / heartbeat / disconnect / lease
// expiry / blocked store / coordinator crash, and every invariant is checked after every step.
// A failure prints fast-check's seed and path; `node --import tsx bench/sweep-sim.mjs --seed S
// --path P` replays it. bench/sweep-sim.mjs runs the long version.
import assert from "node:assert/strict";
import { test } from "node:test";
import { simulate } from "./sweep-world.ts";

test("10,000+ simulated steps over many seeds keep every invariant of the books", { timeout: 600_000 }, async () => {
  const r = await simulate({ runs: 120, maxCommands: 200, seed: Number(process.env.FUZZFLEET_SIM_SEED ?? 20261201) });
  assert.ok(r.steps >= 10_000, `ran ${r.steps} steps in ${r.runs} runs`);
});
