// Children of one execution travel worker -> stage -> corpus. The worker copies each output into a
// hidden per-result directory under its SHA-256 name and reports only the hashes, the byte total
// and the stage id. The master checks the stage exactly (inventory = declared set, every digest,
// byte total) and, only after the parent passed its commit fence, promotes the children into the
// public corpus (promotion.ts). Promotion is replayable: a child already public counts once its
// digest checks.
//
// Nothing a target or a worker wrote is followed through a symlink: outputs are listed and read
// below a pinned output directory, a stage is created and filled below a pinned stage root
// (src/files/pinned-dir.ts), and the master reaches a stage only from the staging root it created
// itself (StagingArea), every step opened without following a symlink.
import { randomHex } from "../../util/random-hex.ts";
import { mkdirSync, renameSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { RuntimeFailure } from "../../errors.ts";
import { PinnedDir, type DirIdentity } from "../../files/pinned-dir.ts";
import { removeEntriesOffLoop } from "../../files/removal-thread.ts";
import { FileProblem, STAGE_ID_RE, copyHashing, type Budgets } from "./corpus.ts";
import { hashFile } from "./stable-read.ts";
import { HEX64 } from "../../core/message-checks.ts";

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

/**
 * The run's outputs: every entry of outDir except names ending in ".hints", sorted by name. Each
 * must be a regular, non-symlink file. The scan stops as soon as a budget is exceeded. The paths
 * returned for a pinned outDir resolve only while that pin stays open.
 */
export function collectOutputs(outDir: string | PinnedDir, budgets: Budgets): CollectedOutputs {
  const pin = typeof outDir === "string" ? PinnedDir.openNoFollow(outDir) : outDir;
  const files: { path: string; size: number }[] = [];
  let totalBytes = 0;
  try {
    for (const entry of pin.list()) {
      if (isHintsFile(entry.name)) continue;
      if (files.length + 1 > budgets.maxChildren) throw new BudgetError("objects", files.length + 1, budgets.maxChildren);
      const shown = pin.shownEntry(entry.name);
      const st = pin.lstat(entry.name);
      if (st === null) continue; // removed since the listing: not an output
      if (st.isSymbolicLink()) {
        throw new FileProblem("symlink", shown, `output ${shown} is not a regular file (it is a symbolic link; nothing is followed through a symlink)`);
      }
      if (!st.isFile()) throw new FileProblem("not-regular", shown, `output ${shown} is not a regular file`);
      totalBytes += st.size;
      if (totalBytes > budgets.maxResultBytes) throw new BudgetError("bytes", totalBytes, budgets.maxResultBytes);
      files.push({ path: typeof outDir === "string" ? join(outDir, entry.name) : pin.entry(entry.name), size: st.size });
    }
  } finally {
    if (pin !== outDir) pin.close();
  }
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { files, totalBytes };
}

/**
 * Creates stageRoot/<stageId>/ and stream-copies each output into it under its SHA-256 name.
 * Duplicates collapse on disk but keep one hash entry per output and count their bytes again.
 * On any failure the stage directory is removed; a BudgetError carries the stage id regardless.
 * stageRoot itself must be a real directory (created when missing), never a symlink.
 */
export function stageOutputs(
  stageRoot: string,
  outputs: CollectedOutputs,
  budgets: Budgets,
): { stageId: string; hashes: string[]; stagedBytes: number } {
  if (outputs.files.length > budgets.maxChildren) throw new BudgetError("objects", outputs.files.length, budgets.maxChildren);
  if (outputs.totalBytes > budgets.maxResultBytes) throw new BudgetError("bytes", outputs.totalBytes, budgets.maxResultBytes);
  mkdirSync(stageRoot, { recursive: true, mode: 0o700 });
  const root = PinnedDir.openNoFollow(stageRoot);
  try {
    const stageId = randomHex(16);
    const stage = root.createDir(stageId, 0o700);
    if (stage === null) throw new RuntimeFailure(`stage ${root.shownEntry(stageId)} exists already; a random stage id collided`);
    try {
      return fillStage(stage, outputs, budgets, stageId);
    } catch (err) {
      if (err instanceof BudgetError) err.stageId = stageId;
      try {
        root.remove(stageId);
      } catch {
        // The original failure matters more; a budget error still names the stage for cleanup.
      }
      throw err;
    } finally {
      stage.close();
    }
  } finally {
    root.close();
  }
}

function fillStage(stage: PinnedDir, outputs: CollectedOutputs, budgets: Budgets, stageId: string): { stageId: string; hashes: string[]; stagedBytes: number } {
  const hashes: string[] = [];
  const onDisk = new Set<string>();
  let stagedBytes = 0;
  for (const [i, file] of outputs.files.entries()) {
    const room = budgets.maxResultBytes - stagedBytes;
    const limit = Math.min(budgets.maxInputBytes, room);
    const temp = stage.entry(`.part-${i}`);
    let copied: { hash: string; size: number };
    try {
      // Not fsynced: promotion fsyncs each child before it becomes public.
      copied = copyHashing(file.path, temp, { maxBytes: limit, durable: false });
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
      unlinkSync(temp);
    } else {
      renameSync(temp, stage.entry(copied.hash));
      onDisk.add(copied.hash);
    }
    hashes.push(copied.hash);
    stagedBytes += copied.size;
  }
  return { stageId, hashes, stagedBytes };
}

export type StageVerdict = { ok: true } | { ok: false; reason: string };

/**
 * Master-side check of a stage against a RESULT. The inventory is compared by name first and the
 * scan stops at the first unexpected entry, so no staged byte is read unless the names are exactly
 * the declared set. Then every entry must be a regular file whose SHA-256 is its name, and the
 * sizes summed once per declared hash (duplicates again) must equal stagedBytes. A stage given by
 * path must not be a symlink itself; a pinned one comes from StagingArea.open.
 */
export function verifyStage(stage: string | PinnedDir, declared: readonly string[], stagedBytes: number, maxBytes: number): StageVerdict {
  for (const hash of declared) {
    if (!HEX64.test(hash)) return { ok: false, reason: `declared child '${hash}' is not a 64-hex SHA-256` };
  }
  if (!Number.isSafeInteger(stagedBytes) || stagedBytes < 0) {
    return { ok: false, reason: `declared staged bytes ${stagedBytes} is not a non-negative integer` };
  }
  let pin: PinnedDir;
  try {
    pin = typeof stage === "string" ? PinnedDir.openNoFollow(stage) : stage;
  } catch (err) {
    if (err instanceof FileProblem) return { ok: false, reason: err.message };
    throw err;
  }
  try {
    return verifyPinned(pin, declared, stagedBytes, maxBytes);
  } finally {
    if (pin !== stage) pin.close();
  }
}

function verifyPinned(stage: PinnedDir, declared: readonly string[], stagedBytes: number, maxBytes: number): StageVerdict {
  const expected = new Set(declared);
  const seen = new Set<string>();
  let entries;
  try {
    entries = stage.list();
  } catch (err) {
    if (err instanceof FileProblem) return { ok: false, reason: err.message };
    throw err;
  }
  for (const entry of entries) {
    if (!HEX64.test(entry.name)) return { ok: false, reason: `stage holds an entry with an invalid name '${entry.name}'` };
    if (!expected.has(entry.name)) return { ok: false, reason: `stage holds undeclared child ${entry.name}` };
    seen.add(entry.name);
  }
  for (const hash of expected) {
    if (!seen.has(hash)) return { ok: false, reason: `declared child ${hash} is missing from the stage` };
  }

  const sizes = new Map<string, number>();
  for (const hash of [...expected].sort()) {
    try {
      const { hash: actual, size } = hashFile(stage.entry(hash), maxBytes);
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

const EXECUTOR_KEY = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/**
 * The master's view of its staging root: the directory it created, remembered by identity, and
 * below it <executor>/<stage id>, each opened without following a symlink. A worker that shares
 * the file system may replace any of them with a symlink or another directory: it gets a refusal,
 * never a walk into the link's target, and nothing outside the staging root is read, moved or
 * removed.
 */
export class StagingArea {
  private readonly identity: DirIdentity;

  constructor(readonly root: string) {
    mkdirSync(root, { recursive: true, mode: 0o700 });
    const dir = PinnedDir.openNoFollow(root);
    try {
      this.identity = dir.identity();
    } finally {
      dir.close();
    }
  }

  /** Where an executor writes its stages (derived from the key the master chose, never from the worker). */
  executorRoot(executor: string): string {
    return join(this.root, executor);
  }

  /** The stage, pinned (close it). FileProblem when a step is missing, a symlink, not a directory, or the root was replaced. */
  open(executor: string, stageId: string): OpenStage {
    if (!EXECUTOR_KEY.test(executor) || !STAGE_ID_RE.test(stageId)) {
      throw new FileProblem("missing", `${executor}/${stageId}`, `'${executor}/${stageId}' is not a stage this master can have created`);
    }
    const root = PinnedDir.openExpected(this.root, this.identity);
    try {
      const parent = root.openDir(executor);
      try {
        return new OpenStage(parent, parent.openDir(stageId), stageId);
      } catch (err) {
        parent.close();
        throw err;
      }
    } finally {
      root.close();
    }
  }

  /** Removes a stage if it is there, never following a symlink on the way or inside it. */
  remove(executor: string, stageId: string): void {
    if (!EXECUTOR_KEY.test(executor) || !STAGE_ID_RE.test(stageId)) return;
    let root: PinnedDir;
    try {
      root = PinnedDir.openExpected(this.root, this.identity);
    } catch (err) {
      if (err instanceof FileProblem) return; // a replaced root is not ours to clean
      throw err;
    }
    try {
      const exec = root.openDirIfPresent(executor);
      if (exec === null) return;
      try {
        exec.remove(stageId);
      } finally {
        exec.close();
      }
    } catch (err) {
      // A symlinked executor directory is left as it is: nothing is removed through it.
      if (!(err instanceof FileProblem)) throw err;
    } finally {
      root.close();
    }
  }
}

/** A stage reached through StagingArea.open: read it through `dir`, remove it through its pinned parent. */
export class OpenStage {
  constructor(
    private readonly parent: PinnedDir,
    readonly dir: PinnedDir,
    private readonly stageId: string,
  ) {}

  /** Removes the stage (never following a symlink inside it); `dir` stays usable until close. */
  remove(): void {
    try {
      this.parent.remove(this.stageId);
    } catch (err) {
      // Nested too deep to remove: left inside the staging root, never followed.
      if (!(err instanceof FileProblem)) throw err;
    }
  }

  close(): void {
    this.dir.close();
    this.parent.close();
  }

  /**
   * remove() and close() with the file-system work on the removal thread, off the event loop:
   * freeing a directory's inode is what costs. The stage's own descriptor is closed first; the
   * thread reaches the stage through its parent's pin, unlinks its entries (a symlink is
   * unlinked, never followed) and removes it. Anything unusual (a subdirectory a worker added)
   * falls back to remove(). Never rejects.
   */
  async removeAndClose(): Promise<void> {
    this.dir.close();
    try {
      const left = await removeEntriesOffLoop({ fd: this.parent.fd }, [{ name: this.stageId, kind: "files-dir" }]);
      if (left.length > 0) this.remove();
    } catch {
      // Left inside the staging root (removed with the campaign's state), never followed.
    } finally {
      this.parent.close();
    }
  }
}
