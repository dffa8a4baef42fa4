#!/usr/bin/env node
// Runs every test file under test/ with Node's built-in runner.
// Node 20 does not expand globs or look for .ts files itself, so the files are listed here
// explicitly; a run that finds no test file fails instead of passing silently.
// The CLI is built first because integration tests spawn the compiled `dist/cli/main.js`,
// exactly as a user runs it.
//   npm test                 every test file (system tools it needs are checked first: scripts/system-tools.mjs)
//   npm test -- lock store   only files whose path contains "lock" or "store"
//   TEST_CONCURRENCY=N       test files run at once (default 3)
//   TEST_BOUND_MINUTES=N     stop (and fail) a run that takes longer than N minutes (default 45)
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureSystemTools } from "./system-tools.mjs";

function findTests(dir) {
  const found = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...findTests(path));
    else if (entry.name.endsWith(".test.ts")) found.push(path);
  }
  return found.sort();
}

// The longest files start first: the runner starts files in the order given, and a file of one or
// two minutes started last would keep one runner busy while the others idle. These are the
// longest in CI (1–2.5 minutes each; their tests run one after another inside the file).
const LONGEST = [
  "test/launch/mpirun.test.ts",
  "test/package/install.test.ts",
  "test/explore/symcc.test.ts",
  "test/examples/csmith-cvise.test.ts",
  "test/distributed/minimize-workers.test.ts",
  "test/faults/kills.test.ts",
  "test/launch/slurm.test.ts",
  "test/explore/maze.test.ts",
  "test/faults/store-blocked.test.ts",
];
const rank = (f) => (LONGEST.includes(f) ? LONGEST.indexOf(f) : LONGEST.length);

const filters = process.argv.slice(2);
const files = findTests("test")
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
if (files.length === 0) {
  console.error(`no test files found under test/${filters.length ? ` matching ${filters.join(", ")}` : ""}`);
  process.exit(1);
}
// The real browser, AFL++, Open MPI, Slurm, Csmith, C-Vise and Z3 the chosen files drive: installed
// here as root with apt-get, else the run stops before any test with the command to run.
const toolProblem = ensureSystemTools(files);
if (toolProblem !== null) {
  console.error(toolProblem);
  process.exit(1);
}
execFileSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.build.json"], { stdio: "inherit" });
// Three files at once on a 2-core machine: about a third of a file's time is spent waiting (for a
// budget, an idle window, a process to die, a reader to let go), so two runners leave the CPUs idle
// that long; a third fills it.
const concurrency = process.env.TEST_CONCURRENCY ?? "3";
// A test file whose process never exits (a promise nobody settles, a handle left open) would hold
// the run forever; past this bound the run is killed and fails, saying so.
const boundMinutes = Number(process.env.TEST_BOUND_MINUTES ?? 45);
// The tests' temporary files go into a directory of this run's own (TMPDIR, which os.tmpdir(),
// mktemp and Chromium follow), so that whatever a test leaves behind is seen, whatever else uses
// the system's one: it is named at the end and fails the run, and the directory is removed either way.
const runTmp = mkdtempSync(join(tmpdir(), "fuzzfleet-test-run-"));
const result = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", `--test-concurrency=${concurrency}`, ...files],
  { stdio: "inherit", timeout: boundMinutes * 60_000, killSignal: "SIGKILL", env: { ...process.env, TMPDIR: runTmp } },
);
// tsx-<uid> is tsx's compile cache, not a test's leftover.
const leftovers = readdirSync(runTmp).filter((name) => !/^tsx-\d+$/.test(name)).sort();
rmSync(runTmp, { recursive: true, force: true });
if (result.error?.code === "ETIMEDOUT" || result.signal === "SIGKILL") {
  console.error(`the test run took longer than ${boundMinutes} minutes and was stopped: a test file hung (the last files above without a summary)`);
  process.exit(1);
}
// A test that leaves files behind fails the run: a user's `npm test` must not fill their disk.
if (leftovers.length > 0) {
  console.error(
    `the tests left ${leftovers.length} entr(ies) in their temporary directory (removed now): ${leftovers.slice(0, 20).join(", ")}${leftovers.length > 20 ? ", …" : ""}; ` +
      "the test that made one must remove it in its clean-up (after/afterEach)",
  );
  process.exit(1);
}
process.exit(result.status ?? 1);
