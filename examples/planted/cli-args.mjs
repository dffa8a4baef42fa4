// Command line and environment parsing for planted.mjs. Every rejection is a UsageError whose
// message names the flag (or variable), the value and what is accepted.

import { BUCKETS } from "./machine.mjs";
import { SIZES } from "./generate.mjs";

export class UsageError extends Error {}

export const USAGE = `usage:
  node planted.mjs --from N --count C --out DIR [--jobs J] [--max-shrinks S]
                   [--size small|large] [--cost-ms M]          sweep seeds N..N+C-1
  node planted.mjs --check --seeds 5,17,99 [--json] [--size S] [--jobs J] [--cost-ms M]
                                                               re-check seeds, print one verdict per line
  node planted.mjs --minimize --seeds 5,17,99 --out DIR [--size S] [--jobs J]
                                                              minimize failing seeds into DIR/failures/<seed>/
  node planted.mjs --seed N [--size S]                         replay one seed verbosely, write nothing
env: PLANTED_COST_MS (default for --cost-ms), PLANTED_FIX=<bucket>[,<bucket>],
     PLANTED_HANG_SEED=N, PLANTED_EXIT=<code>
`;

const MAX_JOBS = 64;

// Which flags each mode accepts; `value` says whether the flag takes a value.
const FLAGS = {
  from: { value: true, modes: ["sweep"] },
  count: { value: true, modes: ["sweep"] },
  out: { value: true, modes: ["sweep", "minimize"] },
  "max-shrinks": { value: true, modes: ["sweep"] },
  jobs: { value: true, modes: ["sweep", "check", "minimize"] },
  "cost-ms": { value: true, modes: ["sweep", "check"] },
  size: { value: true, modes: ["sweep", "check", "replay", "minimize"] },
  check: { value: false, modes: ["check"] },
  minimize: { value: false, modes: ["minimize"] },
  seeds: { value: true, modes: ["check", "minimize"] },
  json: { value: false, modes: ["check"] },
  seed: { value: true, modes: ["replay"] },
  help: { value: false, modes: ["help"] },
};
const ALIASES = { "-j": "jobs", "-h": "help" };

function readFlags(argv) {
  const given = new Map();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    let name;
    let value;
    if (ALIASES[arg] !== undefined) name = ALIASES[arg];
    else if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
      if (eq >= 0) value = arg.slice(eq + 1);
    } else {
      throw new UsageError(`unexpected argument '${arg}' (flags start with --; see --help)`);
    }
    const spec = FLAGS[name];
    if (spec === undefined) throw new UsageError(`unknown flag '${arg}' (see --help)`);
    if (given.has(name)) throw new UsageError(`--${name} is given twice; give it once`);
    if (spec.value && value === undefined) {
      if (i + 1 >= argv.length) throw new UsageError(`--${name} needs a value`);
      value = argv[++i];
    } else if (!spec.value && value !== undefined) {
      throw new UsageError(`--${name} takes no value (got '${value}')`);
    }
    given.set(name, value ?? true);
  }
  return given;
}

function seedValue(what, text) {
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n)) throw new UsageError(`${what} wants a non-negative integer seed (got '${text}')`);
  return n;
}

function intValue(what, text, lo, hi, range) {
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < lo || n > hi) throw new UsageError(`${what} wants ${range} (got '${text}')`);
  return n;
}

function costValue(what, text) {
  const n = /^\d+(\.\d+)?$/.test(text) ? Number(text) : NaN;
  if (!Number.isFinite(n)) throw new UsageError(`${what} wants a number of milliseconds >= 0 (got '${text}')`);
  return n;
}

function fixedBuckets(text) {
  const names = (text ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  for (const name of names) {
    if (!BUCKETS.includes(name)) {
      throw new UsageError(`PLANTED_FIX names an unknown bucket '${name}' (known: ${BUCKETS.join(", ")})`);
    }
  }
  return [...new Set(names)].sort((a, b) => BUCKETS.indexOf(a) - BUCKETS.indexOf(b));
}

/**
 * Returns `{ mode, opts, settings }`. mode is "sweep" | "check" | "minimize" | "replay" | "help"; settings is
 * what the per-seed work needs (see seeds.mjs).
 */
export function parseCommandLine(argv, env) {
  const given = readFlags(argv);
  const mode = given.has("help")
    ? "help"
    : given.has("seed")
      ? "replay"
      : given.has("minimize")
        ? "minimize"
        : given.has("check") || given.has("seeds")
          ? "check"
          : "sweep";
  for (const name of given.keys()) {
    if (!FLAGS[name].modes.includes(mode)) {
      const modeFlag = { sweep: "a sweep (--from/--count/--out)", check: "--check", minimize: "--minimize", replay: "--seed", help: "--help" };
      throw new UsageError(`--${name} cannot be used with ${modeFlag[mode]}`);
    }
  }

  const size = given.get("size") ?? "small";
  if (!Object.hasOwn(SIZES, size)) {
    throw new UsageError(`--size wants one of ${Object.keys(SIZES).join(", ")} (got '${size}')`);
  }
  const envCost = env.PLANTED_COST_MS;
  const costMs = given.has("cost-ms")
    ? costValue("--cost-ms", given.get("cost-ms"))
    : envCost !== undefined && envCost !== ""
      ? costValue("PLANTED_COST_MS", envCost)
      : 2;
  const hangText = env.PLANTED_HANG_SEED;
  const settings = {
    size,
    costMs,
    fixed: fixedBuckets(env.PLANTED_FIX),
    hangSeed: hangText !== undefined && hangText !== "" ? seedValue("PLANTED_HANG_SEED", hangText) : null,
  };
  const jobs = given.has("jobs") ? intValue("--jobs", given.get("jobs"), 1, MAX_JOBS, `an integer from 1 to ${MAX_JOBS}`) : 1;

  if (mode === "help") return { mode, opts: {}, settings };
  if (mode === "replay") return { mode, opts: { seed: seedValue("--seed", given.get("seed")) }, settings };
  if (mode === "check") {
    if (!given.has("seeds")) throw new UsageError("--check needs --seeds LIST (comma-separated seeds)");
    const list = given.get("seeds");
    const seeds = list.split(",").map((s) => seedValue("--seeds", s.trim()));
    return { mode, opts: { seeds, json: given.has("json"), jobs }, settings };
  }
  if (mode === "minimize") {
    if (!given.has("seeds")) throw new UsageError("--minimize needs --seeds LIST (comma-separated seeds)");
    if (!given.has("out") || given.get("out") === "") throw new UsageError("--minimize needs --out DIR (where failures/<seed>/ are written)");
    const seeds = given.get("seeds").split(",").map((s) => seedValue("--seeds", s.trim()));
    return { mode, opts: { seeds, out: given.get("out"), jobs }, settings };
  }

  for (const name of ["from", "count", "out"]) {
    if (!given.has(name)) throw new UsageError(`--${name} is required for a sweep (see --help)`);
  }
  const from = seedValue("--from", given.get("from"));
  const count = intValue("--count", given.get("count"), 0, Number.MAX_SAFE_INTEGER, "an integer >= 0");
  if (count > 0 && from > Number.MAX_SAFE_INTEGER - (count - 1)) {
    throw new UsageError(`--from ${from} with --count ${count} runs past the largest seed ${Number.MAX_SAFE_INTEGER}`);
  }
  const out = given.get("out");
  if (out === "") throw new UsageError("--out wants a directory path (got '')");
  const shrinkText = given.get("max-shrinks");
  const maxShrinks =
    shrinkText === undefined || shrinkText === "unlimited"
      ? null
      : intValue("--max-shrinks", shrinkText, 0, Number.MAX_SAFE_INTEGER, "an integer >= 0 or 'unlimited'");
  return { mode, opts: { from, count, out, jobs, maxShrinks }, settings };
}
