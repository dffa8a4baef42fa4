// The layer rules of docs/architecture.md, read from the imports themselves: a folder of src/
// imports only folders of lower layers (never one of its own layer, never one above), so no two
// folders import each other; core/ is pure and imports nothing but itself, the errors and
// node:assert / node:crypto (hashing). Inside each campaign kind's wing (explore/, sweep/) the same rule holds between
// its rooms. A new import that breaks a rule fails here,
// naming the file, the line and the rule.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const SRC = fileURLToPath(new URL("../src/", import.meta.url));

/** Layers, lowest first. Files directly in src/ (errors.ts, exit-codes.ts) are "root", the lowest. */
export const LAYERS: readonly (readonly string[])[] = [
  ["root", "core", "util"],
  ["config", "files"],
  ["store", "exec", "lock", "net", "ui"],
  ["launch"],
  ["explore", "sweep"],
  ["worker"],
  ["cli"],
];

/**
 * The rooms of each campaign kind's wing (src/explore/, src/sweep/), lowest first: a room imports
 * only itself and lower rooms. Files directly in a wing (explore/defaults.ts) are "root", the
 * lowest. The two wings share a layer, so neither imports the other.
 */
export const WING_ROOMS: Readonly<Record<string, readonly (readonly string[])[]>> = {
  explore: [["root"], ["state"], ["executor", "master"], ["fleet"], ["views"], ["command"]],
  sweep: [["root"], ["generator"], ["engine"], ["fleet", "views"], ["session"]],
};

const PURE_CORE_NODE_MODULES = new Set(["node:assert", "node:assert/strict", "node:crypto"]);

function layerOf(folder: string): number {
  const i = LAYERS.findIndex((l) => l.includes(folder));
  assert.ok(i >= 0, `src/${folder}/ is in no layer: add it to LAYERS here and to docs/architecture.md`);
  return i;
}

function folderOf(file: string): string {
  const rel = relative(SRC, file).split("/");
  return rel.length === 1 ? "root" : rel[0]!;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? sources(join(dir, d.name)) : d.name.endsWith(".ts") ? [join(dir, d.name)] : [],
  );
}

interface Import {
  file: string;
  line: number;
  spec: string;
}

/** Static imports and re-exports (`from "…"`) and dynamic `import("…")` with a literal. */
function importsOf(file: string): Import[] {
  const out: Import[] = [];
  readFileSync(file, "utf8")
    .split("\n")
    .forEach((text, i) => {
      for (const m of text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)"([^"]+)"/g)) out.push({ file, line: i + 1, spec: m[1]! });
    });
  return out;
}

function violations(): string[] {
  const problems: string[] = [];
  for (const file of sources(SRC)) {
    const from = folderOf(file);
    const where = (imp: Import) => `src/${relative(SRC, imp.file)}:${imp.line}`;
    for (const imp of importsOf(file)) {
      if (!imp.spec.startsWith(".")) {
        if (from === "core" && !PURE_CORE_NODE_MODULES.has(imp.spec)) problems.push(`${where(imp)}: core/ is pure but imports '${imp.spec}'`);
        continue;
      }
      const target = resolve(dirname(file), imp.spec);
      const to = folderOf(target);
      if (to === from) continue;
      if (from === "core" && to !== "root") problems.push(`${where(imp)}: core/ is pure but imports ${to}/ ('${imp.spec}')`);
      const [a, b] = [layerOf(from), layerOf(to)];
      if (b >= a) {
        problems.push(
          `${where(imp)}: ${from}/ (layer ${a}) imports ${to}/ (layer ${b}) — '${imp.spec}'; ` +
            (b === a ? "folders of one layer never import each other" : "imports point down only"),
        );
      }
    }
  }
  return problems;
}

function roomLayerOf(wing: string, room: string): number {
  const i = WING_ROOMS[wing]!.findIndex((l) => l.includes(room));
  assert.ok(i >= 0, `src/${wing}/${room}/ is in no room layer: add it to WING_ROOMS here and to docs/architecture.md`);
  return i;
}

/** The room of a file below src/<wing>/, or null for a file outside it. */
function roomOf(wing: string, file: string): string | null {
  const rel = relative(join(SRC, wing), file);
  if (rel.startsWith("..")) return null;
  const parts = rel.split("/");
  return parts.length === 1 ? "root" : parts[0]!;
}

function wingViolations(wing: string): string[] {
  const problems: string[] = [];
  for (const file of sources(join(SRC, wing))) {
    const from = roomOf(wing, file)!;
    for (const imp of importsOf(file)) {
      if (!imp.spec.startsWith(".")) continue;
      const to = roomOf(wing, resolve(dirname(file), imp.spec));
      if (to === null || to === from) continue;
      const [a, b] = [roomLayerOf(wing, from), roomLayerOf(wing, to)];
      if (b >= a) {
        problems.push(
          `src/${relative(SRC, imp.file)}:${imp.line}: ${wing}/${from}/ (room ${a}) imports ${wing}/${to}/ (room ${b}) — '${imp.spec}'; ` +
            (b === a ? "rooms of one layer never import each other" : "imports point down only"),
        );
      }
    }
  }
  return problems;
}

test("every import of src/ points to a lower layer, and core/ stays pure", () => {
  assert.deepEqual(violations(), []);
});

test("every folder of src/ has a layer", () => {
  for (const d of readdirSync(SRC, { withFileTypes: true })) if (d.isDirectory()) layerOf(d.name);
});

for (const wing of Object.keys(WING_ROOMS)) {
  test(`inside ${wing}/, every import between rooms points to a lower room`, () => {
    assert.deepEqual(wingViolations(wing), []);
  });

  test(`every folder of src/${wing}/ has a room layer`, () => {
    for (const d of readdirSync(join(SRC, wing), { withFileTypes: true })) if (d.isDirectory()) roomLayerOf(wing, d.name);
  });
}
