// Ingest: turn a finished chunk's results directory into store rows and artifacts.
// Used unchanged by both transports: the coordinator ingests a worker's scratch directory in place
// on the shared filesystem. Everything below the campaign's output directory that a generator or
// a worker could have written is untrusted. It is reached only by a descriptor-relative walk from
// <out> (src/files/pinned-dir.ts) that opens every component without following a symlink; every
// meta.json is validated; an entry that does not validate is kept under <out>/malformed/ and
// reported, never silently dropped, never trusted. A chunk whose results cannot be reached that
// way (a symlink or a file on the path to them, failures/ or quarantine/ not a real directory) is
// refused as a whole: `refused` says why, nothing of it is recorded, and the caller books it as
// aborted, so its seeds are swept again.
//
// Replayable: ingest changes nothing in the chunk's scratch directory (files are hard-linked into
// the campaign, or copied across file systems) and runs inside the caller's transaction. When
// that transaction rolls back, running ingestChunk again gives the same rows and reuses the
// directories the rolled-back attempt placed (they hold the very same files), so the books and
// the artifacts end as after one clean run. The caller removes the scratch directory after the
// commit. It throws only for store errors, errors writing the campaign's own directories, and
// bugs: every problem with what the generator wrote is a malformed entry, a refusal or a skipped
// quarantine sample.
import { createHash } from "node:crypto";
import { lstatSync } from "node:fs";
import { isAbsolute, join, relative, sep } from "node:path";
import { RuntimeFailure } from "../../errors.ts";
import { FileProblem } from "../../files/file-problem.ts";
import { PinnedDir } from "../../files/pinned-dir.ts";
import { placeFile, placeNote, placeTree, scanTree, scannedFile, type TreeNode } from "../../files/tree.ts";
import type { SweepStore } from "../../store/port.ts";
import { recordQuarantineReasons, type QuarantineReason } from "./quarantine-reasons.ts";
import { artifactNames, numbered, storePath } from "./ingest-files.ts";
import { problemReason, readFailureEntry, type ParsedFailure } from "./failure-entry.ts";

export { resolveStorePath, storePath } from "./ingest-files.ts";
export { INCONCLUSIVE_PREFIX, NO_REASON, type QuarantineReason } from "./quarantine-reasons.ts";
export type { ParsedFailure } from "./failure-entry.ts";

export const QUARANTINE_SAMPLES = 40;
export interface IngestTarget {
  generationId: number;
  genHash: string;
  laneId: number;
  chunkId: number;
  seedFrom: number;
  seedTo: number;
  /** Where the generator wrote failures/ and quarantine/; must lie inside outDir. */
  resultsDir: string;
  /** The campaign's output root: artifacts go to <outDir>/failures, samples to <outDir>/quarantine. */
  outDir: string;
  appBuild: string | null;
  /**
   * A minimize unit's results instead of a chunk's: which seeds may appear (any other is
   * malformed), and who books each valid entry. Quarantine is not read.
   */
  minimize?: {
    seeds: ReadonlySet<number>;
    record(find: ParsedFailure, placeArtifact: () => string): void;
  };
}

export interface IngestResult {
  finds: number;
  /** New failure rows: new distinct failures and new finds pending minimization (`newDistinct` of them distinct). */
  newFailures: number;
  newDistinct: number;
  /**
   * Of the new finds pending minimization, those whose signature no failure of the generation had
   * before: a crash never seen, which alerts (exit 1) without waiting for its minimization.
   */
  newSignatures: number;
  newFailureIds: number[];
  /** Failures marked fixed that this chunk hit again (regressions): reopened, and as alarming as new ones. */
  reopened: number;
  reopenedIds: number[];
  unshrunk: number;
  quarantine: number;
  /** Why the quarantined tests were quarantined, one row per reason (recorded per chunk). */
  quarantineReasons: QuarantineReason[];
  /** Entries that did not validate or were refused; kept under <out>/malformed/ (a tree, or a note saying why). */
  malformed: { entry: string; reason: string; keptAt: string }[];
  /**
   * Why the chunk's results could not be read at all, or null. Nothing of such a chunk was
   * recorded and its seeds have no verdict: book it as aborted. The refusal is also the one
   * entry of `malformed`.
   */
  refused: string | null;
}

/** Ingests one chunk's results into `store`, atomically. */
export function ingestChunk(store: SweepStore, t: IngestTarget): IngestResult {
  const result: IngestResult = {
    finds: 0,
    newFailures: 0,
    newDistinct: 0,
    newSignatures: 0,
    newFailureIds: [],
    reopened: 0,
    reopenedIds: [],
    unshrunk: 0,
    quarantine: 0,
    quarantineReasons: [],
    malformed: [],
    refused: null,
  };
  const below = relative(t.outDir, t.resultsDir);
  const inside = !isAbsolute(below) && below !== ".." && !below.startsWith(`..${sep}`);
  // A clean chunk has neither directory: two lstat calls and nothing else. Through a symlinked
  // path this only learns that there is nothing to read, which is the verdict either way.
  if (inside && absent(join(t.resultsDir, "failures")) && absent(join(t.resultsDir, "quarantine"))) return result;
  const out = PinnedDir.open(t.outDir);
  try {
    store.atomically(() => new ChunkIngest(store, t, out, result).run(inside ? below.split(sep).filter((c) => c !== "") : null));
  } finally {
    out.close();
  }
  return result;
}

function absent(path: string): boolean {
  try {
    return lstatSync(path, { throwIfNoEntry: false }) === undefined;
  } catch {
    // ENOTDIR, EACCES…: the full walk says what is wrong.
    return false;
  }
}

/** One ingest of one chunk: the pins it opened (closed at the end) and the campaign directories it writes. */
class ChunkIngest {
  private readonly pins: PinnedDir[] = [];
  private failuresDest: PinnedDir | null = null;
  private malformedDest: PinnedDir | null = null;

  constructor(
    private readonly store: SweepStore,
    private readonly t: IngestTarget,
    private readonly out: PinnedDir,
    private readonly result: IngestResult,
  ) {}

  run(components: string[] | null): void {
    try {
      this.ingest(components);
    } finally {
      for (const p of this.pins) p.close();
    }
  }

  private hold(p: PinnedDir): PinnedDir {
    this.pins.push(p);
    return p;
  }

  private ingest(components: string[] | null): void {
    if (components === null) {
      this.refuse(`${this.t.resultsDir} lies outside the campaign's output directory ${this.t.outDir}; [generator] results must name a directory inside {out}`);
      return;
    }
    let failures: PinnedDir | null;
    let quarantine: PinnedDir | null;
    try {
      const results = this.hold(this.out.walk(components));
      failures = results.openDirIfPresent("failures");
      if (failures) this.hold(failures);
      quarantine = results.openDirIfPresent("quarantine");
      if (quarantine) this.hold(quarantine);
    } catch (err) {
      if (!(err instanceof FileProblem)) throw err;
      // A results directory that was never created: the generator wrote nothing, a clean chunk.
      if (err.problem !== "missing") this.refuse(`${err.message}; the chunk's results are read only from real directories`);
      return;
    }
    // The campaign's own directories: whoever replaced one with a symlink gets nothing written through it.
    for (const name of ["failures", "malformed", "quarantine"]) {
      try {
        this.out.openDirIfPresent(name)?.close();
      } catch (err) {
        if (!(err instanceof FileProblem)) throw err;
        this.refuse(`the campaign directory ${err.message}; restore it as a real directory`);
        return;
      }
    }
    if (failures) this.ingestFailures(failures);
    if (quarantine && !this.t.minimize) this.ingestQuarantine(quarantine);
  }

  /** The chunk cannot be read: nothing is recorded, and a note under <out>/malformed/ says why. */
  private refuse(reason: string): void {
    this.result.refused = reason;
    let keptAt: string;
    try {
      keptAt = this.keepNote(this.unitName(), `${this.unitName().replace("-", " ")} (seeds ${this.t.seedFrom}..${this.t.seedTo}) was refused: ${reason}\n`);
    } catch (err) {
      if (!(err instanceof RuntimeFailure)) throw err;
      keptAt = `nowhere (${err.message})`;
    }
    this.result.malformed.push({ entry: this.t.resultsDir, reason, keptAt });
  }

  private ingestFailures(failures: PinnedDir): void {
    const num = (name: string) => (/^\d+$/.test(name) ? Number(name) : 0);
    const entries = failures
      .list()
      .filter((e) => e.kind !== "file") // a plain file beside the entries is not an entry
      .sort((a, b) => num(a.name) - num(b.name) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      if (e.kind === "directory") {
        this.ingestEntry(failures, e.name);
      } else {
        const detail = failures.refusal(e.name).detail;
        this.malformed(failures.shownEntry(e.name), detail, () => this.keepNote(this.label(e.name), `${failures.shownEntry(e.name)}: ${detail}\n`));
      }
    }
  }

  private ingestEntry(failures: PinnedDir, name: string): void {
    const shown = failures.shownEntry(name);
    let entry: PinnedDir;
    try {
      // Problems inside the entry are reported relative to it ("meta.json: missing").
      entry = failures.openDir(name, "");
    } catch (err) {
      if (!(err instanceof FileProblem)) throw err;
      this.malformed(shown, err.detail, () => this.keepNote(this.label(name), `${shown}: ${err.detail}\n`));
      return;
    }
    try {
      let nodes: TreeNode[] = [];
      let reason: string;
      try {
        const refused: FileProblem[] = [];
        nodes = scanTree(entry, refused);
        const parsed = refused.length > 0 ? problemReason(refused[0]!) : readFailureEntry(entry, nodes, (seed) => this.seedProblem(seed));
        if (typeof parsed !== "string") {
          this.recordFind(parsed, entry, nodes);
          return;
        }
        reason = parsed;
      } catch (err) {
        if (!(err instanceof FileProblem)) throw err;
        reason = problemReason(err);
      }
      this.malformed(shown, reason, () => (nodes.length > 0 ? this.keepTree(name, entry, nodes) : this.keepNote(this.label(name), `${shown}: ${reason}\n`)));
    } finally {
      entry.close();
    }
  }

  /** Why `seed` does not belong in this chunk's (or minimize unit's) results, or null. */
  private seedProblem(seed: number): string | null {
    if (this.t.minimize) return this.t.minimize.seeds.has(seed) ? null : `meta.json: seed ${seed} is not one of the seeds this minimize unit was given`;
    return seed < this.t.seedFrom || seed > this.t.seedTo ? `meta.json: seed ${seed} is outside the chunk's range ${this.t.seedFrom}..${this.t.seedTo}` : null;
  }

  private recordFind(p: ParsedFailure, entry: PinnedDir, nodes: readonly TreeNode[]): void {
    const t = this.t;
    const place = () => storePath(t.outDir, join(t.outDir, "failures", placeTree(entry, nodes, this.failuresDir(), artifactNames(p.dedupKey, t.generationId))));
    if (t.minimize) {
      t.minimize.record(p, place);
      return;
    }
    let existing = this.store.failureByKey(t.generationId, p.dedupKey);
    // A find minimized earlier: its seeds now belong to the distinct failure it merged into.
    if (existing?.merged_into != null) existing = this.store.failureById(existing.merged_into) ?? existing;
    let failureId: number;
    if (existing) {
      failureId = existing.id;
      if (existing.state === "fixed") {
        this.store.reopenFailure(failureId);
        this.result.reopened++;
        this.result.reopenedIds.push(failureId);
      }
    } else {
      // Placed before the row exists: a source file that changed meanwhile makes the entry malformed instead.
      const artifactDir = place();
      if (!p.shrunk && !this.store.signatureSeen(t.generationId, p.signature)) this.result.newSignatures++;
      failureId = this.store.recordFailure({
        generationId: t.generationId,
        laneId: t.laneId,
        dedupKey: p.dedupKey,
        bucket: p.bucket,
        seed: p.seed,
        shrunk: p.shrunk,
        message: p.msg,
        repro: p.repro,
        artifactDir,
        appBuild: t.appBuild,
        signature: p.signature,
      });
      this.result.newFailures++;
      this.result.newFailureIds.push(failureId);
      if (p.shrunk) this.result.newDistinct++;
    }
    this.result.finds++;
    if (!p.shrunk) this.result.unshrunk++;
    this.store.addFailureSeed(failureId, p.seed, t.chunkId);
  }

  /** Counts quarantined tests and keeps up to QUARANTINE_SAMPLES of them per generation. */
  private ingestQuarantine(q: PinnedDir): void {
    const entries = q.list().sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const files = entries.filter((e) => e.kind === "file").map((e) => e.name);
    this.result.quarantine = files.length;
    this.result.quarantineReasons = recordQuarantineReasons(this.store, this.t.chunkId, q, files);
    const odd = entries.filter((e) => e.kind === "symlink" || e.kind === "special").map((e) => ({ name: e.name, detail: q.refusal(e.name).detail }));
    if (odd.length > 0) {
      // One note for them all: a generator that writes links writes many.
      const note = odd.map((o) => `${q.shownEntry(o.name)}: ${o.detail}\n`).join("");
      let keptAt: string | null = null;
      for (const o of odd) this.malformed(q.shownEntry(o.name), o.detail, () => (keptAt ??= this.keepNote(`${this.unitName()}-quarantine`, note)));
    }
    if (files.length === 0) return;
    const samples = this.hold(this.campaignDir("quarantine").makeDir(this.t.genHash.slice(0, 12)));
    let held = samples.list().length;
    for (const name of files) {
      if (held >= QUARANTINE_SAMPLES) break;
      if (samples.lstat(name) !== null) continue;
      const st = q.lstat(name);
      if (!st?.isFile()) continue;
      try {
        placeFile(q, scannedFile(name, st), samples, name);
      } catch (err) {
        // Replaced since it was listed: counted, not kept as a sample.
        if (err instanceof FileProblem) continue;
        throw err;
      }
      held++;
    }
  }

  /** Records a malformed entry; `keep` keeps it (a FileProblem while keeping falls back to a note). */
  private malformed(entry: string, reason: string, keep: () => string): void {
    let keptAt: string;
    try {
      keptAt = keep();
    } catch (err) {
      if (!(err instanceof FileProblem)) throw err;
      keptAt = this.keepNote(this.label(entry.split(sep).pop() ?? "entry"), `${entry}: ${reason}\n(${err.message})\n`);
    }
    this.result.malformed.push({ entry, reason, keptAt });
  }

  private keepTree(name: string, entry: PinnedDir, nodes: readonly TreeNode[]): string {
    const placed = placeTree(entry, nodes, this.malformedDir(), numbered(this.label(name), ""));
    return join(this.t.outDir, "malformed", placed);
  }

  private keepNote(label: string, text: string): string {
    return join(this.t.outDir, "malformed", placeNote(this.malformedDir(), numbered(label, ".txt"), text));
  }

  /** `chunk-<id>-<entry name>`, the entry name shortened and hashed when it is long or odd. */
  private label(name: string): string {
    const plain = Buffer.byteLength(name) <= 100 && !/[\0-\x1f\x7f]/.test(name);
    const part = plain ? name : `${name.replace(/[^\w.-]/g, "_").slice(0, 40)}-${createHash("sha256").update(name).digest("hex").slice(0, 12)}`;
    return `${this.unitName()}-${part}`;
  }

  /** `chunk-<id>`, or `minimize-<id>` for a minimize unit: the prefix of the notes kept under malformed/. */
  private unitName(): string {
    return `${this.t.minimize ? "minimize" : "chunk"}-${this.t.chunkId}`;
  }

  private failuresDir(): PinnedDir {
    return (this.failuresDest ??= this.hold(this.campaignDir("failures")));
  }

  private malformedDir(): PinnedDir {
    return (this.malformedDest ??= this.hold(this.campaignDir("malformed")));
  }

  /** A directory of the campaign (checked before anything was recorded; a symlink now means it is being tampered with). */
  private campaignDir(name: string): PinnedDir {
    try {
      return this.out.makeDir(name);
    } catch (err) {
      if (err instanceof FileProblem) throw new RuntimeFailure(`the campaign directory ${err.message}; restore it as a real directory`, { cause: err });
      throw err;
    }
  }
}
