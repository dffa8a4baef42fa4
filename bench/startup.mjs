#!/usr/bin/env node
// How long fuzzfleet takes to start: `--version`, `status` of a small campaign and `worker --help`
// against `node -e 0`, each run `--runs` times, interleaved so that a busy moment of the machine
// hits every command alike. Start-up counts against every chunk a worker runs and every command a
// user types; each command loads only the modules it needs.
//   node bench/startup.mjs [--runs N]
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { benchmarkMain, CLI, f2, median, parseOptions, printTable, wallOfSync } from "./common.mjs";

const o = parseOptions(
  "startup",
  process.argv.slice(2),
  { runs: { default: "15", number: { min: 3, integer: true } } },
  `node bench/startup.mjs [options]
  --runs N            runs of each command, interleaved                          default 15`,
);

benchmarkMain("startup", o, async (scratch) => {
  const campaign = join(scratch, "campaign");
  mkdirSync(campaign);
  wallOfSync([process.execPath, CLI, "init"], { cwd: campaign });
  const commands = [
    ["node -e 0", [process.execPath, "-e", "0"]],
    ["fuzzfleet --version", [process.execPath, CLI, "--version"]],
    ["fuzzfleet status", [process.execPath, CLI, "status"]],
    ["fuzzfleet worker --help", [process.execPath, CLI, "worker", "--help"]],
  ];
  const times = new Map(commands.map(([name]) => [name, []]));
  for (let i = 0; i < o.runs; i++) for (const [name, argv] of commands) times.get(name).push(wallOfSync(argv, { cwd: campaign }));
  const base = median(times.get("node -e 0"));
  const rows = commands.map(([name]) => {
    const m = median(times.get(name));
    return { name, medianSeconds: m, ratio: m / base };
  });
  printTable([["command", "median s", "× node -e 0"], ...rows.map((r) => [r.name, f2(r.medianSeconds), f2(r.ratio)])]);
  return { rows };
});
