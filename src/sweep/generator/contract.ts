// The generator contract's promises that a run which exited 0 or 1 can still break
// (docs/generator-contract.md, "When a chunk is broken"). Exit 1 means "finds": a run that says so
// and leaves no valid failure entry did not do what it claims (Node and Python exit 1 on an
// uncaught exception, a typo in a script path included), so its seeds have no verdict. The same
// holds for results that account for more tests than the chunk has seeds, and for a results
// directory below {out} that the run never created although it wrote {out}. A breach books the
// chunk as broken, never as complete: booking it would count every seed of it as clean.
//
// Also here: the one line of a broken run's log worth showing (its error, not Node's version
// banner), read from the log's tail without following a symlink.
import { closeSync, lstatSync, readSync } from "node:fs";
import { isAbsolute, relative, sep } from "node:path";
import { FileProblem } from "../../files/file-problem.ts";
import { PinnedDir } from "../../files/pinned-dir.ts";

/** What a run that exited 0 or 1 left, as ingest counted it. */
export interface ChunkAccount {
  exitCode: number;
  seeds: number;
  /** Valid failure entries. */
  finds: number;
  quarantine: number;
  malformed: number;
}

/** Why the run broke the contract, or null when its results can be booked. */
export function contractBreach(a: ChunkAccount): string | null {
  if (a.exitCode === 1 && a.finds === 0) {
    return a.malformed > 0
      ? `the generator exited 1 ("finds") but wrote no valid failure entry (${a.malformed} malformed)`
      : `the generator exited 1 ("finds") but wrote no failure entry`;
  }
  const accounted = a.finds + a.quarantine + a.malformed;
  if (accounted > a.seeds) {
    return `the generator reported ${accounted} tests (${a.finds} finds, ${a.quarantine} quarantined, ${a.malformed} malformed) for a chunk of ${a.seeds} seeds`;
  }
  return null;
}

/**
 * Why the results directory is missing when it should be there, or null: `results` names a
 * directory below {out}, the run created {out} (so it ran and wrote something) but not that
 * directory — a `[generator] results` that does not match where the generator writes, whose
 * failures would never be read. A run that created nothing at all is a clean chunk.
 */
export function resultsMissing(scratchDir: string, resultsDir: string): string | null {
  const below = relative(scratchDir, resultsDir);
  if (below === "" || isAbsolute(below) || below === ".." || below.startsWith(`..${sep}`)) return null;
  if (!exists(scratchDir) || exists(resultsDir)) return null;
  return `the generator wrote {out} but not the results directory {out}${sep}${below}; make [generator] results name the directory it writes failures/ into`;
}

function exists(path: string): boolean {
  try {
    return lstatSync(path, { throwIfNoEntry: false }) !== undefined;
  } catch {
    // ENOTDIR, EACCES: something is there.
    return true;
  }
}

/** Bytes read from the end of a log for its last meaningful line. */
const TAIL_BYTES = 8192;
/** Characters of that line kept. */
const TAIL_MAX_CHARS = 240;

/**
 * The last meaningful line of the log at `logPath` (below `outDir`, reached without following a
 * symlink, never blocking on a FIFO), or null when there is none or it cannot be read.
 */
export function outputTail(outDir: string, logPath: string): string | null {
  const rel = relative(outDir, logPath);
  if (rel === "" || isAbsolute(rel) || rel.startsWith("..")) return null;
  const parts = rel.split(sep);
  const name = parts.pop()!;
  let root: PinnedDir | null = null;
  let dir: PinnedDir | null = null;
  try {
    root = PinnedDir.open(outDir);
    dir = root.walk(parts);
    const { fd, stats } = dir.openFile(name, Number.MAX_SAFE_INTEGER);
    try {
      const size = Math.min(TAIL_BYTES, stats.size);
      const buf = Buffer.alloc(size);
      const got = size === 0 ? 0 : readSync(fd, buf, 0, size, stats.size - size);
      return meaningfulLine(buf.subarray(0, got).toString("utf8"));
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    if (err instanceof FileProblem || (err as NodeJS.ErrnoException).code !== undefined) return null;
    throw err;
  } finally {
    if (dir !== root) dir?.close();
    root?.close();
  }
}

// Lines that say nothing about what went wrong: stack frames, a runtime's version banner, the
// caret and brace lines around a Node error, a Python traceback's file lines.
const NOISE = /^(?:at\s|Node\.js v\d|File ".*", line \d+|[\^{}()[\]~|,.:;-]*$)/;
const TELLING = /error|exception|cannot|can't|fatal|panic|traceback|no such|not found|denied|abort|failed|killed|refused/i;

/**
 * The line of a log's tail that best says why the run failed: the last one that names an error,
 * else the last one that is not noise (a stack frame, a version banner), cut to a readable length.
 */
export function meaningfulLine(text: string): string | null {
  const lines = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== "");
  const useful = lines.filter((l) => !NOISE.test(l));
  const line = [...useful].reverse().find((l) => TELLING.test(l)) ?? useful.at(-1) ?? lines.at(-1) ?? null;
  if (line === null) return null;
  return line.length > TAIL_MAX_CHARS ? `${line.slice(0, TAIL_MAX_CHARS - 1)}…` : line;
}
