// `demo explore` as a newcomer meets it: the bundled maze explored to its end, its crashes counted
// as findings, and the demo's own words agreeing with the counts above them. The expected numbers
// come from the maze's in-process closure (examples/maze/maze-core.mjs), not from the output.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import { CLI } from "../helpers/campaign.ts";
import { MAZE_SEEDS } from "../helpers/explore.ts";
import { scratchDirs } from "../helpers/scratch.ts";

const { freshDir } = scratchDirs("demo-explore");

interface MazeCore {
  closure(seeds: Uint8Array[], o: { depth: number }): Map<string, { crash: { signal: string } | null }>;
}
const core = (await import(pathToFileURL(join(MAZE_SEEDS, "..", "maze-core.mjs")).href)) as MazeCore;

// Depth 5 is the shallowest maze that crashes both ways, and keeps the demo to ~100 runs.
const DEPTH = 5;

test("demo explore counts the maze's crashes as findings and says so in the same numbers; the banner sees both seeds", () => {
  const seeds = readdirSync(MAZE_SEEDS).map((n) => readFileSync(join(MAZE_SEEDS, n)));
  const closure = core.closure(seeds, { depth: DEPTH });
  const crashes = [...closure.values()].filter((r) => r.crash !== null);
  const abort = crashes.filter((r) => r.crash!.signal === "SIGABRT").length;
  const segv = crashes.filter((r) => r.crash!.signal === "SIGSEGV").length;
  assert.ok(abort > 0 && segv > 0, "the maze crashes both ways at this depth");

  const dir = join(freshDir(), "demo");
  const r = spawnSync(process.execPath, [CLI, "demo", "explore", "--dir", dir], {
    encoding: "utf8",
    env: { ...process.env, MAZE_DEPTH: String(DEPTH) },
    timeout: 240_000,
  });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  const out = r.stdout;
  assert.match(out, new RegExp(`\\n  ${seeds.length} initial input\\(s\\) seen[ ,(]`), out);
  assert.match(out, new RegExp(`analysis observations: +${closure.size}\\n`), out);
  assert.match(out, new RegExp(`findings: +${crashes.length} crash\\(es\\), 0 hang\\(s\\) under 2 signature\\(s\\)\\n`), out);
  assert.match(out, new RegExp(`\\n${crashes.length} new crash\\(es\\) or hang\\(s\\) recorded in this session\\n`), out);
  assert.ok(
    out.includes(`\n${crashes.length} of them crash the maze, and each is a finding: ${abort} by SIGABRT at the treasure, ${segv} by SIGSEGV where a dash leaves the map; examples/maze/README.md explains them.\n`),
    out,
  );
  assert.ok(out.includes(`Next: fuzzfleet failures --corpus ${join(dir, "corpus")} -v`), out);
  assert.doesNotMatch(out, /exit 134|exit 139/, "the maze no longer merely exits with a signal's number");
  const stats = JSON.parse(readFileSync(join(dir, "stats.json"), "utf8")) as { findings: { crashes: number; groups: unknown[] } };
  assert.equal(stats.findings.crashes, crashes.length);
  assert.equal(stats.findings.groups.length, 2, "one signature for the treasure, one for the dash off the map");
});
