// Validation of a parsed fuzzfleet.toml beyond its shape: the checks that need more than one key
// at once (lane names, the placeholders a chunk's command must use, with or without a lane's args),
// and zod's issues turned into the loader's ConfigIssue (unknown keys with the closest known one,
// as the file would spell it). The shape itself is schema.ts.
import { closestName } from "./closest-name.ts";
import { placeholdersIn } from "./placeholders.ts";
import { ConfigFileSchema, knownKeys, LANE_NAME, type ConfigFile } from "./schema.ts";


/** One problem in the document, at a key path such as ["lanes", "deep", "weight"]. */
export interface ConfigIssue {
  path: (string | number)[];
  message: string;
  /** Print the value found at `path` after the message. */
  showGot: boolean;
}

/** A TOML table as parsed (a plain object; a TOML date is a Date, not a table). */
export function isTable(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

function stringsOf(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

// Without {seed_from} and a length, every chunk would run the same seeds and the cursor would
// claim coverage that never happened; without {out}, chunks would share one results dir.
const REQUIRED_IN_CHUNK_COMMAND: { names: string[]; why: string }[] = [
  { names: ["seed_from"], why: "the first seed of the chunk" },
  { names: ["count", "seed_to"], why: "how many seeds the chunk holds" },
  { names: ["out"], why: "the chunk's output dir" },
];

function missingChunkPlaceholders(argv: readonly string[]): string[] {
  const used = new Set(argv.flatMap(placeholdersIn));
  return REQUIRED_IN_CHUNK_COMMAND.filter((r) => !r.names.some((n) => used.has(n))).map(
    (r) => `${r.names.map((n) => `{${n}}`).join(" or ")} (${r.why})`,
  );
}

/** Checks that need more than one key at a time, run on the raw document so they report alongside zod. */
function crossCheck(raw: Record<string, unknown>): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const lanes = isTable(raw.lanes) ? raw.lanes : {};
  for (const name of Object.keys(lanes)) {
    if (!LANE_NAME.test(name)) {
      issues.push({
        path: ["lanes", name],
        message: "bad lane name: use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit",
        showGot: false,
      });
    }
  }
  const generator = isTable(raw.generator) ? raw.generator : {};
  const command = stringsOf(generator.command);
  // An empty or mistyped command already has its own issue; do not pile a second one on it.
  if (command.length > 0 && command.length === (generator.command as unknown[]).length) {
    const missing = missingChunkPlaceholders(command);
    if (missing.length > 0) {
      const lanesMissing = Object.entries(lanes)
        .map(([name, lane]) => ({ name, missing: missingChunkPlaceholders([...command, ...stringsOf(isTable(lane) ? lane.args : undefined)]) }))
        .filter((l) => l.missing.length > 0);
      const noLaneFixesIt = lanesMissing.length === Object.keys(lanes).length;
      if (noLaneFixesIt) {
        issues.push({ path: ["generator", "command"], message: `never uses ${missing.join(", ")}`, showGot: false });
      } else {
        for (const lane of lanesMissing) {
          issues.push({
            path: ["lanes", lane.name, "args"],
            message: `generator.command with this lane's args never uses ${lane.missing.join(", ")}`,
            showGot: false,
          });
        }
      }
    }
  }
  return issues;
}

/** A key as the file would spell it: a table of tables as their headers (`[lanes.small]`), a table as its header, else the key. */
function spelledAs(path: readonly (string | number)[], key: string, value: unknown): string {
  const bare = (seg: string) => (/^[A-Za-z0-9_-]+$/.test(seg) ? seg : JSON.stringify(seg));
  if (!isTable(value)) return bare(key);
  const dotted = [...path.map(String), key].map(bare).join(".");
  const subtables = Object.keys(value).filter((k) => isTable(value[k]));
  if (subtables.length === 0 || subtables.length < Object.keys(value).length) return `[${dotted}]`;
  return subtables.map((k) => `[${dotted}.${bare(k)}]`).join(", ");
}

function valueIn(root: unknown, path: readonly (string | number)[]): unknown {
  let v = root;
  for (const seg of path) v = isTable(v) ? v[String(seg)] : undefined;
  return v;
}

/**
 * Validates a parsed TOML document. Returns the typed file when there is no issue at all,
 * otherwise every issue found (zod's and the cross-key checks), unsorted.
 */
export function validateConfigDocument(raw: Record<string, unknown>): { file: ConfigFile | null; issues: ConfigIssue[] } {
  const issues: ConfigIssue[] = [];
  const parsed = ConfigFileSchema.safeParse(raw);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const path = issue.path.map((p) => (typeof p === "number" ? p : String(p)));
      if (issue.code === "unrecognized_keys") {
        const known = knownKeys(path) ?? [];
        for (const key of issue.keys) {
          const close = closestName(key, known);
          const hint = close === null ? "" : `; did you mean ${spelledAs(path, close, valueIn(raw, [...path, key]))}?`;
          issues.push({ path: [...path, key], message: `unknown key (known: ${known.join(", ")})${hint}`, showGot: false });
        }
      } else {
        const noGot = issue.code === "custom" && (issue.params as { noGot?: boolean } | undefined)?.noGot === true;
        issues.push({ path, message: issue.message, showGot: !noGot });
      }
    }
  }
  issues.push(...crossCheck(raw));
  return { file: parsed.success && issues.length === 0 ? parsed.data : null, issues };
}
