#!/usr/bin/env node
// planted: a fast, deterministic example generator with planted bugs, obeying fuzzfleet's
// generator contract. See README.md in this directory for the flags, bugs, rates and env hooks.
//
// Exit codes: 0 no finds (or all checked seeds ok), 1 finds (or a checked seed not ok),
// 2 usage error, 3 internal error (never on the normal path).

import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseCommandLine, UsageError, USAGE } from "./cli-args.mjs";
import { checkProgram, formatProgram, BUCKETS } from "./machine.mjs";
import { generateProgram } from "./generate.mjs";
import { shrinkProgram } from "./shrink.mjs";
import { SeedPool } from "./pool.mjs";
import { checkSeeds } from "./seeds.mjs";

// The repro line is run from wherever the failure is read (a campaign directory, a bug report),
// so it names this script by its absolute path, quoted for a POSIX shell when it needs to be.
const SCRIPT = fileURLToPath(import.meta.url);
/** Said of every planted slip's quarantine: an invalid test emitted on purpose, not a generator bug to fix. */
const PLANTED_SLIP = "1 test in 1,000, to show the quarantine (examples/planted/README.md)";

function shellWord(text) {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;
}

function repro(seed, size) {
  return `node ${shellWord(SCRIPT)} --seed ${seed} --size ${size}`;
}

/** Seeds per batch and job: a batch's failures are written as soon as it is checked, so they appear as the sweep goes. */
const BATCH_PER_JOB = 256;

async function sweep(opts, settings) {
  const pool = new SeedPool(Math.min(opts.jobs, Math.max(1, opts.count)), settings);
  try {
    mkdirSync(join(opts.out, "failures"), { recursive: true });
    mkdirSync(join(opts.out, "quarantine"), { recursive: true });
    const failures = [];
    const quarantined = [];
    let shrunkCount = 0;
    // Batches run in seed order and the cap takes the lowest seeds first, so which failures get
    // shrunk depends neither on --jobs nor on the batch size.
    let shrinksLeft = opts.maxShrinks ?? Infinity;
    const batch = BATCH_PER_JOB * pool.jobs;
    const end = opts.from + opts.count;
    for (let from = opts.from; from < end; from += batch) {
      const found = await pool.sweep(from, Math.min(batch, end - from));
      const failing = found.filter((f) => f.bucket !== "quarantine");
      const invalid = found.filter((f) => f.bucket === "quarantine");
      const toShrink = failing.slice(0, shrinksLeft).map((f) => f.seed);
      shrinksLeft -= toShrink.length;
      const shrunk = new Map((await pool.shrink(toShrink)).map((s) => [s.seed, s]));
      shrunkCount += shrunk.size;
      for (const f of failing) writeFailure(opts.out, f, shrunk.get(f.seed), settings);
      for (const q of invalid) writeQuarantined(opts.out, q, settings);
      failures.push(...failing);
      quarantined.push(...invalid);
    }

    const buckets = Object.fromEntries(BUCKETS.map((b) => [b, failures.filter((f) => f.bucket === b).length]));
    const summary = {
      generator: "planted",
      size: settings.size,
      from: opts.from,
      count: opts.count,
      ok: opts.count - failures.length - quarantined.length,
      finds: failures.length,
      buckets,
      quarantine: quarantined.length,
      shrunk: shrunkCount,
      unshrunk: failures.length - shrunkCount,
      max_shrinks: opts.maxShrinks,
      fixed: settings.fixed,
    };
    writeFileSync(join(opts.out, "summary.json"), `${JSON.stringify(summary, null, 2)}\n`);
    const range = opts.count === 0 ? "no seeds" : `seeds ${opts.from}..${opts.from + opts.count - 1}`;
    const perBucket = BUCKETS.filter((b) => buckets[b] > 0).map((b) => `${b} ${buckets[b]}`);
    process.stdout.write(
      `planted: ${range} (${settings.size}): ${failures.length} finds` +
        (perBucket.length ? ` (${perBucket.join(", ")})` : "") +
        `, ${quarantined.length} quarantined, ${shrunkCount} shrunk\n`,
    );
    return failures.length > 0 ? 1 : 0;
  } finally {
    await pool.close();
  }
}

/**
 * The find's signature: its bucket and the message without what differs per seed (line numbers,
 * values), so that all seeds of one planted idiom group together before they are minimized.
 */
function signature(failure) {
  const idiom = /cancelling '([^']+)'/.exec(failure.msg);
  if (idiom) return `peephole cancelling '${idiom[1]}'`;
  if (failure.bucket === "hang-detected") return "step budget exhausted in pow";
  return failure.msg.replace(/:.*$/, "").replace(/#\d+/, "#N");
}

/** Minimize mode: shrinks each failing seed and writes it as a minimized failure entry. */
async function minimize(opts, settings) {
  const pool = new SeedPool(Math.min(opts.jobs, Math.max(1, opts.seeds.length)), settings);
  try {
    const verdicts = await pool.check(opts.seeds);
    const failing = verdicts.filter((v) => v.bucket !== "ok" && v.bucket !== "quarantine");
    const shrunk = new Map((await pool.shrink(failing.map((f) => f.seed))).map((s) => [s.seed, s]));
    mkdirSync(join(opts.out, "failures"), { recursive: true });
    for (const f of failing) {
      const text = formatProgram(generateProgram(f.seed, settings.size));
      writeFailure(opts.out, { ...f, text }, shrunk.get(f.seed), settings);
    }
    process.stdout.write(`planted: minimized ${shrunk.size} of ${opts.seeds.length} seeds (${settings.size})\n`);
    return failing.length > 0 ? 1 : 0;
  } finally {
    await pool.close();
  }
}

function writeQuarantined(out, q, settings) {
  const header = `# seed ${q.seed} (size ${settings.size}): ${q.msg}\n`;
  writeFileSync(join(out, "quarantine", `${q.seed}.txt`), header + q.text);
  // The reason, without the details that differ per seed, so that reports can group by it.
  const why = q.msg.replace(/^invalid emitted test: /, "").replace(/ at line \d+.*$/, "");
  mkdirSync(join(out, "quarantine", "why"), { recursive: true });
  // "planted:" tells fuzzfleet the invalid test was emitted on purpose (docs/generator-contract.md).
  writeFileSync(join(out, "quarantine", "why", `${q.seed}.txt`), `planted: ${why}, ${PLANTED_SLIP}\n`);
}

function writeFailure(out, failure, shrunk, settings) {
  const dir = join(out, "failures", String(failure.seed));
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const minText = shrunk ? shrunk.minText : failure.text;
  const meta = {
    seed: failure.seed,
    bucket: failure.bucket,
    shrunk: shrunk !== undefined,
    msg: failure.msg,
    repro: repro(failure.seed, settings.size),
    key_file: "input.min.txt",
    signature: signature(failure),
  };
  const minimized = shrunk
    ? `yes (${shrunk.minLength} of ${shrunk.length} instructions)`
    : "NO (--max-shrinks cap reached; input.min.txt is the full test)";
  const report = [
    `bucket:    ${failure.bucket}`,
    `seed:      ${failure.seed}`,
    `size:      ${settings.size}`,
    `message:   ${failure.msg}`,
    `repro:     ${meta.repro}`,
    `minimized: ${minimized}`,
    "",
    "minimized test (input.min.txt):",
    minText,
  ].join("\n");
  writeFileSync(join(dir, "meta.json"), `${JSON.stringify(meta, null, 2)}\n`);
  writeFileSync(join(dir, "input.txt"), failure.text);
  writeFileSync(join(dir, "input.min.txt"), minText);
  writeFileSync(join(dir, "report.txt"), report);
}

async function check(opts, settings) {
  const pool = new SeedPool(Math.min(opts.jobs, Math.max(1, opts.seeds.length)), settings);
  try {
    const results = await pool.check(opts.seeds);
    let text = "";
    for (const r of results) {
      text += opts.json
        ? `${JSON.stringify({ seed: r.seed, bucket: r.bucket, msg: r.msg })}\n`
        : `seed ${r.seed}: ${r.bucket}: ${r.msg}\n`;
    }
    process.stdout.write(text);
    return results.some((r) => r.bucket !== "ok") ? 1 : 0;
  } finally {
    await pool.close();
  }
}

function replay(opts, settings) {
  const fixed = new Set(settings.fixed);
  const [verdict] = checkSeeds([opts.seed], settings);
  const program = generateProgram(opts.seed, settings.size);
  const lines = [`seed ${opts.seed} (size ${settings.size}): ${program.length} instructions`, listing(program)];
  lines.push(`verdict:   ${verdict.bucket}`, `message:   ${verdict.msg}`);
  if (verdict.bucket !== "ok" && verdict.bucket !== "quarantine") {
    const min = shrinkProgram(program, (c) => checkProgram(c, fixed).bucket === verdict.bucket);
    lines.push(`minimized (${min.length} instructions):`, listing(min));
  }
  lines.push(`repro:     ${repro(opts.seed, settings.size)}`);
  process.stdout.write(`${lines.join("\n")}\n`);
  return verdict.bucket === "ok" ? 0 : 1;
}

function listing(program) {
  return formatProgram(program)
    .split("\n")
    .filter((l) => l !== "")
    .map((l, i) => `${String(i + 1).padStart(5)}  ${l}`)
    .join("\n");
}

async function main(argv, env) {
  // Test hook: exit with the given code before doing anything else.
  if (env.PLANTED_EXIT !== undefined && env.PLANTED_EXIT !== "") {
    const code = Number(env.PLANTED_EXIT);
    if (!Number.isInteger(code) || code < 0 || code > 255) {
      throw new UsageError(`PLANTED_EXIT wants an exit code from 0 to 255 (got '${env.PLANTED_EXIT}')`);
    }
    return code;
  }
  const { mode, opts, settings } = parseCommandLine(argv, env);
  switch (mode) {
    case "help":
      process.stdout.write(USAGE);
      return 0;
    case "replay":
      return replay(opts, settings);
    case "check":
      return check(opts, settings);
    case "minimize":
      return minimize(opts, settings);
    default:
      return sweep(opts, settings);
  }
}

// Exit 1 means "finds" to fuzzfleet, so no internal failure may ever leave with Node's default 1.
function internalError(err) {
  process.stderr.write(`planted: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(3);
}
process.on("uncaughtException", internalError);
process.on("unhandledRejection", internalError);

try {
  process.exitCode = await main(process.argv.slice(2), process.env);
} catch (err) {
  if (err instanceof UsageError) {
    process.stderr.write(`planted: ${err.message}\n`);
    process.exitCode = 2;
  } else {
    internalError(err);
  }
}
