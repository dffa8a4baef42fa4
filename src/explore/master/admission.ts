// Admission of external inputs: every input directory is scanned, each new or changed regular
// file is published into the content-addressed corpus and handed to the master to claim. A large
// directory is admitted a batch at a time (the backlog), so the first tasks run meanwhile. Several
// input directories (`-i a -i b`: the queues of several AFL++ instances) are each scanned in turn;
// a file is known by its directory and its name.
//
// Each input directory is the one the campaign started with: its identity is checked on every
// scan and a replaced directory is not read; entries are read below a pin, so a name replaced by
// a symlink since the listing is refused, never followed, and counted (symlinked inputs apart). With
// several owners an input is hashed first and only its owner publishes it; the others only
// remember they saw it.
//
// A file is admitted only once it stopped changing: a producer such as AFL++ creates a queue file
// and writes it afterwards, and the empty or half-written file must not run as an input. A file
// whose mtime is older than SETTLE_MS when it is listed is admitted at once (a static seed
// directory); any other file, the empty one always, waits until two listings at least SETTLE_MS
// apart (the monotonic clock) found the same size, mtime and inode. A file still settling is work
// in sight: the master is not idle while one waits (ExploreMaster.idle), so no campaign ends and
// no quiescence vote passes before it is admitted, and no scan ever blocks the loop to wait.
//
// Listing a directory of thousands of files costs an lstat each, every second. A directory whose
// own mtime and ctime are what they were at the last listing has the same names (a name added,
// removed or renamed changes them), so it is not listed again while nothing in it settles, for
// at most RELIST_MS: a file rewritten in place under an admitted name is found by that listing.
// A listing is trusted this way only when the directory had not changed for SETTLE_MS before it:
// a name added within the same tick of the file system's clock leaves the mtime as it was.
import type { Budgets } from "../defaults.ts";
import { PinnedDir, type DirIdentity, type EntryKind } from "../../files/pinned-dir.ts";
import { FileProblem, IntegrityError, listRegularFiles, publishFile } from "../state/corpus.ts";
import { hashFile, type FileIdentity } from "../state/stable-read.ts";

/** How long a file must stay the same (or be old already) before it is admitted. */
export const SETTLE_MS = 500;
/** An unchanged input directory is listed again at least this often (a file rewritten in place). */
export const RELIST_MS = 10_000;

export interface AdmissionOptions {
  /** One input directory, or several (each admitted, none dropped). */
  inputDir: string | readonly string[];
  corpusDir: string;
  budgets: Budgets;
  /** Every hash is this master's (broadcast ownership, or a single master): no hashing first. */
  everyoneOwns: boolean;
  owns: (hash: string) => boolean;
  /** The input was published into the corpus: claim it. Returns whether it was claimed. */
  admit: (hash: string) => boolean;
  /**
   * Counted here: refused entries and directory replacements, late inputs, and the symbolic links
   * among the refused entries (the field is added when the first one is seen).
   */
  counters: { refusedInputs: number; lateInputs: number; symlinkedInputs: number };
  log: (line: string) => void;
  problem: (message: string) => void;
  integrity: (message: string) => void;
  /** The settle time (SETTLE_MS unless set). */
  settleMs?: number;
  /** The monotonic clock of the settle rule, in ms (performance.now unless set). */
  now?: () => number;
  /** The wall clock that file mtimes are compared with, in ms (Date.now unless set). */
  wallNow?: () => number;
}

/** One input directory and what admission remembers of it. */
class InputSource {
  /** Name -> identity of the file as last admitted (or skipped for good). */
  readonly seen = new Map<string, string>();
  /** The directory as the first scan found it: a later scan reads only that very directory. */
  identity: DirIdentity | null = null;
  replaced = false;
  /** Names refused (symlinks, special files) and already reported. */
  readonly refusedNames = new Set<string>();
  /** Name -> the identity a listing found and when (monotonic ms), for files still settling. */
  readonly settling = new Map<string, { key: string; since: number }>();
  /** The directory's stamp at a listing that may stand for the next ones, and when (monotonic ms). */
  listed: { stamp: string; at: number } | null = null;

  constructor(readonly path: string) {}
}

type Listed = { source: InputSource; name: string; identity: FileIdentity };

export class InputAdmission {
  /** Content hashes seen in the input directories. */
  readonly external = new Set<string>();
  private readonly sources: InputSource[];
  /** Listed input files still to be admitted, from backlogNext on. */
  private backlog: Listed[] = [];
  private backlogNext = 0;

  constructor(private readonly o: AdmissionOptions) {
    const dirs = typeof o.inputDir === "string" ? [o.inputDir] : o.inputDir;
    this.sources = dirs.map((d) => new InputSource(d));
  }

  /** Input files listed and not yet looked at. */
  get backlogCount(): number {
    return this.backlog.length - this.backlogNext;
  }

  /** Input files seen changing (or fresh, or empty) and not admitted until they stay the same. */
  get settlingCount(): number {
    let n = 0;
    for (const source of this.sources) n += source.settling.size;
    return n;
  }

  private get settleMs(): number {
    return this.o.settleMs ?? SETTLE_MS;
  }

  private wallNow(): number {
    return (this.o.wallNow ?? Date.now)();
  }

  private now(): number {
    return (this.o.now ?? performance.now.bind(performance))();
  }

  /**
   * New or changed regular files are published and, if owned, claimed; at most `limit` of them
   * per call, the rest wait in the backlog for the next calls. The directories are listed again
   * once the backlog is empty, and always with no limit, which admits everything there is. Only
   * files that stopped changing enter the backlog (the settle rule above); the others are looked
   * at again by the next listing.
   */
  scan(limit: number): number {
    const pins = new Map<InputSource, PinnedDir>();
    try {
      for (const source of this.sources) {
        const dir = this.openInputDir(source);
        if (dir !== null) pins.set(source, dir);
      }
      if (this.backlog.length === 0 || limit === Number.POSITIVE_INFINITY) {
        this.backlog = [];
        this.backlogNext = 0;
        for (const [source, dir] of pins) {
          const now = this.now();
          const stamp = dirStamp(dir);
          if (limit !== Number.POSITIVE_INFINITY && source.settling.size === 0 && source.listed?.stamp === stamp.key && now - source.listed.at < RELIST_MS) continue;
          let files: ReturnType<typeof listRegularFiles>;
          try {
            files = this.listInputs(source, dir);
          } catch (err) {
            source.listed = null;
            this.o.problem(`cannot read the input directory ${source.path}: ${(err as Error).message}`);
            continue;
          }
          const quiet = this.wallNow() - stamp.changedMs >= this.settleMs;
          source.listed = quiet ? { stamp: stamp.key, at: now } : null;
          this.sift(source, files, now);
        }
      }
      let added = 0;
      const stop = Math.min(this.backlog.length, this.backlogNext + limit);
      while (this.backlogNext < stop) {
        const item = this.backlog[this.backlogNext++];
        const dir = pins.get(item.source);
        // A directory that was replaced since the listing is not read (it was reported).
        if (dir !== undefined && this.admitInput(dir, item)) added++;
      }
      if (this.backlogNext >= this.backlog.length) {
        this.backlog = [];
        this.backlogNext = 0;
      }
      return added;
    } finally {
      for (const dir of pins.values()) dir.close();
    }
  }

  /**
   * The listed files that are new or changed go to the backlog once settled; the others wait in
   * `settling`. Names gone from the directory are forgotten there.
   */
  private sift(source: InputSource, files: ReturnType<typeof listRegularFiles>, now: number): void {
    const listed = new Set<string>();
    for (const f of files) {
      listed.add(f.name);
      const key = identityKey(f.identity);
      if (source.seen.get(f.name) === key) source.settling.delete(f.name);
      else if (this.settled(source, f.name, f.identity, key, now)) this.backlog.push({ source, ...f });
    }
    if (source.settling.size > 0) for (const name of source.settling.keys()) if (!listed.has(name)) source.settling.delete(name);
  }

  /**
   * Whether a file found with this identity stopped changing: it is non-empty and its mtime is
   * older than the settle time, or an earlier look found the very same identity at least the
   * settle time ago. Otherwise the look is remembered (a changed identity starts anew).
   */
  private settled(source: InputSource, name: string, identity: FileIdentity, key: string, now: number): boolean {
    const before = source.settling.get(name);
    if (before?.key === key) {
      if (now - before.since < this.settleMs) return false;
    } else if (identity.size === 0 || this.wallNow() - identity.mtimeMs < this.settleMs) {
      source.settling.set(name, { key, since: now });
      return false;
    }
    source.settling.delete(name);
    return true;
  }

  /**
   * Input files this master owns but never admitted (discovery was frozen, or a file was still
   * changing when the campaign ended): left for the next campaign.
   */
  countLate(): number {
    let late = 0;
    for (const source of this.sources) {
      const dir = this.openInputDir(source);
      if (dir === null) continue;
      try {
        for (const f of listRegularFiles(dir)) {
          if (source.seen.get(f.name) === identityKey(f.identity)) continue;
          try {
            if (this.o.owns(hashFile(dir.entry(f.name), this.o.budgets.maxInputBytes).hash)) late++;
          } catch {
            // Unreadable now: it will be looked at by the next campaign anyway.
          }
        }
      } catch {
        // Unlistable now: the next campaign looks at it anyway.
      } finally {
        dir.close();
      }
    }
    this.o.counters.lateInputs = late;
    return late;
  }

  /**
   * The input directory, pinned, if it is still the directory the first scan found (whatever
   * its path now leads to); null, reported once, while it is another one.
   */
  private openInputDir(source: InputSource): PinnedDir | null {
    let dir: PinnedDir;
    try {
      dir = PinnedDir.open(source.path);
    } catch (err) {
      this.o.problem(`cannot read the input directory ${source.path}: ${(err as Error).message}`);
      return null;
    }
    const now = dir.identity();
    source.identity ??= now;
    if (now.dev === source.identity.dev && now.ino === source.identity.ino) {
      source.replaced = false;
      return dir;
    }
    dir.close();
    if (!source.replaced) {
      source.replaced = true;
      this.o.counters.refusedInputs++;
      this.o.problem(
        `the input directory ${source.path} was replaced since the campaign started (it now leads to another directory); nothing is read from it until the original is back: restore it, or start a new campaign on the new directory`,
      );
    }
    return null;
  }

  /** Regular files of the input directory; a symlink or special file is reported once by name and never followed. */
  private listInputs(source: InputSource, dir: PinnedDir): ReturnType<typeof listRegularFiles> {
    const refusedNow = new Set<string>();
    const files = listRegularFiles(dir, (name, kind) => {
      refusedNow.add(name);
      if (source.refusedNames.has(name)) return;
      source.refusedNames.add(name);
      this.o.counters.refusedInputs++;
      if (kind === "symlink") this.o.counters.symlinkedInputs++;
      this.o.log(`input ${name} is ${refusedKind(kind)}: refused, never followed; put the file itself into ${source.path}`);
    });
    // A name that is no longer refused is reported again if it turns into a symlink once more.
    for (const name of source.refusedNames) if (!refusedNow.has(name)) source.refusedNames.delete(name);
    return files;
  }

  /** One listed file that its source's `seen` did not know in this form (the listing filtered it). */
  private admitInput(dir: PinnedDir, f: Listed): boolean {
    const { source } = f;
    const key = identityKey(f.identity);
    // Read below the pin: a name replaced by a symlink since the listing is refused, not followed.
    const path = dir.entry(f.name);
    // With several owners an input is hashed first: only its owner publishes and admits it.
    if (!this.o.everyoneOwns) {
      let hash: string;
      try {
        hash = hashFile(path, this.o.budgets.maxInputBytes).hash;
      } catch (err) {
        this.unreadableInput(source, f.name, key, err);
        return false;
      }
      this.external.add(hash);
      if (!this.o.owns(hash)) {
        // Another master admits it; this one only remembers that it saw it.
        source.seen.set(f.name, key);
        return false;
      }
    }
    let published: { hash: string };
    try {
      // Not fsynced: the input directory stays the source, and a rescan republishes a lost copy.
      published = publishFile(this.o.corpusDir, path, { maxBytes: this.o.budgets.maxInputBytes, durable: false });
    } catch (err) {
      if (err instanceof IntegrityError) {
        this.o.integrity(err.message);
        source.seen.set(f.name, key);
      } else {
        this.unreadableInput(source, f.name, key, err);
      }
      return false;
    }
    source.seen.set(f.name, key);
    this.external.add(published.hash);
    return this.o.admit(published.hash);
  }

  private unreadableInput(source: InputSource, name: string, key: string, err: unknown): void {
    if (err instanceof FileProblem && err.problem === "too-large") {
      this.o.log(`input ${name} is larger than the input budget (${err.observed} > ${err.limit} bytes): skipped`);
      source.seen.set(name, key);
    }
    // Unreadable or changing while read: not remembered, so the next scan retries it.
  }
}

function refusedKind(kind: Exclude<EntryKind, "file" | "directory">): string {
  return kind === "symlink" ? "a symbolic link" : "not a regular file (a FIFO, socket or device)";
}

function identityKey(i: FileIdentity): string {
  return `${i.dev}:${i.ino}:${i.size}:${i.mtimeMs}:${i.ctimeMs}`;
}

/** What a listing of `dir` is valid for (its mtime, ctime and size), and when a name in it last changed (its mtime, wall-clock ms). */
function dirStamp(dir: PinnedDir): { key: string; changedMs: number } {
  const st = dir.stats();
  return { key: `${st.mtimeNs}:${st.ctimeNs}:${st.size}`, changedMs: Number(st.mtimeNs / 1_000_000n) };
}
