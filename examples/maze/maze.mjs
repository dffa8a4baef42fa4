#!/usr/bin/env node
// A stand-in for a SymCC-built binary: runs the maze program on one input and writes the child
// inputs its path yields, following SymCC's conventions, so it and a real SymCC target are
// interchangeable under `fuzzfleet explore`.
//
//   input   the file named by the first argument, else by SYMCC_INPUT_FILE, else stdin;
//           only the first 16 bytes are read
//   output  one file per child in SYMCC_OUTPUT_DIR, named 000000, 000001, ... (never *.hints);
//           without SYMCC_OUTPUT_DIR the count goes to stderr and nothing is written
//   exit    0 after a normal run; a crash ends the process by a real SIGABRT or SIGSEGV (children
//           are written first), as a crashing program would, so that fuzzfleet records a finding;
//           2 for a bad argument, variable or unreadable input; 1 when a child cannot be written
//   env     MAZE_DEPTH (1..16, default 8): the most moves a walk makes;
//           MAZE_COST_MS (default 0): milliseconds of CPU to burn per run
import { closeSync, openSync, readSync, writeFileSync } from "node:fs";
import { constants as osConstants } from "node:os";
import { join } from "node:path";
import { DEFAULT_DEPTH, INPUT_BYTES, MAX_DEPTH, MIN_DEPTH, runMaze } from "./maze-core.mjs";

function usage(message) {
  process.stderr.write(`maze: ${message}\n`);
  process.exit(2);
}

function intFromEnv(name, fallback, min, max) {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || value < min || value > max) {
    usage(`${name} wants an integer from ${min} to ${max} (got '${raw}')`);
  }
  return value;
}

/** Reads up to `max` bytes from fd, stopping at end of file; never reads further. */
function readPrefix(fd, max) {
  const buf = Buffer.alloc(max);
  let got = 0;
  while (got < max) {
    let n;
    try {
      n = readSync(fd, buf, got, max - got, null);
    } catch (err) {
      // A non-blocking stdin pipe reports EAGAIN until the writer catches up.
      if (err.code === "EAGAIN") {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2);
        continue;
      }
      if (err.code === "EOF") break;
      throw err;
    }
    if (n === 0) break;
    got += n;
  }
  return buf.subarray(0, got);
}

function readInput(path) {
  if (path === undefined) return readPrefix(0, INPUT_BYTES);
  let fd;
  try {
    fd = openSync(path, "r");
    return readPrefix(fd, INPUT_BYTES);
  } catch (err) {
    usage(`cannot read the input file '${path}': ${err.message}`);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Spins the CPU for `ms` milliseconds, so a benchmark can choose what one run costs. */
function burn(ms) {
  const until = process.hrtime.bigint() + BigInt(Math.round(ms * 1e6));
  while (process.hrtime.bigint() < until) {
    // busy on purpose
  }
}

const args = process.argv.slice(2);
if (args.length > 1) usage(`takes at most one argument, the input file (got ${args.length})`);
const depth = intFromEnv("MAZE_DEPTH", DEFAULT_DEPTH, MIN_DEPTH, MAX_DEPTH);
const costMs = intFromEnv("MAZE_COST_MS", 0, 0, 3_600_000);
const inputPath = args[0] ?? (process.env.SYMCC_INPUT_FILE || undefined);

const input = readInput(inputPath);
burn(costMs);
const run = runMaze(input, { depth });

const outDir = process.env.SYMCC_OUTPUT_DIR;
if (outDir) {
  for (const [i, child] of run.children.entries()) {
    const name = String(i).padStart(6, "0");
    try {
      writeFileSync(join(outDir, name), child);
    } catch (err) {
      process.stderr.write(`maze: cannot write child ${name} into SYMCC_OUTPUT_DIR '${outDir}': ${err.message}\n`);
      process.exit(1);
    }
  }
}
const summary = `${run.children.length} children${outDir ? "" : " (SYMCC_OUTPUT_DIR is not set: none written)"}`;
if (run.crash) {
  // Stderr is written synchronously (a file or a pipe), so the line is out before the signal.
  process.stderr.write(`maze: crashed at byte ${run.crash.pos}: ${run.crash.message}; ${summary}\n`);
  process.kill(process.pid, run.crash.signal);
  // Only reached where the signal is ignored or handled: end as a shell reports that signal.
  process.exit(128 + osConstants.signals[run.crash.signal]);
}
process.stderr.write(`maze: ${run.ending.message}; ${summary}\n`);
