#!/usr/bin/env node
// The long run of the sweep simulation (test/engine/sweep-world.ts): many seeded campaigns of
// want / report / heartbeat / disconnect / lease expiry / blocked store / coordinator crash, with
// every invariant of the books checked after every step. CI runs a short version
// (test/engine/simulation.test.ts); this runs at least 100,000 steps.
//   node --import tsx bench/sweep-sim.mjs [--runs N] [--max-commands N] [--seed S]
//   node --import tsx bench/sweep-sim.mjs --seed S --path P --replay R   replays a failure exactly
import { benchmarkMain, parseOptions, printTable } from "./common.mjs";

const o = parseOptions(
  "sweep-sim",
  process.argv.slice(2),
  {
    runs: { default: "600", number: { min: 1, integer: true } },
    "max-commands": { default: "200", number: { min: 1, integer: true } },
    seed: { number: { integer: true } },
    path: {},
    replay: {},
  },
  `node --import tsx bench/sweep-sim.mjs [options]
  --runs N            simulated campaigns                                        default 600
  --max-commands N    steps per campaign, at most                                default 200
  --seed S            the random seed (default: a fresh one, printed)
  --path P            with --seed and --replay: replay the failure a run printed
  --replay R          the commands' replayPath of that failure`,
);

if (!process.execArgv.some((a) => a.includes("tsx"))) {
  console.error("sweep-sim: run it through tsx: node --import tsx bench/sweep-sim.mjs");
  process.exit(2);
}

benchmarkMain("sweep-sim", o, async () => {
  const { simulate } = await import("../test/engine/sweep-world.ts");
  const seed = o.seed ?? Math.floor(Math.random() * 2 ** 31);
  console.log(`seed ${seed}`);
  const started = performance.now();
  const r = await simulate({ runs: o.runs, maxCommands: o.maxCommands, seed, path: o.path, replayPath: o.replay });
  const seconds = (performance.now() - started) / 1000;
  printTable([
    ["runs", "steps", "seconds", "steps/s", "violations"],
    [String(r.runs), String(r.steps), seconds.toFixed(1), (r.steps / seconds).toFixed(0), "0"],
  ]);
  return { seed, runs: r.runs, steps: r.steps, seconds };
});
