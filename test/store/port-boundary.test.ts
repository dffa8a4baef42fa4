// The sweep store's boundary, read from the sources themselves (docs/store.md, "The store port"):
// outside src/store/ no file loads the SQLite binding, calls a connection's prepare/pragma, or
// holds SQL text; what it takes from src/store/ is the port (port.ts), the pure signature rule
// (signature.ts), and the SQLite adapter's entry (sqlite/index.ts) — opening a store is for the
// commands (cli/); the rest of the domain may only turn a connection it is handed into the port
// (sweepStoreOf / StoreHandle). A new import or statement that breaks a rule fails here, naming
// the file, the line and the rule.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const SRC = fileURLToPath(new URL("../../src/", import.meta.url));
const STORE = join(SRC, "store");

/**
 * The sweep session drivers, rewritten right now to one session runner: they still open the
 * store and call its statement functions with their SQLite connection. They are converted to the
 * port next; each must leave this list then (a listed file that keeps the rules fails below).
 */
const NOT_YET_CONVERTED = new Set([
  "sweep/campaign.ts",
  "sweep/coordinate.ts",
  "sweep/reset.ts",
  "sweep/resweep.ts",
  "sweep/session-runner.ts",
  "sweep/session.ts",
  "engine/worker-protocol.ts",
]);

/** What a file outside src/store/ may import from it. */
const PORT_MODULES = new Set(["store/port.ts", "store/signature.ts", "store/sqlite/index.ts"]);
/** What a file outside src/store/ and src/cli/ may take from the adapter: the conversion of a handed-over connection. */
const ADAPTER_NAMES_FOR_THE_DOMAIN = new Set(["sweepStoreOf", "StoreHandle"]);

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
    if (target === "store/sqlite/index.ts" && !rel.startsWith("cli/")) {
      const names = m[1]!.split(",").map((n) => n.trim().replace(/^type\s+/, "")).filter((n) => n !== "");
      for (const n of names) {
        if (!ADAPTER_NAMES_FOR_THE_DOMAIN.has(n)) out.push(`src/${rel}:${line}: takes ${n} from the SQLite adapter; only the commands (cli/) open a store`);
      }
    }
  }
  return out;
}

const outside = sources(SRC).filter((f) => !f.startsWith(STORE + "/"));

test("outside store/, nothing loads better-sqlite3, writes SQL, or reaches past the store port", () => {
  const problems = outside.filter((f) => !NOT_YET_CONVERTED.has(relative(SRC, f))).flatMap(problemsOf);
  assert.deepEqual(problems, []);
});

test("every file excepted from the store boundary still needs its exception", () => {
  const kept = [...NOT_YET_CONVERTED].filter((rel) => problemsOf(join(SRC, rel)).length === 0);
  assert.deepEqual(kept, [], "these keep the rules now: take them off NOT_YET_CONVERTED");
});

test("the boundary check sees SQL, the binding and a statement module when they are there", () => {
  // The check itself, on the sources that must break it: the adapter's own files.
  const adapter = [join(STORE, "db.ts"), join(STORE, "chunks.ts"), join(STORE, "sqlite", "sweep-store.ts")].map((f) => problemsOf(f).join("\n"));
  assert.match(adapter[0]!, /loads the SQLite binding/);
  assert.match(adapter[1]!, /SQL or a connection call/);
  assert.match(adapter[2]!, /imports store\/chunks\.ts; outside store\/, use the port/);
});
