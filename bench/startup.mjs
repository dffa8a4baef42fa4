#!/usr/bin/env node
// How long fuzzfleet takes to start: `--version`, `status` of a small campaign and `worker --help`
// against `node -e 0`, each run `--runs` times, interleaved so that a busy moment of the machine
// hits every command alike. Start-up counts against every chunk a worker runs and every command a
// user types; each command loads only the modules it needs.
//   node bench/startup.mjs [--runs N] [--base DIR]
// With --base DIR (a built checkout of an older commit), each command of the base's CLI runs
// right after the same command of this one, in its own small campaign, and the ratio is printed.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { benchmarkMain, CLI, f2, median, parseOptions, printTable, wallOfSync } from "./common.mjs";

const o = parseOptions(
  "startup",
  process.argv.slice(2),
  { runs: { default: "15", number: { min: 3, integer: true } }, base: { path: true } },
  `node bench/startup.mjs [options]
  --runs N            runs of each command, interleaved                          default 15
  --base DIR          also time the CLI of DIR (a built checkout), beside this one default none`,
);

benchmarkMain("startup", o, async (scratch) => {
  const builds = [{ label: "this", cli: CLI }];
  if (o.base) builds.push({ label: "base", cli: join(o.base, "dist", "cli", "main.js") });
  for (const b of builds) {
    b.campaign = join(scratch, `campaign-${b.label}`);
    mkdirSync(b.campaign);
    wallOfSync([process.execPath, b.cli, "init"], { cwd: b.campaign });
  }
  const commands = [
    ["node -e 0", null, ["-e", "0"]],
    ["fuzzfleet --version", true, ["--version"]],
    ["fuzzfleet status", true, ["status"]],
    ["fuzzfleet worker --help", true, ["worker", "--help"]],
  ];
  const times = new Map();
  const key = (name, label) => `${name}\0${label}`;
  for (let i = 0; i < o.runs; i++) {
    for (const [name, usesCli, args] of commands) {
      for (const b of usesCli ? builds : builds.slice(0, 1)) {
        const argv = usesCli ? [process.execPath, b.cli, ...args] : [process.execPath, ...args];
        const k = key(name, b.label);
        if (!times.has(k)) times.set(k, []);
        times.get(k).push(wallOfSync(argv, { cwd: b.campaign }));
      }
    }
  }
  const bare = median(times.get(key("node -e 0", "this")));
  const rows = commands.map(([name, usesCli]) => {
    const m = median(times.get(key(name, "this")));
    const base = usesCli && o.base ? median(times.get(key(name, "base"))) : null;
    return { name, medianSeconds: m, ratio: m / bare, baseMedianSeconds: base, toBase: base === null ? null : m / base };
  });
  const header = ["command", "median s", "× node -e 0", ...(o.base ? ["base median s", "this / base"] : [])];
  printTable([
    header,
    ...rows.map((r) => [r.name, f2(r.medianSeconds), f2(r.ratio), ...(o.base ? [r.baseMedianSeconds === null ? "" : f2(r.baseMedianSeconds), r.toBase === null ? "" : f2(r.toBase)] : [])]),
  ]);
  return { rows };
});
