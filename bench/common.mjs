// Helpers shared by the benchmarks in this directory: option parsing, child processes with
// timestamped output lines, machine facts and table printing. Plain Node.js, no dependencies.
import { spawn, spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const CLI = join(ROOT, "dist", "cli", "main.js");
/** fuzzfleet's process starter (native/spawn.c), which runChild uses unless FUZZFLEET_SPAWN=node. */
export const SPAWN_ADDON = join(ROOT, "build", "Release", "fuzzfleet_spawn.node");

/**
 * Source for a probe preload: `${totals}` = {name: [calls, ms]}, `add(name, ms)` and
 * `timed(name, fn)`, which wraps fn so that each call's duration on performance.now() is added.
 */
/** The seconds of a duration as fuzzfleet prints it: "1.2s", "12s", "1m02s", "1h02m". */
export function parseShownSeconds(text) {
  const m = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$/.exec(text);
  if (!m || text === "") throw new Error(`not a duration as fuzzfleet prints one: ${JSON.stringify(text)}`);
  return Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0);
}

export function timedCallsSource(totals) {
  return `const ${totals} = {};
const add = (name, ms) => {
  const t = ${totals}[name] ?? (${totals}[name] = [0, 0]);
  t[0]++;
  t[1] += ms;
};
const timed = (name, fn) =>
  function (...args) {
    const at = performance.now();
    try {
      return fn.apply(this, args);
    } finally {
      add(name, performance.now() - at);
    }
  };`;
}

/**
 * Source for a probe preload (which has `childProcess` and `spawns` in scope): records every child
 * fuzzfleet starts, through child_process or through the native starter, into `spawns` as
 * { argv0, argv, at, exitAt, callMs } on performance.now(). It wraps child_process.spawn and the
 * addon's exports object, which fuzzfleet shares (one module instance per path), so fuzzfleet
 * itself is unchanged.
 */
export function spawnProbeSource() {
  return `const originalSpawn = childProcess.spawn;
childProcess.spawn = function spawn(...args) {
  const entry = { argv0: args[0], argv: [args[0], ...(Array.isArray(args[1]) ? args[1] : [])], at: performance.now(), exitAt: null, callMs: 0 };
  spawns.push(entry);
  const child = originalSpawn.apply(this, args);
  entry.callMs = performance.now() - entry.at;
  child.once("exit", () => { entry.exitAt = performance.now(); });
  return child;
};
try {
  const addon = require(${JSON.stringify(SPAWN_ADDON)});
  const originalNative = addon.spawn;
  addon.spawn = function spawn(file, argv, envp, cwd, stdin, stdout, stderr, onExit) {
    const entry = { argv0: file, argv: [...argv], at: performance.now(), exitAt: null, callMs: 0 };
    spawns.push(entry);
    const pid = originalNative.call(this, file, argv, envp, cwd, stdin, stdout, stderr, (code, signal) => {
      entry.exitAt = performance.now();
      onExit(code, signal);
    });
    entry.callMs = performance.now() - entry.at;
    return pid;
  };
} catch {
  // not built: fuzzfleet falls back to child_process, which the probe records separately
}`;
}

/** Milliseconds on a clock shared by every process of the machine (epoch based, sub-ms resolution). */
export function epochMs() {
  return performance.timeOrigin + performance.now();
}

/** The output options every benchmark takes; parseOptions adds them and their help lines. */
const OUTPUT_OPTIONS = {
  json: { path: true },
  tmpdir: { path: true },
  keep: { type: "boolean", default: false },
};
const OUTPUT_HELP = `
  --json FILE         also write the results as JSON
  --tmpdir DIR        where the temporary directories go                      default the OS temp dir
  --keep              keep the temporary directories (their paths are printed)`;

/**
 * Parses argv against `spec` ({ flag: { type: "string"|"boolean", default, number?: {min, max, integer},
 * list?: true, choices?: [...] } }) plus --json, --tmpdir and --keep (`tmpRoot` is the temporary
 * directory to use). Prints `help` for --help; exits 2 with the reason on a bad flag.
 */
export function parseOptions(name, argv, benchSpec, benchHelp) {
  const spec = { ...benchSpec, ...OUTPUT_OPTIONS };
  const help = benchHelp + "\n" + OUTPUT_HELP;
  const options = { help: { type: "boolean", short: "h", default: false } };
  for (const [flag, s] of Object.entries(spec)) options[flag] = { type: s.type ?? "string", ...(s.default !== undefined ? { default: s.default } : {}) };
  let values;
  const usage = (message) => {
    console.error(`${name}: ${message}\n\n${help}`);
    process.exit(2);
  };
  try {
    ({ values } = parseArgs({ args: argv, options }));
  } catch (err) {
    usage(err.message);
  }
  if (values.help) {
    console.log(help);
    process.exit(0);
  }
  const out = {};
  for (const [flag, s] of Object.entries(spec)) {
    const key = flag.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    const raw = values[flag];
    if (s.choices && !s.choices.includes(raw)) usage(`--${flag} wants ${s.choices.join(", ")} (got '${raw}')`);
    if (!s.number || raw === undefined) {
      out[key] = s.path && raw ? resolve(raw) : raw;
      continue;
    }
    const { min = -Infinity, max = Infinity, integer = false } = s.number;
    const parse = (text) => {
      const v = Number(text);
      if (text.trim() === "" || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
        const range = max === Infinity ? `>= ${min}` : `from ${min} to ${max}`;
        usage(`--${flag} wants ${s.list ? "a comma-separated list of " : ""}${integer ? "integers" : "numbers"} ${range} (got '${raw}')`);
      }
      return v;
    };
    out[key] = s.list ? raw.split(",").map(parse) : parse(raw);
  }
  out.tmpRoot = out.tmpdir ?? tmpdir();
  return out;
}

/** Runs argv to completion, stdout+stderr appended to logPath (or ignored); wall seconds and exit status. */
export function timedRun(argv, { cwd, env, logPath = null }) {
  return new Promise((resolvePromise, reject) => {
    const log = logPath ? openSync(logPath, "a") : "ignore";
    const t0 = performance.now();
    const child = spawn(argv[0], argv.slice(1), { cwd, env, stdio: ["ignore", log, log] });
    const close = () => {
      if (typeof log === "number") closeSync(log);
    };
    child.once("error", (err) => {
      close();
      reject(err);
    });
    child.once("exit", (code, signal) => {
      const seconds = (performance.now() - t0) / 1000;
      close();
      resolvePromise({ seconds, code, signal, startedAtMs: performance.timeOrigin + t0 });
    });
  });
}

/** Wall seconds of a synchronous run that must exit 0. */
export function wallOfSync(argv, opts = {}) {
  const t0 = performance.now();
  const r = spawnSync(argv[0], argv.slice(1), { stdio: "ignore", ...opts });
  const seconds = (performance.now() - t0) / 1000;
  if (r.status !== 0) throw new Error(`${argv.join(" ")} exited ${r.status ?? r.signal}`);
  return seconds;
}

/**
 * Starts argv in the background and keeps every line it prints, each stamped (epochMs) when it was
 * read. `waitFor(re)` resolves with the first match of `re` in the output so far or to come.
 */
export function startProcess(argv, { cwd, env }) {
  const startedAtMs = epochMs();
  const child = spawn(argv[0], argv.slice(1), { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  const lines = [];
  let text = "";
  const watchers = [];
  const partial = { stdout: "", stderr: "" };
  const onData = (stream) => (data) => {
    const at = epochMs();
    const chunk = partial[stream] + data;
    const parts = chunk.split("\n");
    partial[stream] = parts.pop();
    for (const line of parts) {
      lines.push({ at, stream, line });
      text += line + "\n";
    }
    for (const w of [...watchers]) w();
  };
  child.stdout.setEncoding("utf8").on("data", onData("stdout"));
  child.stderr.setEncoding("utf8").on("data", onData("stderr"));
  const done = new Promise((resolveDone) => {
    child.once("close", (code, signal) => {
      for (const stream of ["stdout", "stderr"]) {
        if (partial[stream]) {
          lines.push({ at: epochMs(), stream, line: partial[stream] });
          text += partial[stream] + "\n";
          partial[stream] = "";
        }
      }
      resolveDone({ code, signal, exitedAtMs: epochMs(), seconds: (epochMs() - startedAtMs) / 1000 });
      for (const w of [...watchers]) w();
    });
    child.once("error", () => undefined);
  });
  let exited = false;
  void done.then(() => (exited = true));
  const output = () => text;
  const waitFor = (re, timeoutMs, what = String(re)) =>
    new Promise((resolveWait, reject) => {
      const timer = setTimeout(() => finish(new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}; output so far:\n${tail(text)}`)), timeoutMs);
      const check = () => {
        const m = re.exec(text);
        if (m) return finish(null, m);
        if (exited) finish(new Error(`${argv.slice(0, 4).join(" ")} … exited before ${what}; output:\n${tail(text)}`));
      };
      function finish(err, m) {
        clearTimeout(timer);
        const i = watchers.indexOf(check);
        if (i >= 0) watchers.splice(i, 1);
        if (err) reject(err);
        else resolveWait(m);
      }
      watchers.push(check);
      check();
    });
  return { child, pid: child.pid, startedAtMs, lines, output, waitFor, done };
}

function tail(text, n = 40) {
  return text.split("\n").slice(-n).join("\n");
}

/** CPU seconds (user + system) a live process used so far, from /proc; null once it is gone. */
/** A live process's peak resident set so far (VmHWM), in MB, or null once it is gone. */
export function peakRssMb(pid) {
  try {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

export function processCpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // Fields 14 and 15 of stat (utime, stime) are at 11 and 12 after the command name.
    return (Number(fields[11]) + Number(fields[12])) / clockTicks();
  } catch {
    return null;
  }
}

let ticks = null;
function clockTicks() {
  if (ticks === null) {
    const r = spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" });
    ticks = Number(r.stdout.trim()) || 100;
  }
  return ticks;
}

/** The checked-out commit, for the record; null outside a git checkout. */
export function gitCommit() {
  const r = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** Whether tracked files differ from the commit (results then describe a work in progress). */
export function gitDirty() {
  const r = spawnSync("git", ["status", "--porcelain", "--untracked-files=no", "--", "src"], { cwd: ROOT, encoding: "utf8" });
  return r.status === 0 ? r.stdout.trim() !== "" : null;
}

export function machineInfo() {
  return {
    cpus: availableParallelism(),
    cpuModel: cpus()[0]?.model ?? "unknown",
    node: process.version,
    commit: gitCommit(),
    srcModified: gitDirty(),
    loadAverageAtStart: loadavg(),
  };
}

/** Prints the machine line and a note when other work is running. */
export function announce(name, machine) {
  console.log(
    `${name}: ${machine.cpus} CPUs (${machine.cpuModel}), Node ${machine.node}, commit ${machine.commit ?? "?"}` +
      `${machine.srcModified ? " (src/ modified)" : ""}, load average ${machine.loadAverageAtStart.map(f2).join(" ")}`,
  );
  if (machine.loadAverageAtStart[0] > machine.cpus / 2) console.log("  note: other work is running; expect its noise in the figures");
}

/**
 * What every benchmark's main does around its own work: refuse to run without the built CLI,
 * print the machine line, give `body` a fresh scratch directory (removed afterwards unless
 * `o.keep`) and the machine facts, write the result (the benchmark's name, date, machine and
 * options, then whatever `body` returns) to `o.json` when asked, and report a failure with the
 * benchmark's name.
 */
export function benchmarkMain(name, o, body) {
  const main = async () => {
    if (!existsSync(CLI)) {
      console.error(`${name}: ${CLI} is missing; build the CLI first: npm run build`);
      process.exit(2);
    }
    const machine = machineInfo();
    announce(name, machine);
    const scratch = mkdtempSync(join(o.tmpRoot, "fuzzfleet-bench-"));
    try {
      const result = { benchmark: name, date: new Date().toISOString(), machine, options: o, ...(await body(scratch, machine)) };
      machine.loadAverageAtEnd = loadavg();
      console.log(`load average at the end: ${machine.loadAverageAtEnd.map(f2).join(" ")}`);
      if (o.json) {
        writeFileSync(o.json, JSON.stringify(result, null, 2) + "\n");
        console.log(`results written to ${o.json}`);
      }
    } finally {
      if (o.keep) console.log(`kept ${scratch}`);
      else rmSync(scratch, { recursive: true, force: true });
    }
  };
  main().catch((err) => {
    console.error(`${name}: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
    process.exit(1);
  });
}

export function printTable(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  for (const [n, r] of rows.entries()) {
    console.log(r.map((cell, i) => (i === 0 ? String(cell).padEnd(widths[i]) : String(cell).padStart(widths[i]))).join("  "));
    if (n === 0) console.log(widths.map((w) => "-".repeat(w)).join("  "));
  }
}

export const sum = (xs) => xs.reduce((a, b) => a + b, 0);

export function median(xs) {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Nearest-rank percentile (p in 0..100) of xs. */
export function percentile(xs, p) {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

export const f0 = (x) => x.toFixed(0);
export const f1 = (x) => x.toFixed(1);
export const f2 = (x) => x.toFixed(2);
export const f3 = (x) => x.toFixed(3);
export const f4 = (x) => x.toFixed(4);
export const ms = (seconds) => `${(seconds * 1000).toFixed(0)} ms`;
export const int = (n) => Math.round(n).toLocaleString("en-US");

/**
 * Reads a V8 .cpuprofile (node --cpu-prof) and returns where the samples fell: total sampled
 * milliseconds, the top frames by self time and by inclusive time (a frame counted once per
 * sample however often it recurses). Frames are named "function file:line".
 */
/**
 * Prints the self and inclusive top frames of the .cpuprofile in `dir` (node --cpu-prof-dir),
 * under `title`, and returns the summary; null when there is no profile there.
 */
export function printCpuProfile(dir, title, top = 25) {
  let file;
  try {
    file = readdirSync(dir).find((n) => n.endsWith(".cpuprofile"));
  } catch {
    file = undefined;
  }
  if (!file) return null;
  const s = summariseCpuProfile(join(dir, file), top);
  console.log(`\n${title} (${join(dir, file)}): ${(s.totalMs / 1000).toFixed(2)} s sampled`);
  for (const [heading, rows] of [["self time", s.self], ["inclusive time", s.inclusive]]) {
    console.log(`  ${heading}:`);
    for (const x of rows) console.log(`    ${(x.share * 100).toFixed(1).padStart(5)}%  ${x.ms.toFixed(1).padStart(7)} ms  ${x.frame}`);
  }
  return s;
}

export function summariseCpuProfile(path, top = 25) {
  const p = JSON.parse(readFileSync(path, "utf8"));
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const name = (n) => {
    const f = n.callFrame;
    const file = f.url ? f.url.replace(/^file:\/\//, "").replace(ROOT + "/", "") : "";
    return `${f.functionName || "(anonymous)"}${file ? ` ${file}:${f.lineNumber + 1}` : ""}`;
  };
  const self = new Map();
  const inclusive = new Map();
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const dt = (p.timeDeltas[i + 1] ?? 0) / 1000;
    total += dt;
    let node = byId.get(p.samples[i]);
    const key = name(node);
    self.set(key, (self.get(key) ?? 0) + dt);
    const seen = new Set();
    while (node) {
      const k = name(node);
      if (!seen.has(k)) {
        seen.add(k);
        inclusive.set(k, (inclusive.get(k) ?? 0) + dt);
      }
      node = byId.get(parent.get(node.id));
    }
  }
  const sorted = (m) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, top).map(([frame, msSpent]) => ({ frame, ms: msSpent, share: msSpent / total }));
  return { totalMs: total, self: sorted(self), inclusive: sorted(inclusive) };
}
