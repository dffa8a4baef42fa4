// Children of one execution travel worker -> stage -> corpus. The worker copies each output into a
// hidden per-result directory under its SHA-256 name and reports only the hashes, the byte total
// and the stage id. The master checks the stage exactly (inventory = declared set, every digest,
// byte total) and, only after the parent passed its commit fence, promotes the children into the
// public corpus. Promotion is replayable: a child already public counts once its digest checks.
import { randomHex } from "../util/random-hex.ts";
import { closeSync, constants, fsyncSync, lstatSync, mkdirSync, openSync, opendirSync, renameSync, rmSync, type Dir } from "node:fs";
import { join } from "node:path";
import { RuntimeFailure } from "../errors.ts";
import { FileProblem, HASH_RE, copyHashing, hashFile, verifyPublic, type Budgets } from "./corpus.ts";
import { fsyncDir, lstatOrNull } from "./durable.ts";

export interface CollectedOutputs {
  files: { path: string; size: number }[];
  totalBytes: number;
}

export type BudgetResource = "objects" | "bytes" | "input-bytes";

const BUDGET_NAMES: Record<BudgetResource, string> = {
  objects: "child count",
  bytes: "result byte",
  "input-bytes": "per-object byte",
};

/** One execution exceeded a result budget. `observed` is where counting stopped, not necessarily the full amount. */
export class BudgetError extends RuntimeFailure {
  readonly resource: BudgetResource;
  readonly observed: number;
  readonly limit: number;
  /** The stage directory created before the budget was hit, so the master can remove it. */
  stageId?: string;
  constructor(resource: BudgetResource, observed: number, limit: number) {
    super(`the execution's outputs exceed the ${BUDGET_NAMES[resource]} budget: ${observed} > ${limit}; raise the budget or make the target emit less`);
    this.resource = resource;
    this.observed = observed;
    this.limit = limit;
  }
}

function isHintsFile(name: string): boolean {
  return name.endsWith(".hints");
}

function closeDir(dir: Dir): void {
  try {
    dir.closeSync();
  } catch {
    // Closing a directory handle fails only if it is already closed.
  }
}

/**
 * The run's outputs: every entry of outDir except names ending in ".hints", sorted by name. Each
 * must be a regular, non-symlink file. The scan stops as soon as a budget is exceeded.
 */
export function collectOutputs(outDir: string, budgets: Budgets): CollectedOutputs {
  const files: { path: string; size: number }[] = [];
  let totalBytes = 0;
  const dir = opendirSync(outDir);
  try {
    for (let entry = dir.readSync(); entry !== null; entry = dir.readSync()) {
      if (isHintsFile(entry.name)) continue;
      if (files.length + 1 > budgets.maxChildren) throw new BudgetError("objects", files.length + 1, budgets.maxChildren);
      const path = join(outDir, entry.name);
      const st = lstatSync(path);
      if (st.isSymbolicLink()) {
        throw new FileProblem("symlink", path, `output ${path} is not a regular file (it is a symbolic link)`);
      }
      if (!st.isFile()) throw new FileProblem("not-regular", path, `output ${path} is not a regular file`);
      totalBytes += st.size;
      if (totalBytes > budgets.maxResultBytes) throw new BudgetError("bytes", totalBytes, budgets.maxResultBytes);
      files.push({ path, size: st.size });
    }
  } finally {
    closeDir(dir);
  }
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { files, totalBytes };
}

/**
 * Creates stageRoot/<stageId>/ and stream-copies each output into it under its SHA-256 name.
 * Duplicates collapse on disk but keep one hash entry per output and count their bytes again.
 * On any failure the stage directory is removed; a BudgetError carries the stage id regardless.
 */
export function stageOutputs(
  stageRoot: string,
  outputs: CollectedOutputs,
  budgets: Budgets,
): { stageId: string; hashes: string[]; stagedBytes: number } {
  if (outputs.files.length > budgets.maxChildren) throw new BudgetError("objects", outputs.files.length, budgets.maxChildren);
  if (outputs.totalBytes > budgets.maxResultBytes) throw new BudgetError("bytes", outputs.totalBytes, budgets.maxResultBytes);
  mkdirSync(stageRoot, { recursive: true, mode: 0o700 });
  const stageId = randomHex(16);
  const stageDir = join(stageRoot, stageId);
  mkdirSync(stageDir, { mode: 0o700 });
  try {
    const hashes: string[] = [];
    const onDisk = new Set<string>();
    let stagedBytes = 0;
    for (const [i, file] of outputs.files.entries()) {
      const room = budgets.maxResultBytes - stagedBytes;
      const limit = Math.min(budgets.maxInputBytes, room);
      const temp = join(stageDir, `.part-${i}`);
      let copied: { hash: string; size: number };
      try {
        // Not fsynced: promotion fsyncs each child before it becomes public.
        copied = copyHashing(file.path, temp, limit, undefined, false);
      } catch (err) {
        // The output grew since it was collected: report the budget it now breaks.
        if (err instanceof FileProblem && err.problem === "too-large" && err.observed !== undefined) {
          throw room < budgets.maxInputBytes
            ? new BudgetError("bytes", stagedBytes + err.observed, budgets.maxResultBytes)
            : new BudgetError("input-bytes", err.observed, budgets.maxInputBytes);
        }
        throw err;
      }
      if (onDisk.has(copied.hash)) {
        rmSync(temp, { force: true });
      } else {
        renameSync(temp, join(stageDir, copied.hash));
        onDisk.add(copied.hash);
      }
      hashes.push(copied.hash);
      stagedBytes += copied.size;
    }
    return { stageId, hashes, stagedBytes };
  } catch (err) {
    if (err instanceof BudgetError) err.stageId = stageId;
    try {
      rmSync(stageDir, { recursive: true, force: true });
    } catch {
      // The original failure matters more; a budget error still names the stage for cleanup.
    }
    throw err;
  }
}

export type StageVerdict = { ok: true } | { ok: false; reason: string };

/**
 * Master-side check of a stage against a RESULT. The inventory is compared by name first and the
 * scan stops at the first unexpected entry, so no staged byte is read unless the names are exactly
 * the declared set. Then every entry must be a regular file whose SHA-256 is its name, and the
 * sizes summed once per declared hash (duplicates again) must equal stagedBytes.
 */
export function verifyStage(stageDir: string, declared: readonly string[], stagedBytes: number, maxBytes: number): StageVerdict {
  for (const hash of declared) {
    if (!HASH_RE.test(hash)) return { ok: false, reason: `declared child '${hash}' is not a 64-hex SHA-256` };
  }
  if (!Number.isSafeInteger(stagedBytes) || stagedBytes < 0) {
    return { ok: false, reason: `declared staged bytes ${stagedBytes} is not a non-negative integer` };
  }
  const expected = new Set(declared);
  try {
    const st = lstatSync(stageDir);
    if (!st.isDirectory()) return { ok: false, reason: `stage ${stageDir} is not a directory` };
  } catch (err) {
    return { ok: false, reason: `stage ${stageDir} cannot be inspected: ${(err as Error).message}` };
  }

  const seen = new Set<string>();
  let dir: Dir;
  try {
    dir = opendirSync(stageDir);
  } catch (err) {
    return { ok: false, reason: `stage ${stageDir} cannot be listed: ${(err as Error).message}` };
  }
  try {
    for (let entry = dir.readSync(); entry !== null; entry = dir.readSync()) {
      if (!HASH_RE.test(entry.name)) return { ok: false, reason: `stage holds an entry with an invalid name '${entry.name}'` };
      if (!expected.has(entry.name)) return { ok: false, reason: `stage holds undeclared child ${entry.name}` };
      seen.add(entry.name);
    }
  } catch (err) {
    return { ok: false, reason: `stage ${stageDir} cannot be listed: ${(err as Error).message}` };
  } finally {
    closeDir(dir);
  }
  for (const hash of expected) {
    if (!seen.has(hash)) return { ok: false, reason: `declared child ${hash} is missing from the stage` };
  }

  const sizes = new Map<string, number>();
  for (const hash of [...expected].sort()) {
    const path = join(stageDir, hash);
    try {
      const { hash: actual, size } = hashFile(path, maxBytes);
      if (actual !== hash) return { ok: false, reason: `staged child ${hash} holds ${actual}` };
      sizes.set(hash, size);
    } catch (err) {
      if (err instanceof FileProblem) return { ok: false, reason: `staged child ${hash} rejected: ${err.message}` };
      return { ok: false, reason: `staged child ${hash} cannot be read: ${(err as Error).message}` };
    }
  }
  let total = 0;
  for (const hash of declared) total += sizes.get(hash) as number;
  if (total !== stagedBytes) return { ok: false, reason: `staged children hold ${total} bytes, the result declared ${stagedBytes}` };
  return { ok: true };
}

/**
 * Moves verified children into the public corpus; call only after the parent passed its commit
 * fence. For each unique hash in sorted order: an existing public object must re-hash to its name
 * (IntegrityError otherwise, the object is left as it is); else the staged file is fsynced and
 * renamed into the corpus. One directory fsync covers the renames, then every moved object is
 * re-hashed in place. Re-running after a partial promotion is harmless; a child found neither in
 * the stage nor in the corpus is an error.
 */
export function promoteChildren(
  stageDir: string,
  corpusDir: string,
  hashes: readonly string[],
  maxBytes: number,
  /** Public objects this process already verified or published: not re-hashed again. */
  trusted: (hash: string) => boolean = () => false,
): void {
  for (const hash of hashes) {
    if (!HASH_RE.test(hash)) throw new RuntimeFailure(`cannot promote '${hash}': not a 64-hex SHA-256`);
  }
  const moved: string[] = [];
  for (const hash of [...new Set(hashes)].sort()) {
    const dest = join(corpusDir, hash);
    if (trusted(hash)) continue;
    if (lstatOrNull(dest) !== null) {
      verifyPublic(corpusDir, hash, maxBytes);
      continue;
    }
    const staged = join(stageDir, hash);
    const st = lstatOrNull(staged);
    if (st === null) {
      throw new RuntimeFailure(`child ${hash} is neither staged in ${stageDir} nor public in ${corpusDir}; the result cannot be promoted`);
    }
    if (!st.isFile()) {
      throw new FileProblem(st.isSymbolicLink() ? "symlink" : "not-regular", staged, `staged child ${staged} is not a regular file; it cannot be promoted`);
    }
    fsyncFile(staged);
    renameSync(staged, dest);
    moved.push(hash);
  }
  if (moved.length > 0) fsyncDir(corpusDir);
  for (const hash of moved) verifyPublic(corpusDir, hash, maxBytes);
}

function fsyncFile(path: string): void {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
