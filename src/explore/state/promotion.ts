// Promotion: a verified result's staged children move into the public corpus once their parent
// passed its commit fence (staging.ts stages and verifies them; master/commits.ts and
// master/commit-batch.ts call this). Each child is fsynced, linked in under its hash name without
// ever replacing one, checked to be the very file that was synced, and re-hashed in place; a child
// already public is verified instead. Nothing is followed through a symlink.
import { closeSync, constants, fstatSync, fsyncSync, openSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { RuntimeFailure } from "../../errors.ts";
import { PinnedDir } from "../../files/pinned-dir.ts";
import { HEX64 } from "../../core/message-checks.ts";
import { FileProblem, verifyPublic } from "./corpus.ts";
import { fsyncDir, lstatOrNull, moveNoReplace } from "./durable.ts";
import type { FileIdentity } from "./child-sync.ts";

/**
 * Moves verified children into the public corpus; call only after the parent passed its commit
 * fence. For each unique hash in sorted order: an existing public object must re-hash to its name
 * (IntegrityError otherwise, the object is left as it is); else the staged file is fsynced and
 * moved into the corpus without replacing a name (moveNoReplace: another master promoting the
 * same child first wins, and its object is verified instead), and what arrived must be the very
 * file that was fsynced (a file the worker swapped in meanwhile is removed from the corpus again
 * and refused). One directory fsync covers the new names and those of objects found public but not
 * yet trusted (another master's may not be durable yet), then every moved object is re-hashed in
 * place. Returns how many such public objects it verified; with `moved`, the caller's directory
 * fsync must cover them too. Re-running after a partial
 * promotion is harmless; a child found neither in the stage nor in the corpus is an error. A
 * stage of null is one that is gone (or was refused): only public children can complete it.
 */
export function promoteChildren(
  stage: string | PinnedDir | null,
  corpusDir: string,
  hashes: readonly string[],
  c: {
    /** Bytes of one corpus object. */
    maxBytes: number;
    /** Public objects this process already verified or published: not re-hashed again. */
    trusted?: (hash: string) => boolean;
    /** Staged children already fsynced (syncStagedChildren), by hash: their identity. */
    synced?: ReadonlyMap<string, FileIdentity>;
    /**
     * Group commit: the moved hashes are pushed here instead of the directory fsync and the
     * re-hash; the caller fsyncs the corpus directory once for the batch, then verifies them.
     */
    moved?: string[];
  },
): number {
  const { maxBytes, trusted = () => false } = c;
  for (const hash of hashes) {
    if (!HEX64.test(hash)) throw new RuntimeFailure(`cannot promote '${hash}': not a 64-hex SHA-256`);
  }
  let pin: PinnedDir | null = null;
  if (typeof stage === "string") {
    try {
      pin = PinnedDir.openNoFollow(stage);
    } catch (err) {
      if (!(err instanceof FileProblem && err.problem === "missing")) throw err;
    }
  } else {
    pin = stage;
  }
  try {
    return promotePinned(pin, corpusDir, [...new Set(hashes)].sort(), { maxBytes, trusted, synced: c.synced, moved: c.moved });
  } finally {
    if (pin !== null && pin !== stage) pin.close();
  }
}

/** promoteChildren once the stage is pinned (or gone); `unique`: the hashes deduplicated and sorted. */
function promotePinned(
  stage: PinnedDir | null,
  corpusDir: string,
  unique: readonly string[],
  c: { maxBytes: number; trusted: (hash: string) => boolean; synced?: ReadonlyMap<string, FileIdentity>; moved?: string[] },
): number {
  const { maxBytes, trusted } = c;
  const moved: string[] = [];
  let existing = 0;
  for (const hash of unique) {
    const dest = join(corpusDir, hash);
    if (trusted(hash)) continue;
    if (lstatOrNull(dest) !== null) {
      verifyPublic(corpusDir, hash, maxBytes);
      existing++;
      continue;
    }
    const st = stage?.lstat(hash) ?? null;
    if (stage === null || st === null) {
      throw new RuntimeFailure(`child ${hash} is neither staged in ${stage?.shown ?? "its stage (gone)"} nor public in ${corpusDir}; the result cannot be promoted`);
    }
    const shown = stage.shownEntry(hash);
    if (!st.isFile()) {
      throw new FileProblem(st.isSymbolicLink() ? "symlink" : "not-regular", shown, `staged child ${shown} is not a regular file; it cannot be promoted`);
    }
    const synced = c.synced?.get(hash) ?? fsyncRegular(stage, hash);
    if (!moveNoReplace(stage.entry(hash), dest)) {
      // Another master published the same child since the check above: its object is verified
      // instead, and its name is made durable with this promotion's directory fsync.
      verifyPublic(corpusDir, hash, maxBytes);
      existing++;
      continue;
    }
    const arrived = lstatOrNull(dest);
    if (!arrived?.isFile() || arrived.dev !== synced.dev || arrived.ino !== synced.ino) {
      unlinkSync(dest);
      throw new FileProblem("changed", shown, `staged child ${shown} was replaced while it was promoted; it was taken out of the corpus again`);
    }
    moved.push(hash);
  }
  if (c.moved) {
    c.moved.push(...moved);
    return existing;
  }
  if (moved.length > 0 || existing > 0) fsyncDir(corpusDir);
  for (const hash of moved) verifyPublic(corpusDir, hash, maxBytes);
  return existing;
}

/** fsyncs the regular file `name` of `dir` (never through a symlink) and returns its identity. */
function fsyncRegular(dir: PinnedDir, name: string): { dev: number; ino: number } {
  const fd = openSync(dir.entry(name), constants.O_RDONLY | constants.O_NOFOLLOW | (constants.O_NONBLOCK ?? 0));
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new FileProblem("not-regular", dir.shownEntry(name), `staged child ${dir.shownEntry(name)} is not a regular file; it cannot be promoted`);
    fsyncSync(fd);
    return { dev: st.dev, ino: st.ino };
  } finally {
    closeSync(fd);
  }
}
