// Ingest: turn a finished chunk's results directory into store rows and artifacts.
// Used unchanged by both transports: the coordinator ingests a worker's scratch directory in place
// on the shared filesystem. Everything in the results directory is untrusted generator output:
// nothing is followed through a symlink, every meta.json is validated, and an entry that does not
// validate is kept under <out>/malformed/ and reported — never silently dropped, never trusted.
import { createHash } from "node:crypto";
import { copyFileSync, lstatSync, mkdirSync, renameSync, rmSync, readdirSync, readFileSync, existsSync, type Dirent } from "node:fs";
import { dirname, isAbsolute, join, relative } from "node:path";
import { z } from "zod";
import { atomically, type Db } from "../store/db.ts";
import { addFailureSeed, failureByKey, insertFailure, reopenFailure } from "../store/failures.ts";

export const QUARANTINE_SAMPLES = 40;
const META_MAX_BYTES = 1 << 20;
const KEY_FILE_MAX_BYTES = 256 << 20;
const MESSAGE_MAX_CHARS = 2000;

const metaSchema = z.object({
  seed: z.number().int().refine(Number.isSafeInteger, "a safe integer"),
  bucket: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]*$/, "letters, digits and _ . : - only"),
  shrunk: z.boolean().optional(),
  msg: z.string().optional(),
  repro: z.string().optional(),
  key_file: z
    .string()
    .regex(/^[^/\\\0]+$/, "a file name inside the failure directory")
    .refine((n) => n !== "." && n !== "..", "a file name inside the failure directory")
    .optional(),
});

export interface IngestTarget {
  generationId: number;
  genHash: string;
  laneId: number;
  chunkId: number;
  seedFrom: number;
  seedTo: number;
  /** Where the generator wrote failures/ and quarantine/. */
  resultsDir: string;
  /** The campaign's output root: artifacts go to <outDir>/failures, samples to <outDir>/quarantine. */
  outDir: string;
  appBuild: string | null;
}

export interface IngestResult {
  finds: number;
  newFailures: number;
  newFailureIds: number[];
  /** Failures marked fixed that this chunk hit again (regressions): reopened, and as alarming as new ones. */
  reopened: number;
  reopenedIds: number[];
  unshrunk: number;
  quarantine: number;
  /** Failure entries that did not validate; kept under <out>/malformed/. */
  malformed: { entry: string; reason: string; keptAt: string }[];
}

export function ingestChunk(db: Db, t: IngestTarget): IngestResult {
  const result: IngestResult = {
    finds: 0,
    newFailures: 0,
    newFailureIds: [],
    reopened: 0,
    reopenedIds: [],
    unshrunk: 0,
    quarantine: 0,
    malformed: [],
  };
  const entries = failureEntries(join(t.resultsDir, "failures"));
  const parsed = entries.map((entry) => readFailure(entry, t));

  if (parsed.length > 0) atomically(db, () => {
    for (const p of parsed) {
      if ("reason" in p) {
        result.malformed.push({ entry: p.dir, reason: p.reason, keptAt: keepMalformed(p.dir, t) });
        continue;
      }
      result.finds++;
      if (!p.shrunk) result.unshrunk++;
      const existing = failureByKey(db, t.generationId, p.dedupKey);
      let failureId: number;
      if (existing) {
        failureId = existing.id;
        if (existing.state === "fixed") {
          reopenFailure(db, failureId);
          result.reopened++;
          result.reopenedIds.push(failureId);
        }
      } else {
        const dest = artifactDestination(t.outDir, p.dedupKey, t.generationId);
        moveTree(p.dir, dest);
        failureId = insertFailure(db, {
          generationId: t.generationId,
          laneId: t.laneId,
          dedupKey: p.dedupKey,
          bucket: p.bucket,
          seed: p.seed,
          shrunk: p.shrunk,
          message: p.msg,
          repro: p.repro,
          artifactDir: storePath(t.outDir, dest),
          appBuild: t.appBuild,
        });
        result.newFailures++;
        result.newFailureIds.push(failureId);
      }
      addFailureSeed(db, failureId, p.seed, t.chunkId);
    }
  });

  result.quarantine = sampleQuarantine(t);
  return result;
}

interface ParsedFailure {
  dir: string;
  seed: number;
  bucket: string;
  shrunk: boolean;
  msg: string | null;
  repro: string | null;
  dedupKey: string;
}

/** Subdirectories of failures/ (never through a symlink), ordered numerically by name. */
function failureEntries(failuresDir: string): string[] {
  let dirents: Dirent[];
  try {
    // throwIfNoEntry: an absent directory is the common case (a clean chunk), and a thrown
    // ENOENT costs more than the whole check.
    if (!lstatSync(failuresDir, { throwIfNoEntry: false })?.isDirectory()) return [];
    dirents = readdirSync(failuresDir, { withFileTypes: true });
  } catch {
    return [];
  }
  const num = (name: string) => (/^\d+$/.test(name) ? Number(name) : 0);
  return dirents
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort((a, b) => num(a) - num(b) || (a < b ? -1 : a > b ? 1 : 0))
    .map((name) => join(failuresDir, name));
}

function readFailure(dir: string, t: IngestTarget): ParsedFailure | { dir: string; reason: string } {
  const metaPath = join(dir, "meta.json");
  const metaBytes = readRegularFile(metaPath, META_MAX_BYTES);
  if (typeof metaBytes === "string") return { dir, reason: `meta.json: ${metaBytes}` };
  let raw: unknown;
  try {
    raw = JSON.parse(metaBytes.toString("utf8"));
  } catch (err) {
    return { dir, reason: `meta.json: not JSON (${(err as Error).message})` };
  }
  const meta = metaSchema.safeParse(raw);
  if (!meta.success) {
    const issue = meta.error.issues[0]!;
    return { dir, reason: `meta.json: ${issue.path.join(".") || "(root)"}: ${issue.message}` };
  }
  const m = meta.data;
  if (m.seed < t.seedFrom || m.seed > t.seedTo) {
    return { dir, reason: `meta.json: seed ${m.seed} is outside the chunk's range ${t.seedFrom}..${t.seedTo}` };
  }
  // Without a minimized input the key would be the bucket alone, merging unrelated findings.
  const keyName = m.key_file ?? pickKeyFile(dir);
  if (keyName === null) return { dir, reason: "no minimized input: set key_file or write input.min.* / input.*" };
  const keyBytes = readRegularFile(join(dir, keyName), KEY_FILE_MAX_BYTES);
  if (typeof keyBytes === "string") return { dir, reason: `${keyName}: ${keyBytes}` };
  const dedupKey = createHash("sha256").update(m.bucket + "\n").update(keyBytes).digest("hex");
  return {
    dir,
    seed: m.seed,
    bucket: m.bucket,
    shrunk: m.shrunk ?? true,
    msg: m.msg === undefined ? null : m.msg.slice(0, MESSAGE_MAX_CHARS),
    repro: m.repro === undefined ? null : m.repro.slice(0, MESSAGE_MAX_CHARS),
    dedupKey,
  };
}

/**
 * The minimized input when meta.json names none: the first input.min.*, else the first input.*.
 * Symlinks and special files are candidates too, so that readRegularFile rejects them exactly as
 * it rejects an explicit key_file, instead of the choice silently falling to another file.
 */
function pickKeyFile(dir: string): string | null {
  let names: string[];
  try {
    names = readdirSync(dir, { withFileTypes: true })
      .filter((d) => !d.isDirectory())
      .map((d) => d.name)
      .sort();
  } catch {
    return null;
  }
  return names.find((n) => n.startsWith("input.min.")) ?? names.find((n) => n.startsWith("input.")) ?? null;
}

/** The bytes of a regular file (not a symlink), or why it cannot be used. */
function readRegularFile(path: string, maxBytes: number): Buffer | string {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return "missing";
  }
  if (!st.isFile()) return "not a regular file";
  if (st.size > maxBytes) return `larger than ${maxBytes} bytes`;
  try {
    return readFileSync(path);
  } catch (err) {
    return `unreadable (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
  }
}

/** A directory under <out>/failures that no other failure uses: <key12>, else with the generation, else the full key. */
function artifactDestination(outDir: string, dedupKey: string, generationId: number): string {
  const root = join(outDir, "failures");
  const candidates = [dedupKey.slice(0, 12), `${dedupKey.slice(0, 12)}-g${generationId}`, `${dedupKey}-g${generationId}`];
  for (const name of candidates) {
    const dest = join(root, name);
    if (!existsSync(dest)) return dest;
  }
  for (let i = 2; ; i++) {
    const dest = join(root, `${dedupKey}-g${generationId}-${i}`);
    if (!existsSync(dest)) return dest;
  }
}

/** Copies regular files and directories only; symlinks and special files are skipped. */
/**
 * Moves a failure directory out of the chunk's scratch space (a rename on the same file system,
 * which the scratch directory is about to lose anyway), then drops anything that is not a
 * regular file or a directory. Across file systems it copies instead.
 */
function moveTree(src: string, dest: string): void {
  mkdirSync(dirname(dest), { recursive: true });
  try {
    renameSync(src, dest);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EXDEV") throw err;
    copyTree(src, dest);
    return;
  }
  keepRegularOnly(dest);
}

function keepRegularOnly(dir: string): void {
  for (const d of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, d.name);
    if (d.isDirectory()) keepRegularOnly(path);
    else if (!d.isFile()) rmSync(path, { force: true });
  }
}

function copyTree(src: string, dest: string): void {
  mkdirSync(dest, { recursive: true });
  for (const d of readdirSync(src, { withFileTypes: true })) {
    const from = join(src, d.name);
    const to = join(dest, d.name);
    if (d.isDirectory()) copyTree(from, to);
    else if (d.isFile()) copyFileSync(from, to);
  }
}

function keepMalformed(dir: string, t: IngestTarget): string {
  const name = dir.split(/[\\/]/).pop() ?? "entry";
  let dest = join(t.outDir, "malformed", `chunk-${t.chunkId}-${name}`);
  for (let i = 2; existsSync(dest); i++) dest = join(t.outDir, "malformed", `chunk-${t.chunkId}-${name}-${i}`);
  copyTree(dir, dest);
  return dest;
}

/** Counts quarantined tests and keeps up to QUARANTINE_SAMPLES of them per generation. */
function sampleQuarantine(t: IngestTarget): number {
  const qdir = join(t.resultsDir, "quarantine");
  let files: string[];
  try {
    if (!lstatSync(qdir, { throwIfNoEntry: false })?.isDirectory()) return 0;
    files = readdirSync(qdir, { withFileTypes: true })
      .filter((d) => d.isFile())
      .map((d) => d.name)
      .sort();
  } catch {
    return 0;
  }
  if (files.length === 0) return 0;
  const samples = join(t.outDir, "quarantine", t.genHash.slice(0, 12));
  mkdirSync(samples, { recursive: true });
  let held = readdirSync(samples).length;
  for (const f of files) {
    if (held >= QUARANTINE_SAMPLES) break;
    const dest = join(samples, f);
    if (existsSync(dest)) continue;
    copyFileSync(join(qdir, f), dest);
    held++;
  }
  return files.length;
}

/** Artifact paths are stored relative to the output root when they lie inside it. */
export function storePath(outDir: string, path: string): string {
  const rel = relative(outDir, path);
  return rel.startsWith("..") || isAbsolute(rel) ? path : rel;
}

export function resolveStorePath(outDir: string, stored: string): string {
  return isAbsolute(stored) ? stored : join(outDir, stored);
}
