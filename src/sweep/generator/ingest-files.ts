// The file side of ingest: artifact and note names, the key file picked by name, and reading or
// hashing a scanned file so that the bytes used are those of the very file that was listed.
import { createHash } from "node:crypto";
import { closeSync, readSync } from "node:fs";
import { isAbsolute, join, relative } from "node:path";
import { FileProblem } from "../../files/file-problem.ts";
import type { PinnedDir } from "../../files/pinned-dir.ts";
import { isScanned, type TreeFile } from "../../files/tree.ts";

const HASH_CHUNK = 1 << 20;

/** The failure's artifact directory: <key12>, else with the generation, else the full key, numbered. */
export function* artifactNames(dedupKey: string, generationId: number): Generator<string> {
  yield dedupKey.slice(0, 12);
  yield `${dedupKey.slice(0, 12)}-g${generationId}`;
  yield `${dedupKey}-g${generationId}`;
  for (let i = 2; ; i++) yield `${dedupKey}-g${generationId}-${i}`;
}

export function* numbered(base: string, ext: string): Generator<string> {
  yield `${base}${ext}`;
  for (let i = 2; ; i++) yield `${base}-${i}${ext}`;
}

/** The minimized input when meta.json names none: the first input.min.*, else the first input.*. */
export function pickKeyFile(names: string[]): string | null {
  const sorted = [...names].sort();
  return sorted.find((n) => n.startsWith("input.min.")) ?? sorted.find((n) => n.startsWith("input.")) ?? null;
}

/** The bytes of the scanned regular file `name`; the file read must be the one scanned. */
export function readScanned(entry: PinnedDir, name: string, maxBytes: number, top: ReadonlyMap<string, TreeFile>): Buffer {
  const { bytes, stats } = entry.readFile(name, maxBytes);
  const node = top.get(name);
  if (!node || !isScanned(node, stats)) throw replaced(entry, name);
  return bytes;
}

/** SHA-256 of `prefix` and then the scanned regular file `name`, streamed. */
export function hashScanned(entry: PinnedDir, name: string, maxBytes: number, top: ReadonlyMap<string, TreeFile>, prefix: string): string {
  const { fd, stats } = entry.openFile(name, maxBytes);
  try {
    const node = top.get(name);
    if (!node || !isScanned(node, stats)) throw replaced(entry, name);
    const hash = createHash("sha256").update(prefix);
    const buf = Buffer.allocUnsafe(Math.min(HASH_CHUNK, Math.max(1, stats.size)));
    // Exactly the size it was opened with: a file still being written cannot make this read forever.
    for (let pos = 0; pos < stats.size; ) {
      let n: number;
      try {
        n = readSync(fd, buf, 0, Math.min(buf.length, stats.size - pos), pos);
      } catch (err) {
        const detail = `unreadable (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
        throw new FileProblem("unreadable", name, `cannot read ${name}`, { cause: err, detail });
      }
      if (n === 0) throw replaced(entry, name);
      hash.update(buf.subarray(0, n));
      pos += n;
    }
    return hash.digest("hex");
  } finally {
    closeSync(fd);
  }
}

function replaced(entry: PinnedDir, name: string): FileProblem {
  const shown = entry.shownEntry(name);
  return new FileProblem("changed", shown, `${shown} was replaced while it was read`, { detail: "replaced while it was read" });
}

/** Artifact paths are stored relative to the output root when they lie inside it. */
export function storePath(outDir: string, path: string): string {
  const rel = relative(outDir, path);
  return rel.startsWith("..") || isAbsolute(rel) ? path : rel;
}

export function resolveStorePath(outDir: string, stored: string): string {
  return isAbsolute(stored) ? stored : join(outDir, stored);
}
