// The sweep store's boundary, read from the sources themselves (docs/store.md, "The store port"):
// outside src/store/ no file loads the SQLite binding, calls a connection's prepare/pragma, or
// holds SQL text; what it takes from src/store/ is the port (port.ts), the pure signature rule
// (signature.ts), and the SQLite adapter's entry (sqlite/index.ts) — opening a store is for the
// commands (cli/, and the sweep commands and the sessions they open, sweep/); the engine, the
// generator contract and the reports are handed a store. A new import or statement that breaks a
// rule fails here, naming the file, the line and the rule.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const SRC = fileURLToPath(new URL("../../src/", import.meta.url));
const STORE = join(SRC, "store");

/** What a file outside src/store/ may import from it. */
const PORT_MODULES = new Set(["store/port.ts", "store/signature.ts", "store/sqlite/index.ts"]);
/** The folders whose files open a store: the commands. */
const OPENERS = ["cli/", "sweep/session/"];

/** SQL as a statement begins, or a call on a SQLite connection. Upper-case keywords only: prose says "select", SQL here says SELECT. */
const SQL = [
  /\bSELECT\s[^;]{0,600}?\bFROM\s/,
  /\bINSERT\s+(OR\s+\w+\s+)?INTO\s/,
  /\bUPDATE\s+\w+\s+SET\s/,
  /\bDELETE\s+FROM\s/,
  /\b(CREATE|DROP|ALTER)\s+(TABLE|INDEX|UNIQUE|VIEW|TRIGGER)\b/,
  /\bPRAGMA\s+\w+/,
  // A connection's prepare takes SQL text; other ports have a prepare of their own (the lease store's).
  /\.prepare\(\s*["'`]/,
  /\.pragma\(/,
];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? sources(join(dir, d.name)) : d.name.endsWith(".ts") ? [join(dir, d.name)] : [],
  );
}

/** The file's lines with comments blanked (line comments and block-comment lines), so prose about SQL is not SQL. */
function codeLines(file: string): string[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .map((line) => (/^\s*(\/\/|\/\*|\*)/.test(line) ? "" : line.replace(/\s\/\/\s.*$/, "")));
}

/** Every rule a file outside src/store/ breaks, as "src/<file>:<line>: <rule>". */
function problemsOf(file: string): string[] {
  const rel = relative(SRC, file);
  const out: string[] = [];
  const text = codeLines(file).join("\n");
  const lineAt = (index: number) => text.slice(0, index).split("\n").length;
  for (const m of text.matchAll(/["'`]better-sqlite3["'`]/g)) out.push(`src/${rel}:${lineAt(m.index)}: loads the SQLite binding`);
  // SQL may span lines (a template literal): matched over the whole text.
  for (const re of SQL) for (const m of text.matchAll(new RegExp(re.source, "g"))) out.push(`src/${rel}:${lineAt(m.index)}: SQL or a connection call (${re.source})`);
  // Imports may span lines: read them from the whole text.
  const dynamic = [...text.matchAll(/\bimport\(\s*"([^"]+)"\s*\)/g)].map((m) => Object.assign(["", "*", m[1]!], { index: m.index }));
  for (const m of [...text.matchAll(/\b(?:import|export)\s+(?:type\s+)?\{?([^;]*?)\}?\s*from\s+"([^"]+)"/gs), ...dynamic]) {
    const spec = m[2]!;
    if (!spec.startsWith(".")) continue;
    const target = relative(SRC, resolve(dirname(file), spec));
    if (!target.startsWith("store/")) continue;
    const line = lineAt(m.index!);
    if (!PORT_MODULES.has(target)) {
      out.push(`src/${rel}:${line}: imports ${target}; outside store/, use the port (store/port.ts)`);
      continue;
    }
    if (target === "store/sqlite/index.ts" && !OPENERS.some((dir) => rel.startsWith(dir))) {
      out.push(`src/${rel}:${line}: imports the SQLite adapter; only the commands (${OPENERS.join(", ")}) open a store, the rest is handed the port`);
    }
  }
  return out;
}

const outside = sources(SRC).filter((f) => !f.startsWith(STORE + "/"));

test("outside store/, nothing loads better-sqlite3, writes SQL, or reaches past the store port", () => {
  assert.deepEqual(outside.flatMap(problemsOf), []);
});

test("the boundary check sees SQL, the binding and a statement module when they are there", () => {
  // The check itself, on the sources that must break it: the adapter's own files.
  const adapter = [join(STORE, "db.ts"), join(STORE, "chunks.ts"), join(STORE, "sqlite", "sweep-store.ts")].map((f) => problemsOf(f).join("\n"));
  assert.match(adapter[0]!, /loads the SQLite binding/);
  assert.match(adapter[1]!, /SQL or a connection call/);
  assert.match(adapter[2]!, /imports store\/chunks\.ts; outside store\/, use the port/);
});
