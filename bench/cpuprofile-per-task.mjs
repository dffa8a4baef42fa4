#!/usr/bin/env node
// Compares where two profiled capacity runs of bench/explore-fleet.mjs spend their time per
// committed task: each --cpu-prof DIR holds the .cpuprofile of every master (and thread) and the
// run's window.json (the measured window on the profiles' monotonic clock, and the tasks committed
// in it). Only samples inside the window count, so that the seeds' admission at the start and the
// shutdown do not weigh on a per-task figure. A sample spent blocked in a system call (fsync, an
// open under load) counts as busy here, though /proc does not count it as CPU.
//
//   node bench/explore-fleet.mjs --part capacity --workers 16 --masters 1 --cpu-prof A --prof-masters 1
//   node bench/explore-fleet.mjs --part capacity --workers 16 --masters 1 --cpu-prof B --prof-masters 2
//   node bench/cpuprofile-per-task.mjs A B [--under FRAME]
//
// Prints each run's busy µs per task, then the frames whose self and inclusive µs per task differ
// most (A, B, B - A); with --under, only the frames called below the first frame matching FRAME.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

function profiles(dir) {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? profiles(p) : n.endsWith(".cpuprofile") ? [p] : [];
  });
}

const frameName = (cf, line) => `${cf.functionName || "(anonymous)"} ${cf.url.replace(/^.*\/dist\//, "")}${line ? `:${cf.lineNumber}` : ""}`;

/** Self and inclusive µs per frame inside the window, and busy µs per process. */
function load(dir, under) {
  const window = JSON.parse(readFileSync(join(dir, "window.json"), "utf8"));
  const self = new Map();
  const inclusive = new Map();
  const busy = [];
  for (const file of profiles(dir)) {
    const p = JSON.parse(readFileSync(file, "utf8"));
    const byId = new Map(p.nodes.map((n) => [n.id, n]));
    const parent = new Map();
    for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    let t = p.startTime;
    let mine = 0;
    for (let i = 0; i < p.samples.length; i++) {
      const dt = p.timeDeltas[i] ?? 0;
      t += dt;
      if (t < window.fromUs || t > window.toUs) continue;
      const leaf = byId.get(p.samples[i]).callFrame;
      if (leaf.functionName === "(idle)") continue;
      const stack = [];
      for (let x = p.samples[i]; x !== undefined; x = parent.get(x)) stack.push(byId.get(x).callFrame);
      stack.reverse();
      const from = under ? stack.findIndex((cf) => frameName(cf, true).includes(under)) : 0;
      if (from < 0) continue;
      mine += dt;
      const k = frameName(leaf, true);
      self.set(k, (self.get(k) ?? 0) + dt);
      // A frame counts once per sample however often it recurses.
      for (const name of new Set(stack.slice(from).map((cf) => frameName(cf, false)))) inclusive.set(name, (inclusive.get(name) ?? 0) + dt);
    }
    busy.push(mine);
  }
  return { window, self, inclusive, busy };
}

const args = process.argv.slice(2);
const u = args.indexOf("--under");
const under = u >= 0 ? args.splice(u, 2)[1] : null;
if (args.length !== 2) {
  console.error("usage: node bench/cpuprofile-per-task.mjs DIR_A DIR_B [--under FRAME]   (each DIR from explore-fleet.mjs --cpu-prof)");
  process.exit(2);
}
const runs = args.map((d) => load(d, under));
for (const [i, r] of runs.entries()) {
  const total = r.busy.reduce((a, b) => a + b, 0);
  console.log(
    `${"AB"[i]}: ${args[i]}: ${r.window.masters} master(s), ${r.window.tasks} tasks in the window, busy ${(total / 1000).toFixed(0)} ms ` +
      `(per profile ${r.busy.map((b) => (b / 1000).toFixed(0)).join("/")}) = ${(total / r.window.tasks).toFixed(1)} µs/task${under ? ` under ${under}` : ""}`,
  );
}
for (const [heading, key, top] of [["self", "self", 25], ["inclusive", "inclusive", 40]]) {
  const [a, b] = runs;
  const names = new Set([...a[key].keys(), ...b[key].keys()]);
  const rows = [...names]
    .map((n) => [n, (a[key].get(n) ?? 0) / a.window.tasks, (b[key].get(n) ?? 0) / b.window.tasks])
    .sort((x, y) => Math.abs(y[2] - y[1]) - Math.abs(x[2] - x[1]))
    .slice(0, top);
  console.log(`\n${heading} µs per task:       A        B    B - A`);
  for (const [n, x, y] of rows) console.log(`  ${x.toFixed(1).padStart(15)} ${y.toFixed(1).padStart(8)} ${(y - x >= 0 ? "+" : "") + (y - x).toFixed(1).padStart(7)}  ${n}`);
}
