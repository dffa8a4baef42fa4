// The SymCC fixture (test/fixtures/symcc) as its tests use it: where it is, the check that its
// runtime can load, one direct run of the target, and what the QSYM runtime's log says about
// its solver.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../helpers/campaign.ts";

export const FIXTURE = join(ROOT, "test/fixtures/symcc");
export const TARGET = join(FIXTURE, "tlv-symcc");
// QSYM's Z3 timeout (qsym/pintool/solver.cpp, kSolverTimeout = 10 s, wall-clock), in the
// microseconds of the runtime's `[STAT] SMT: { "solving_time": N }` lines: a check that took this
// long was cancelled and answered "unknown".
export const SOLVER_TIMEOUT_US = 10_000_000;

export function requireRuntime(): void {
  const ldd = spawnSync("ldd", [TARGET], { encoding: "utf8" });
  assert.equal(ldd.status, 0, `ldd ${TARGET} failed: ${ldd.stderr}`);
  assert.doesNotMatch(ldd.stdout, /libz3\.so\.4 => not found/, "the SymCC fixture needs Z3's library: install it with `apt-get install -y libz3-4`");
  assert.match(ldd.stdout, /libsymcc-rt\.so => \S*test\/fixtures\/symcc\/libsymcc-rt\.so/, "tlv-symcc must load the runtime beside it");
}

/**
 * The longest single solver check a run's log shows, in µs. The runtime logs its cumulative
 * solving time just before each check and again after it, so a check's time is the step between
 * two lines in a row; a log cut at its start (a finding's tail) gives the checks it holds whole.
 */
export function longestCheck(log: string): number {
  let longest = 0;
  let before: number | null = null;
  for (const m of log.matchAll(/"solving_time": (\d+)/g)) {
    const total = Number(m[1]);
    if (before !== null) longest = Math.max(longest, total - before);
    before = total;
  }
  return longest;
}

/** How many solver checks a run's log announces (a `total_time` line is written just before each). */
export function checksAnnounced(log: string): number {
  return log.match(/"total_time"/g)?.length ?? 0;
}

/** A run's children: `name:sha256` of every file it wrote, by name. */
export function childrenOf(outDir: string): string[] {
  return readdirSync(outDir)
    .sort()
    .map((n) => `${n}:${createHash("sha256").update(readFileSync(join(outDir, n))).digest("hex")}`);
}

export interface DirectRun {
  children: string[];
  log: string;
}

/** Prepares `outDir` (empty) and the target's argv and environment in file mode, as the README's reference runs it. */
function fileMode(input: string, outDir: string): { argv: string[]; env: NodeJS.ProcessEnv } {
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  return { argv: [input], env: { SYMCC_OUTPUT_DIR: outDir, SYMCC_INPUT_FILE: input } };
}

/** The target run directly on `input` in file mode, killed after `timeoutMs`. */
export function runDirect(input: string, outDir: string, timeoutMs = 10_000): DirectRun {
  const { argv, env } = fileMode(input, outDir);
  const r = spawnSync(TARGET, argv, { env, encoding: "utf8", timeout: timeoutMs, killSignal: "SIGKILL" });
  return { children: childrenOf(outDir), log: r.stderr ?? "" };
}

/**
 * The target run directly on `input`, stopped (SIGSTOP) as soon as its log announces solver
 * check `check` and continued `freezeMs` later: the check is then under way, and a freeze longer
 * than the solver's timeout makes it time out.
 */
export function runFrozenAt(input: string, outDir: string, check: number, freezeMs: number): Promise<DirectRun> {
  const { argv, env } = fileMode(input, outDir);
  return new Promise((resolve, reject) => {
    const p = spawn(TARGET, argv, { env, stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    let stopped = false;
    let wake: NodeJS.Timeout | null = null;
    p.stderr.setEncoding("utf8");
    p.stderr.on("data", (chunk: string) => {
      log += chunk;
      if (!stopped && checksAnnounced(log) >= check) {
        stopped = true;
        p.kill("SIGSTOP");
        wake = setTimeout(() => p.kill("SIGCONT"), freezeMs);
      }
    });
    p.on("error", reject);
    p.on("close", () => {
      if (wake) clearTimeout(wake);
      resolve({ children: childrenOf(outDir), log });
    });
  });
}
