// The docs and `--help` cannot drift apart: every long option a command's help lists is named in
// the docs, and every fuzzfleet option the docs name in code is one some command's help lists.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { CLI } from "../helpers/campaign.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const COMMANDS = ["init", "run", "status", "failures", "export", "resweep", "reset", "demo", "coordinate", "worker", "explore", "ui", "report", "launch"];
/** Options of other programs the docs show in their own command lines (mpirun, srun, kubectl, node, the bundled generator). */
const OTHER_PROGRAMS = new Set(["--allow-run-as-root", "--from-literal", "--import", "--kill-on-bad-exit", "--max-shrinks", "--mca", "--minimize", "--oversubscribe", "--seed", "--seeds", "--tag-output", "--allow-scripts", "--location"]);

function helpOptions(args: string[]): Set<string> {
  const r = spawnSync(process.execPath, [CLI, ...args, "--help"], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return new Set([...r.stdout.matchAll(/(?<![\w-])--[a-z][a-z-]*/g)].map((m) => m[0]).filter((o) => o !== "--help"));
}

const docs = ["README.md", ...readdirSync(join(ROOT, "docs")).filter((n) => n.endsWith(".md")).map((n) => join("docs", n))].map((p) => readFileSync(join(ROOT, p), "utf8")).join("\n");

test("every long option of every command's --help is named in the docs", () => {
  const missing: string[] = [];
  for (const command of COMMANDS) {
    for (const option of helpOptions([command])) {
      if (!new RegExp(`${option}(?![a-z-])`).test(docs)) missing.push(`${command} ${option}`);
    }
  }
  assert.deepEqual(missing, []);
});

test("every fuzzfleet option the docs show in code exists in some command's --help", () => {
  const known = new Set([...helpOptions([]), ...COMMANDS.flatMap((c) => [...helpOptions([c])])]);
  const inCode = [...docs.matchAll(/`[^`\n]*`/g)].flatMap((m) => [...m[0].matchAll(/(?<![\w-])--[a-z][a-z-]*/g)].map((o) => o[0]));
  const unknown = [...new Set(inCode)].filter((o) => !known.has(o) && !OTHER_PROGRAMS.has(o) && o !== "--help").sort();
  assert.deepEqual(unknown, []);
});
