// Identities that decide whether results are comparable:
// - the generation id: what a seed means. SHA-256 over the generator command template and the bytes
//   of every identity file. When it changes, all coverage of the old generation is void.
// - the app build id: which build of the system under test a chunk exercised.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { isAbsolute, join, relative, sep } from "node:path";
import { ConfigError, RefusedError } from "../errors.ts";
import type { Config } from "./schema.ts";

/**
 * What a coordinator (or a root master) asks a host to prove: the nonce file it wrote in the
 * shared directory, the generator's identity and the app. It is the `challenge` frame's content,
 * checked at the wire's edge (net/messages.ts) and handed here; the generator contract does not
 * import the wire.
 */
export interface IdentityChallenge {
  nonce_path: string;
  identity: { command: string[]; files: string[]; base_dir: string } | null;
  app_path: string | null;
}

/** What a host answers: its `prove` frame, as the wire carries it. */
export interface IdentityProof {
  type: "prove";
  nonce: string | null;
  gen_hash: string | null;
  app_build: string | null;
  /** Why a value is null (a file could not be read), for the refusal message. */
  problem: string | null;
  /** Whether it read the nonce, so works in the shared directory. */
  shared_dir: boolean;
}

/** Thrown-free variant for reports: null when an identity file cannot be read. */
export function tryGenerationHash(config: Config): string | null {
  try {
    return generationHash(config);
  } catch {
    return null;
  }
}

/** What a generation id is computed from; a worker receives it in the handshake challenge. */
export interface GeneratorIdentity {
  command: string[];
  /** Absolute paths or absolute globs. */
  files: string[];
  /**
   * Files inside this directory (the config's) are hashed by their path relative to it, so every
   * host that mounts the campaign directory agrees wherever it is mounted; files outside it (a
   * system-wide generator binary) by their absolute path, so moving the campaign keeps the id.
   */
  baseDir: string;
}

export function generatorIdentity(config: Config): GeneratorIdentity {
  return { command: config.generator.command, files: config.generator.identity, baseDir: config.dir };
}

export function generationHash(config: Config): string {
  return hashIdentity(generatorIdentity(config), config.path);
}

/**
 * `ownDir`: hash as a worker without the shared directory sees it — every entry inside
 * `id.baseDir` is read at the same relative path below `ownDir` (and named by that relative path,
 * as the coordinator names it), every entry outside it at its absolute path.
 */
export function hashIdentity(id: GeneratorIdentity, where = "the config", ownDir?: string): string {
  const h = createHash("sha256");
  h.update("fuzzfleet-generation-v1\n");
  h.update(JSON.stringify(id.command));
  h.update("\n");
  const entries = ownDir === undefined ? [{ files: id.files, base: id.baseDir }] : id.files.map((f) => ({ files: [ownCopy(id.baseDir, f, ownDir)], base: insideOf(id.baseDir, f) ? ownDir : id.baseDir }));
  for (const { files, base } of entries) {
    for (const file of expandIdentity(files, where)) {
      let bytes: Buffer;
      try {
        bytes = readFileSync(file);
      } catch (err) {
        throw new ConfigError(
          `generator identity file ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); ` +
            `fix [generator] identity in ${where}`,
          { cause: err },
        );
      }
      h.update(hashedPath(base, file));
      h.update("\0");
      h.update(createHash("sha256").update(bytes).digest("hex"));
      h.update("\n");
    }
  }
  return h.digest("hex");
}

/** Whether `path` lies inside `dir` (not `dir` itself). */
export function insideOf(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return rel !== "" && rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
}

function hashedPath(baseDir: string, file: string): string {
  return (insideOf(baseDir, file) ? relative(baseDir, file) : file).split(sep).join("/");
}

/** Only these make an entry a glob; `[` and every other character are literal (see globToRegExp). */
function isGlob(text: string): boolean {
  return /[*?]/.test(text);
}

/** The identity entries with globs expanded (each glob sorted); a glob that matches nothing is an error. */
export function identityFiles(config: Config): string[] {
  return expandIdentity(config.generator.identity, config.path);
}

function expandIdentity(entries: readonly string[], where: string): string[] {
  const files: string[] = [];
  for (const entry of entries) {
    if (!isGlob(entry)) {
      files.push(entry);
      continue;
    }
    const matched = globFiles(entry).sort();
    if (matched.length === 0) {
      throw new ConfigError(`generator identity pattern ${entry} matches no file; fix [generator] identity in ${where}`);
    }
    files.push(...matched);
  }
  return files;
}

/** First 12 hex of SHA-256 of the app (a file, or every regular file of a directory); null without [app]. */
export function appBuildId(config: Config): string | null {
  return config.app ? appBuildOf(config.app.path, config.path) : null;
}

export function appBuildOf(path: string, where = "the config"): string {
  let st;
  try {
    st = statSync(path);
  } catch {
    throw new RefusedError(`app not found: ${path} — build it first, or fix [app] path in ${where}`);
  }
  const h = createHash("sha256");
  if (st.isDirectory()) {
    for (const file of listFiles(path)) {
      h.update(relative(path, file).split(sep).join("/"));
      h.update("\0");
      h.update(readFileSync(file));
    }
  } else {
    h.update(readFileSync(path));
  }
  return h.digest("hex").slice(0, 12);
}

function listFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listFiles(p));
    else if (entry.isFile()) out.push(p);
  }
  return out;
}

/**
 * The newest source file matched by [app] sources, when it is newer than the app: a long sweep
 * of a stale build tests the wrong code. Returns null when the app is up to date.
 */
export function staleAppSource(config: Config): { file: string; sourceMtime: Date; appMtime: Date } | null {
  if (!config.app || config.app.sources.length === 0) return null;
  const appMtime = newestMtime(config.app.path);
  let newest: { file: string; mtimeMs: number } | null = null;
  for (const pattern of config.app.sources) {
    for (const file of globFiles(pattern)) {
      const m = statSync(file).mtimeMs;
      if (!newest || m > newest.mtimeMs) newest = { file, mtimeMs: m };
    }
  }
  if (!newest || newest.mtimeMs <= appMtime) return null;
  return { file: newest.file, sourceMtime: new Date(newest.mtimeMs), appMtime: new Date(appMtime) };
}

function newestMtime(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(st.mtimeMs, ...listFiles(path).map((f) => statSync(f).mtimeMs));
}

/** Files matching an absolute glob with `*`, `?` and `**` segments; a pattern without them names one file. */
export function globFiles(pattern: string): string[] {
  const parts = pattern.split("/");
  const firstGlob = parts.findIndex(isGlob);
  if (firstGlob === -1) {
    try {
      return statSync(pattern).isFile() ? [pattern] : [];
    } catch {
      return [];
    }
  }
  const root = parts.slice(0, firstGlob).join("/") || "/";
  const matcher = globToRegExp(pattern);
  let files: string[];
  try {
    files = listFiles(root);
  } catch {
    return [];
  }
  return files.filter((f) => matcher.test(f.split(sep).join("/")));
}

export function globToRegExp(pattern: string): RegExp {
  let re = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === "*" && pattern[i + 1] === "*") {
      // "**/" matches zero or more directories; a trailing "**" matches anything.
      if (pattern[i + 2] === "/") {
        re += "(?:[^/]+/)*";
        i += 2;
      } else {
        re += ".*";
        i += 1;
      }
    } else if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

/**
 * Answers the coordinator's challenge with what this host sees. A host that reads the nonce works
 * in the shared directory and hashes the identity files and the app where the coordinator names
 * them. One that cannot read it says so (`shared_dir: false`) and runs its own copy of the
 * generator: every identity file and the app inside the campaign directory (`base_dir`) is taken
 * at the same relative path below `ownDir` (its working directory), a file outside it at its
 * absolute path, so the ids agree when the copies hold the same bytes.
 */
export function proveIdentity(c: IdentityChallenge, ownDir: string = process.cwd()): IdentityProof {
  const problems: string[] = [];
  let nonce: string | null = null;
  try {
    nonce = readFileSync(c.nonce_path, "utf8").trim().slice(0, 256);
  } catch (err) {
    problems.push(`nonce: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const shared = nonce !== null;
  const place = (path: string) => (shared || !c.identity ? path : ownCopy(c.identity.base_dir, path, ownDir));
  let genHash: string | null = null;
  if (c.identity) {
    try {
      genHash = hashIdentity({ command: c.identity.command, files: c.identity.files, baseDir: c.identity.base_dir }, "the config", shared ? undefined : ownDir);
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  let appBuild: string | null = null;
  if (c.app_path) {
    try {
      appBuild = appBuildOf(place(c.app_path));
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  return { type: "prove", nonce, gen_hash: genHash, app_build: appBuild, problem: problems.length ? problems.join("; ").slice(0, 2000) : null, shared_dir: shared };
}

/** Where a worker without the shared directory finds its copy of `path`, a file the coordinator names below `baseDir`. */
export function ownCopy(baseDir: string, path: string, ownDir: string): string {
  return insideOf(baseDir, path) ? join(ownDir, relative(baseDir, path)) : path;
}
