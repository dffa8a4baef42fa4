import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_CONFIG_NAME, loadConfig } from "../../src/config/load.ts";
import { knownKeys } from "../../src/config/schema.ts";
import { initTemplate } from "../../src/config/template.ts";
import { pickLane } from "../../src/core/schedule.ts";

const scratchDirs: string[] = [];
function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-config-"));
  scratchDirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
});

function writeTemplateBesideExamples(): string {
  const dir = scratchDir();
  mkdirSync(join(dir, "examples", "planted"), { recursive: true });
  const file = join(dir, DEFAULT_CONFIG_NAME);
  writeFileSync(file, initTemplate(3));
  return file;
}

test("the init template loads and is set up for the bundled example generator", () => {
  const file = writeTemplateBesideExamples();
  const dir = join(file, "..");
  const config = loadConfig(file);
  assert.deepStrictEqual(config.generator, {
    command: ["node", "examples/planted/planted.mjs", "--from", "{seed_from}", "--count", "{count}",
      "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"],
    identity: [join(dir, "examples/planted/*.mjs")],
    results: "{out}",
    check: ["node", "examples/planted/planted.mjs", "--check", "--seeds", "{seeds}", "--json"],
  });
  assert.deepStrictEqual(config.lanes, [
    { name: "small", baseSeed: 1, weight: 2, enabled: true, jobs: 3, args: ["--size", "small"] },
    { name: "large", baseSeed: 1000000, weight: 1, enabled: true, jobs: 3, args: ["--size", "large"] },
  ]);
  assert.equal(config.app, null, "the [app] example is commented out");
  assert.deepStrictEqual(config.defaults, {
    jobs: 3, nice: 19, idleIo: true, chunkSeconds: 600, bootstrapSeeds: 40, maxShrinks: 20, hardTimeoutFloor: 180,
  });
  assert.deepStrictEqual(config.distributed, {
    port: 9999,
    bind: "",
    leaseSeconds: 120,
    drainGraceMinutes: 35,
    stopGraceSeconds: 15,
    transfer: { maxFiles: 10_000, maxBytes: 2 * 2 ** 30, maxFileBytes: 512 * 2 ** 20 },
  });
});

test("the init template mentions every key of every table, with a comment", () => {
  const lines = initTemplate().split("\n");
  const tables: [string, (string | number)[]][] = [
    ["defaults", ["defaults"]],
    ["generator", ["generator"]],
    ["app", ["app"]],
    ["lanes", ["lanes", "x"]],
    ["distributed", ["distributed"]],
  ];
  for (const [name, path] of tables) {
    for (const key of knownKeys(path) ?? assert.fail(`no keys for ${name}`)) {
      // The key is written out (maybe commented out) with a comment on its line or just above it.
      const section = lines.findIndex((l) => l.replace(/^# /, "").startsWith(`[${name === "lanes" ? "lanes." : name}`));
      const at = lines.findIndex((l, i) => i > section && new RegExp(`^(# )?${key} = `).test(l));
      assert.ok(at > 0, `${name}.${key} appears in the template`);
      assert.ok(/ # \S/.test(lines[at]) || lines[at - 1].startsWith("#"), `${name}.${key} is explained`);
    }
  }
  // A user uncommenting the [app] example gets a table that loads.
  const file = writeTemplateBesideExamples();
  writeFileSync(file, initTemplate().replace(/^# (\[app\]|path =|sources =)/gm, "$1"));
  const config = loadConfig(file);
  assert.ok(config.app !== null && config.app.path.endsWith("/app/build/app"));
});

test("the template says what weight 0 does: one chunk per session, not never; enabled = false parks a lane", () => {
  const lines = initTemplate().split("\n");
  const at = lines.findIndex((l) => l.startsWith("weight = "));
  const comment = lines.slice(at, at + 2).join(" ");
  assert.doesNotMatch(comment, /never picked/);
  assert.match(comment, /0 still runs one chunk per\s+#?\s*session/);
  assert.match(comment, /enabled = false/);
  // What the comment promises, as the scheduler does it.
  const chunks = new Map<string, number>();
  const picks: string[] = [];
  for (let i = 0; i < 10; i++) {
    const lane = pickLane([{ name: "busy", weight: 1 }, { name: "zero", weight: 0 }], chunks, new Set())!;
    chunks.set(lane, (chunks.get(lane) ?? 0) + 1);
    picks.push(lane);
  }
  assert.equal(picks.filter((p) => p === "zero").length, 1);
});
