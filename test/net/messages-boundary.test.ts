// The wire's boundary, read from the sources themselves (docs/architecture.md, "The three ports"):
// the frame schemas of src/net/messages.ts are imported only by the wire (net/), the worker
// (worker/) and each campaign's fleet edge, where frames are translated to and from the domain's
// own types: explore/fleet/ and sweep/fleet/. Everything else (the sweep engine's books, the
// generator contract, core/, the stores, the views) works on its own types, so a change of a frame
// touches the codec and its tests. A new import fails here, naming the file and the line.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const SRC = fileURLToPath(new URL("../../src/", import.meta.url));
const MESSAGES = "net/messages.ts";

/** Folders whose files may read and build frames. */
const WIRE_FOLDERS = ["net/", "worker/", "explore/fleet/", "sweep/fleet/"];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? sources(join(dir, d.name)) : d.name.endsWith(".ts") ? [join(dir, d.name)] : [],
  );
}

/** The lines (1-based) of `text`, a file at `rel` below src/, that import or re-export net/messages.ts, statically or dynamically. */
function messagesImports(rel: string, text: string): number[] {
  const code = text
    .split("\n")
    .map((line) => (/^\s*(\/\/|\/\*|\*)/.test(line) ? "" : line))
    .join("\n");
  const lineAt = (index: number) => code.slice(0, index).split("\n").length;
  const specs = [
    ...code.matchAll(/\b(?:import|export)\s+(?:type\s+)?(?:[^;"]*?\s+from\s+)?"([^"]+)"/gs),
    ...code.matchAll(/\bimport\(\s*"([^"]+)"\s*\)/g),
  ];
  return specs
    .filter((m) => m[1]!.startsWith(".") && relative(SRC, resolve(dirname(join(SRC, rel)), m[1]!)) === MESSAGES)
    .map((m) => lineAt(m.index!));
}

function mayImport(rel: string): boolean {
  return WIRE_FOLDERS.some((dir) => rel.startsWith(dir));
}

const importers = sources(SRC)
  .map((file) => relative(SRC, file))
  .map((rel) => ({ rel, lines: messagesImports(rel, readFileSync(join(SRC, rel), "utf8")) }))
  .filter((f) => f.lines.length > 0);

test("net/messages.ts is imported only by net/, worker/ and the fleet edges", () => {
  const outside = importers.filter((f) => !mayImport(f.rel)).flatMap((f) => f.lines.map((line) => `src/${f.rel}:${line}`));
  assert.deepEqual(outside, []);
});

test("the boundary check sees static, type-only, re-exporting, multi-line and dynamic imports of the wire", () => {
  const from = (rel: string, text: string) => messagesImports(rel, text);
  assert.deepEqual(from("generator/x.ts", 'import type { ProveFrame } from "../net/messages.ts";\n'), [1]);
  assert.deepEqual(from("core/x.ts", 'const a = 1;\nimport {\n  Hello,\n  Welcome,\n} from "../net/messages.ts";\n'), [2]);
  assert.deepEqual(from("engine/x.ts", 'export { heldUnit } from "../net/messages.ts";\n'), [1]);
  assert.deepEqual(from("report/x.ts", 'const m = await import("../net/messages.ts");\n'), [1]);
  assert.deepEqual(from("explore/state/x.ts", 'import { Hello } from "../../net/messages.ts";\n'), [1]);
  // A comment naming the file, and a module of the same name elsewhere, are no imports of it.
  assert.deepEqual(from("core/x.ts", '// the schemas (net/messages.ts) check every frame\nimport { a } from "./messages.ts";\n'), []);
  assert.equal(mayImport("sweep/engine/chunk-files.ts"), false);
  assert.equal(mayImport("explore/fleet/peers.ts"), true);
});
