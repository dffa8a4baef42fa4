// The package as a user gets it: `npm pack` of this checkout holds what an install needs and
// nothing else, and `npm install -g` of that tarball into a fresh prefix builds the native parts
// and gives a `fuzzfleet` that runs a real campaign.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { scratchDirs } from "../helpers/scratch.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const { freshDir } = scratchDirs("package-install");
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

interface Packed {
  filename: string;
  files: { path: string }[];
}

describe("the installable package", () => {
  let dir = "";
  let packed!: Packed;
  before(() => {
    dir = freshDir();
    // dist/ is already built by `npm test`; --ignore-scripts keeps `prepare` from rebuilding it
    // under the feet of the tests that run it meanwhile.
    const out = execFileSync(npm, ["pack", "--json", "--ignore-scripts", "--pack-destination", dir], { cwd: ROOT, encoding: "utf8" });
    packed = (JSON.parse(out) as Packed[])[0]!;
  });

  it("holds the compiled CLI, the native sources, the examples and the docs, and no tests, benchmarks or TypeScript sources", () => {
    const paths = packed.files.map((f) => f.path);
    for (const needed of ["package.json", "README.md", "binding.gyp", "dist/cli/main.js", "native/spawn.c", "native/watchdog.c", "examples/planted/planted.mjs", "examples/maze/maze.mjs", "docs/sweep.md"]) {
      assert.ok(paths.includes(needed), `${needed} is in the tarball`);
    }
    const stray = paths.filter((p) => /^(test|bench|src|scripts|\.ci|build|node_modules)\//.test(p) || p.endsWith(".ts") && !p.endsWith(".d.ts"));
    assert.deepEqual(stray, []);
  });

  it("installs globally into a fresh prefix, builds its native parts, and runs --version and a short demo sweep", { timeout: 15 * 60_000 }, () => {
    const prefix = join(dir, "prefix");
    const install = spawnSync(npm, ["install", "-g", "--prefix", prefix, "--no-audit", "--no-fund", "--prefer-offline", join(dir, packed.filename)], {
      cwd: dir,
      encoding: "utf8",
      timeout: 12 * 60_000,
    });
    assert.equal(install.status, 0, `npm install -g failed:\n${install.stdout}\n${install.stderr}`);
    const bin = join(prefix, "bin", "fuzzfleet");
    assert.ok(existsSync(join(prefix, "lib", "node_modules", "fuzzfleet", "build", "Release", "fuzzfleet_spawn.node")), "the native starter was built on install");
    const version = spawnSync(bin, ["--version"], { encoding: "utf8" });
    assert.equal(version.status, 0, version.stderr);
    assert.equal(version.stdout.trim(), (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version);
    const demo = spawnSync(bin, ["demo", "--for", "10s", "--dir", join(dir, "demo")], { encoding: "utf8", timeout: 120_000 });
    assert.equal(demo.status, 0, `${demo.stdout}\n${demo.stderr}`);
    assert.match(demo.stdout, /distinct failures/);
  });
});
