// Reads fuzzfleet.toml, reports every problem with its line, and resolves it into a Config.

import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { parse, TomlDate, TomlError } from "smol-toml";
import { ConfigError } from "../errors.ts";
import { placeholdersIn } from "./placeholders.ts";
import { transferCaps, type Config, type ConfigFile, type LaneConfig } from "./schema.ts";
import { isTable, validateConfigDocument, type ConfigIssue } from "./validate.ts";

export { laneIdentity, type Config, type LaneConfig } from "./schema.ts";

export { DEFAULT_CONFIG_NAME } from "./paths.ts";

/**
 * Loads and validates the config at `path` (relative paths are taken from the cwd). Paths inside
 * the file are resolved against the file's directory. Throws ConfigError naming every problem.
 */
export function loadConfig(path: string): Config {
  const absPath = resolve(path);
  const text = readConfigText(path, absPath);

  let raw: Record<string, unknown>;
  try {
    // 'throw' refuses __proto__/constructor keys instead of letting them reach plain objects.
    raw = parse(text, { unsafeKeyBehaviour: "throw" });
  } catch (err) {
    if (err instanceof TomlError) {
      const unclosed = unclosedString(text, err);
      if (unclosed) throw new ConfigError(`${path}:${err.line}:${unclosed.column}: invalid TOML: ${unclosed.reason}\n${unclosed.codeblock}`, { cause: err });
      const reason = err.message.replace(/^Invalid TOML document: /, "").split("\n")[0];
      throw new ConfigError(`${path}:${err.line}:${err.column}: invalid TOML: ${reason}\n${err.codeblock}`.trimEnd(), {
        cause: err,
      });
    }
    throw err;
  }

  const locator = new KeyLocator(text);
  const { file, issues } = validateConfigDocument(raw);
  const laneNames = Object.keys(isTable(raw.lanes) ? raw.lanes : {});
  const lines = issues
    .map((issue) => ({ line: locator.lineOf(issue.path), text: renderIssue(issue, raw) }))
    .sort((a, b) => a.line - b.line)
    .map((l) => `${path}:${l.line}: ${l.text}`);
  if (laneNames.length === 0) {
    lines.push(
      `${path} defines no [lanes.NAME] tables — a lane is a seed range with its own cursor; see 'fuzzfleet init'`,
    );
  }
  if (lines.length > 0 || file === null) throw new ConfigError(lines.join("\n"));

  // JavaScript objects list integer-like keys ("7", "42") first, so file order comes from the text.
  const order = new Map(laneNames.map((name) => [name, locator.firstLineUnder(["lanes", name])]));
  return resolveConfig(file, absPath, (a, b) => order.get(a)! - order.get(b)!);
}

/**
 * A quote left open reaches the end of its line, and the TOML parser reports the line break as a
 * control character inside the string: the real mistake is the quote, so it is named instead.
 */
function unclosedString(text: string, err: TomlError): { column: number; reason: string; codeblock: string } | null {
  if (!/control characters are not allowed in strings/.test(err.message)) return null;
  const line = text.split(/\r?\n/)[err.line - 1];
  if (line === undefined || err.column <= line.length) return null; // a real control character, not the line's end
  const column = openQuoteColumn(line);
  if (column === null) return null;
  const quote = line[column - 1];
  const prefix = `${err.line}:  `;
  return {
    column,
    reason: `unclosed string: the ${quote} at column ${column} has no closing ${quote} on its line (only """ and ''' strings span lines)`,
    codeblock: `${prefix}${line}\n${" ".repeat(prefix.length + column - 1)}^`,
  };
}

/** The 1-based column of the quote that opens a string still open at the end of `line`, else null. */
function openQuoteColumn(line: string): number | null {
  let open: { quote: string; at: number } | null = null;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (open === null) {
      if (ch === "#") return null;
      if (ch === '"' || ch === "'") {
        // A multi-line string may hold line breaks: it is not what this is about.
        if (line.startsWith(ch.repeat(3), i)) return null;
        open = { quote: ch, at: i };
      }
    } else if (open.quote === '"' && ch === "\\") {
      i++;
    } else if (ch === open.quote) {
      open = null;
    }
  }
  return open === null ? null : open.at + 1;
}

function readConfigText(path: string, absPath: string): string {
  try {
    return readFileSync(absPath, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw new ConfigError(`no config at ${path} — create one with 'fuzzfleet init'`, { cause: err });
    if (code === "EISDIR") throw new ConfigError(`${path} is a directory, not a config file`, { cause: err });
    throw new ConfigError(`cannot read config ${path}: ${(err as Error).message}`, { cause: err });
  }
}

function resolveConfig(file: ConfigFile, absPath: string, laneOrder: (a: string, b: string) => number): Config {
  const dir = dirname(absPath);
  const d = file.defaults;
  const lanes: LaneConfig[] = Object.entries(file.lanes)
    .sort(([a], [b]) => laneOrder(a, b))
    .map(([name, lane]) => ({
      name,
      baseSeed: lane.base_seed,
      weight: lane.weight,
      enabled: lane.enabled,
      jobs: lane.jobs ?? d.jobs,
      args: lane.args,
    }));
  const minimize = file.generator.minimize;
  return {
    path: absPath,
    dir,
    defaults: {
      jobs: d.jobs,
      nice: d.nice,
      idleIo: d.idle_io,
      chunkSeconds: Math.max(1, Math.round(d.chunk_minutes * 60)),
      bootstrapSeeds: d.bootstrap_seeds,
      maxShrinks: d.max_shrinks,
      hardTimeoutFloor: d.hard_timeout_floor,
    },
    generator: {
      // command, check and lane args stay templates and are not resolved as paths: the generator
      // runs with cwd = the config dir, which is what makes relative paths in them work.
      command: file.generator.command,
      identity: file.generator.identity.map((p) => resolve(dir, p)),
      results: file.generator.results,
      check: file.generator.check ?? null,
    },
    app: file.app ? { path: resolve(dir, file.app.path), sources: file.app.sources.map((g) => resolve(dir, g)) } : null,
    lanes,
    distributed: {
      port: file.distributed.port,
      bind: file.distributed.bind,
      leaseSeconds: file.distributed.lease_seconds,
      drainGraceMinutes: file.distributed.drain_grace_minutes,
      stopGraceSeconds: file.distributed.stop_grace_seconds,
      transfer: transferCaps(file.distributed),
    },
    store: {
      journal: file.store.journal,
      giveUpSeconds: file.store.give_up_minutes * 60,
    },
    ...(minimize
      ? {
          minimize: {
            command: minimize,
            share: file.minimize.share,
            batch: minimize.some((a) => placeholdersIn(a).includes("seed")) ? 1 : file.minimize.batch,
            timeoutSeconds: Math.max(1, Math.round(file.minimize.timeout_minutes * 60)),
          },
        }
      : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// Issue rendering

function renderIssue(issue: ConfigIssue, raw: Record<string, unknown>): string {
  const got = issue.showGot ? ` (got ${describeValue(valueAt(raw, issue.path))})` : "";
  return `${dottedKey(issue.path)}: ${issue.message}${got}`;
}

/** `lanes."my lane".args[2]`: TOML spelling of a key path, array indexes in brackets. */
export function dottedKey(path: readonly (string | number)[]): string {
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else out += (out === "" ? "" : ".") + (/^[A-Za-z0-9_-]+$/.test(seg) ? seg : JSON.stringify(seg));
  }
  return out;
}

function valueAt(root: unknown, path: readonly (string | number)[]): unknown {
  let v = root;
  for (const seg of path) {
    if (Array.isArray(v) && typeof seg === "number") v = v[seg];
    else if (isTable(v) && typeof seg === "string" && Object.hasOwn(v, seg)) v = v[seg];
    else return undefined;
  }
  return v;
}

function clip(s: string, max = 60): string {
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

function describeValue(v: unknown): string {
  if (v === undefined) return "nothing";
  if (typeof v === "string") return `string ${clip(JSON.stringify(v))}`;
  if (typeof v === "number" && !Number.isFinite(v)) return Number.isNaN(v) ? "nan" : v > 0 ? "inf" : "-inf";
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") return String(v);
  if (v instanceof TomlDate) return `date ${v.toISOString()}`;
  if (Array.isArray(v)) return `array ${clip(JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? String(x) : x)))}`;
  return "a table";
}

// ---------------------------------------------------------------------------------------------
// Locating keys in the text

type KeyPath = readonly (string | number)[];

interface Entry {
  line: number;
  /** Full key path that the line defines: a table header's path or header + dotted key. */
  path: string[];
}

const BARE_OR_QUOTED_KEY = String.raw`(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')`;
const DOTTED_KEY = String.raw`${BARE_OR_QUOTED_KEY}(?:\s*\.\s*${BARE_OR_QUOTED_KEY})*`;
const HEADER_LINE = new RegExp(String.raw`^\s*\[\[?\s*(${DOTTED_KEY})\s*\]\]?\s*(?:#.*)?$`);
const KEY_LINE = new RegExp(String.raw`^\s*(${DOTTED_KEY})\s*=`);
const KEY_PART = new RegExp(BARE_OR_QUOTED_KEY, "g");

function splitDottedKey(dotted: string): string[] {
  return [...dotted.matchAll(KEY_PART)].map(([part]) => {
    if (part.startsWith('"')) {
      try {
        return JSON.parse(part) as string;
      } catch {
        return part.slice(1, -1);
      }
    }
    if (part.startsWith("'")) return part.slice(1, -1);
    return part;
  });
}

function startsWith(path: readonly string[], prefix: readonly string[]): boolean {
  return prefix.length <= path.length && prefix.every((seg, i) => path[i] === seg);
}

/**
 * Maps key paths to 1-based line numbers in a TOML text that has already parsed. It recognises
 * table headers and `key =` lines (dotted and quoted keys included) and skips multi-line strings;
 * it is a locator for messages, not a parser.
 */
export class KeyLocator {
  private readonly entries: Entry[] = [];

  constructor(text: string) {
    let table: string[] = [];
    let inMultiline: string | null = null;
    text.split(/\r?\n/).forEach((content, i) => {
      const line = i + 1;
      if (inMultiline !== null) {
        if (content.includes(inMultiline)) inMultiline = null;
        return;
      }
      const header = HEADER_LINE.exec(content);
      if (header) {
        table = splitDottedKey(header[1]);
        this.entries.push({ line, path: table });
        return;
      }
      const key = KEY_LINE.exec(content);
      if (key) {
        this.entries.push({ line, path: [...table, ...splitDottedKey(key[1])] });
        const value = content.slice(key[0].length);
        for (const quote of ['"""', "'''"]) {
          if (value.split(quote).length === 2) inMultiline = quote;
        }
      }
    });
  }

  /**
   * The line of the deepest key or table that contains `path` (the key itself, else its inline
   * parent, else its table header); else the first line that defines something below `path`;
   * else line 1. Array indexes locate to the array's key.
   */
  lineOf(path: KeyPath): number {
    const target = keyPrefix(path);
    let best: Entry | undefined;
    for (const e of this.entries) {
      if (startsWith(target, e.path) && (best === undefined || e.path.length > best.path.length)) best = e;
    }
    if (best !== undefined && best.path.length > 0) return best.line;
    return this.firstLineUnder(target);
  }

  /** The first line that defines `path` or anything below it (1 when none does). */
  firstLineUnder(path: KeyPath): number {
    const target = keyPrefix(path);
    const first = this.entries.find((e) => startsWith(e.path, target));
    return first?.line ?? 1;
  }
}

function keyPrefix(path: KeyPath): string[] {
  const firstIndex = path.findIndex((seg) => typeof seg === "number");
  return (firstIndex === -1 ? path : path.slice(0, firstIndex)).map(String);
}
