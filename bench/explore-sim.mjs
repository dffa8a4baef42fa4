#!/usr/bin/env node
// The long run of the lease-table simulation (test/explore/lease-world.ts): seeded campaigns of
// simulated masters claiming, heartbeating, committing and completing over each record store —
// in memory, shared record files, the lone master's journal, partitioned shares with takeover — under crashes, stalls past the
// lease, delayed, duplicated and reordered results, failed writes and syncs, torn journal lines
// and power cuts, every invariant checked after every step; with --stale-reads, the partitioned
// masters' reads of a share's record without its lock may be answered from a client's copy up to
// that old. CI runs a short version (test/explore/lease-sim.test.ts); this runs at least 100,000
// steps and reports steps/s.
//   node --import tsx bench/explore-sim.mjs [--store memory|shared-files|journal|partitioned|all] [--runs N] [--steps N] [--seed S] [--stale-reads MS]
// A violation prints the seed and the command that replays that one run.
import { benchmarkMain, parseOptions, printTable } from "./common.mjs";

const o = parseOptions(
  "explore-sim",
  process.argv.slice(2),
  {
    store: { default: "all", choices: ["all", "memory", "shared-files", "journal", "partitioned"] },
    runs: { number: { min: 1, integer: true } },
    steps: { default: "800", number: { min: 1, integer: true } },
    contents: { default: "40", number: { min: 2, integer: true } },
    seed: { number: { min: 0, max: 2 ** 31 - 1, integer: true } },
    broken: { choices: [undefined, "stale-cache", "unsynced-fence", "no-generation-check", "stale-commit-check"] },
    "stale-reads": { default: "0", number: { min: 0, integer: true } },
  },
  `node --import tsx bench/explore-sim.mjs [options]
  --store S       memory, shared-files, journal, partitioned or all           default all
  --runs N        seeded runs per store (default: memory 110, shared-files 10, journal 15, partitioned 15,
                  or 70 with --stale-reads: over 100,000 steps on its own)
  --steps N       steps with faults per run (the calm steps after them count too) default 800
  --contents N    contents in each run's corpus                                default 40
  --seed S        the first run's seed; run i uses S + i (default: a fresh one, printed)
  --stale-reads MS  partitioned: a read of a share's record without its lock may return the
                  copy the master's client read up to MS ms before (the lease is 1,000 ms)  default 0
  --broken B      a deliberately broken store: must fail (stale-cache, unsynced-fence: memory;
                  no-generation-check, stale-commit-check: partitioned; the latter reads the
                  record for a commit as without the lock, with --stale-reads, default 1000)`,
);

if (!process.execArgv.some((a) => a.includes("tsx"))) {
  console.error("explore-sim: run it through tsx: node --import tsx bench/explore-sim.mjs");
  process.exit(2);
}

const brokenStore = o.broken === "no-generation-check" || o.broken === "stale-commit-check" ? "partitioned" : "memory";
if (o.broken !== undefined && o.store !== brokenStore) {
  console.error(`explore-sim: --broken ${o.broken} is a ${brokenStore} store: add --store ${brokenStore}`);
  process.exit(2);
}

/** Runs per store by default: about 100,000 steps in memory, and the real stores' share on top. */
const DEFAULT_RUNS = { memory: 110, "shared-files": 10, journal: 15, partitioned: o.staleReads > 0 ? 70 : 15 };

benchmarkMain("explore-sim", o, async () => {
  const { simulate, SimViolation, STORE_KINDS } = await import("../test/explore/lease-world.ts");
  const seed = o.seed ?? Math.floor(Math.random() * 2 ** 30);
  console.log(`seed ${seed}`);
  const kinds = o.store === "all" ? STORE_KINDS : [o.store];
  const rows = [["store", "runs", "steps", "seconds", "steps/s", "commits", "faults"]];
  const results = {};
  for (const kind of kinds) {
    const runs = o.runs ?? DEFAULT_RUNS[kind];
    const faults = {};
    let steps = 0;
    let commits = 0;
    const started = performance.now();
    for (let i = 0; i < runs; i++) {
      let r;
      try {
        const staleReadsMs = o.staleReads > 0 ? o.staleReads : undefined;
        r = simulate({ kind, seed: seed + i, steps: o.steps, contents: o.contents, broken: o.broken, staleReadsMs });
      } catch (err) {
        if (!(err instanceof SimViolation)) throw err;
        console.error(err.message);
        process.exit(1);
      }
      steps += r.steps;
      commits += r.commits;
      for (const [k, n] of Object.entries(r.faults)) faults[k] = (faults[k] ?? 0) + n;
    }
    const seconds = (performance.now() - started) / 1000;
    results[kind] = { runs, steps, seconds, stepsPerSecond: steps / seconds, commits, faults };
    const faultText = Object.entries(faults).sort().map(([k, n]) => `${k} ${n}`).join(", ");
    rows.push([kind, String(runs), String(steps), seconds.toFixed(1), (steps / seconds).toFixed(0), String(commits), faultText]);
  }
  printTable(rows);
  const total = Object.values(results).reduce((n, r) => n + r.steps, 0);
  console.log(`${total} steps, no violation`);
  return { seed, results, steps: total };
});
