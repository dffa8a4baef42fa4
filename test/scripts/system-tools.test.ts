// `npm test` checks the system tools the chosen test files drive before any test runs: without
// them (and without root's apt-get) it stops at once with the command that installs them.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

const ROOT = join(import.meta.dirname, "..", "..");
const toolsModule = join(ROOT, "scripts", "system-tools.mjs");
const { missingTools } = (await import(toolsModule)) as { missingTools(files: string[]): { tool: string }[] };

const made: string[] = [];
after(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** A PATH holding only this Node: no apt-get, no mpirun, no afl-fuzz. */
function bareEnv(): NodeJS.ProcessEnv {
  const bin = mkdtempSync(join(tmpdir(), "fuzzfleet-bare-path-"));
  made.push(bin);
  symlinkSync(process.execPath, join(bin, "node"));
  return { ...process.env, PATH: bin };
}

describe("npm test's system tools check", () => {
  it("stops before building or testing, naming the missing tools and the one command to install them", () => {
    const r = spawnSync(process.execPath, ["scripts/test.mjs", "launch/mpirun", "explore/afl-hybrid"], { cwd: ROOT, env: bareEnv(), encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /system tools this machine lacks: AFL\+\+ \(afl-fuzz\), Open MPI \(mpirun\)\.\n/);
    assert.match(r.stderr, /\n {2}sudo apt-get update && sudo apt-get install -y afl\+\+ openmpi-bin\n/);
    assert.doesNotMatch(r.stdout + r.stderr, /# tests|# pass/, "no test ran");
  });

  it("a file that drives no system tool needs none; one that drives the browser needs Chromium", () => {
    const saved = process.env.PATH;
    process.env.PATH = bareEnv().PATH;
    try {
      assert.deepEqual(missingTools([join(ROOT, "test/core/ranges.test.ts")]), []);
      assert.deepEqual(missingTools([join(ROOT, "test/launch/mpirun.test.ts")]).map((t) => t.tool), ["Open MPI (mpirun)"]);
    } finally {
      process.env.PATH = saved;
    }
  });
});
