// What earlier campaigns on a corpus already did, so the next campaign runs only new content:
//
//   <corpus>/.fuzzfleet/explored/<epoch>-r<rank>.log   the explored ledger: one line per
//                                                       completed task, "<content hash> <build>",
//                                                       appended by that master as it completes it
//   <corpus>/.fuzzfleet/work-<epoch>/preexisting       the corpus objects there before the
//                                                       campaign started (written once per epoch)
//
// The ledger outlives the campaign's work directory. A campaign reads every master's ledger of
// every other epoch (its own epoch's tasks are in its lease table) and skips content listed there
// under the same target build (state/target-identity.ts): content an earlier campaign explored
// with another build runs again. A line of a ledger written before builds were recorded (a hash
// alone) names no build, which matches none: that content runs again too. `--fresh` runs
// everything again. Durability follows the lease records: a line lost to a machine
// crash changes no outcome (that content is only run again by the next campaign), so lines are
// fsynced only with `--sync all`. A torn last line does not read as a line and is ignored (one cut
// right after the hash reads as a line without a build: its content only runs again).
// The baseline tells this campaign's new inputs from the ones the corpus held already.
import { closeSync, constants, fsyncSync, linkSync, openSync, readSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { HEX64 } from "../../core/message-checks.ts";
import { PinnedDir } from "../../files/pinned-dir.ts";
import { randomHex } from "../../util/random-hex.ts";
import { fsyncDir, mkdirDurable, replaceFileSynced, writeFully } from "./durable.ts";

const LEDGER_NAME = /^([0-9a-f]{64})-r(\d{1,4})\.log$/;
/** A ledger line: the content hash, then the build that ran it (absent in ledgers older than builds). */
const LEDGER_LINE = /^([0-9a-f]{64})(?: ([0-9a-f]{12}))?$/;
/** How a line without a build is named in what is said about it. */
export const UNKNOWN_BUILD = "unknown";
/** A ledger or baseline file larger than this is refused (about 4 million hashes). */
const MAX_LIST_BYTES = 256 * 1024 * 1024;

export function ledgerDir(stateDir: string): string {
  return join(stateDir, "explored");
}

/** Content earlier campaigns on a corpus explored, by the build they explored it with. */
export interface EarlierExplored {
  /** Explored under this campaign's build: skipped (unless --fresh). */
  same: Set<string>;
  /** Explored only under other builds: run again. The build of one of its lines (UNKNOWN_BUILD for a line without one). */
  other: Map<string, string>;
  /** The build the last earlier campaign ran (its ledger's last line); null when there was none. */
  lastBuild: string | null;
}

/** Why earlier content runs again: the build the last campaign ran, this one's, and how many inputs. */
export interface TargetChange {
  /** UNKNOWN_BUILD when the ledger left predates builds. */
  from: string;
  to: string;
  /** Inputs earlier campaigns explored that `to` has not. */
  inputs: number;
}

/** What a campaign under `build` says about `earlier`; null when nothing explored earlier runs again. */
export function targetChange(earlier: EarlierExplored, build: string): TargetChange | null {
  if (earlier.other.size === 0) return null;
  // The last campaign ran this build too: the content left is an older build's.
  const from = earlier.lastBuild !== null && earlier.lastBuild !== build ? earlier.lastBuild : earlier.other.values().next().value!;
  return { from, to: build, inputs: earlier.other.size };
}

export class ExploredLedger {
  private fd: number | null = null;
  readonly path: string;

  constructor(
    readonly dir: string,
    private readonly epoch: string,
    rank: number,
    private readonly sync: boolean,
    /** The target build every line of this ledger names. */
    private readonly build: string,
  ) {
    this.path = join(dir, `${epoch}-r${rank}.log`);
  }

  /**
   * What every other epoch's masters completed, told apart by build: `same` is the content
   * explored under `build`, `other` the content explored only under other builds (or none
   * recorded). Unreadable or odd files are passed over.
   */
  loadEarlier(build: string): EarlierExplored {
    const same = new Set<string>();
    const seen = new Map<string, string>();
    let last: { mtimeMs: number; build: string } | null = null;
    let pin: PinnedDir;
    try {
      pin = PinnedDir.openNoFollow(this.dir);
    } catch {
      return { same, other: new Map(), lastBuild: null };
    }
    try {
      for (const e of pin.list()) {
        const m = LEDGER_NAME.exec(e.name);
        if (!m || m[1] === this.epoch || e.kind !== "file") continue;
        const read = readLedger(pin, e.name);
        for (const [hash, b] of read.lines) {
          if (b === build) same.add(hash);
          else seen.set(hash, b);
        }
        // The last campaign is the one whose ledger was written last; its last line names its build.
        if (read.last !== null && (last === null || read.mtimeMs > last.mtimeMs)) last = { mtimeMs: read.mtimeMs, build: read.last };
      }
    } finally {
      pin.close();
    }
    for (const h of same) seen.delete(h);
    return { same, other: seen, lastBuild: last?.build ?? null };
  }

  /** Appends `hash` (a task completed under `build`) to this master's ledger. */
  add(hash: string): void {
    if (this.fd === null) {
      mkdirDurable(this.dir);
      this.fd = openSync(this.path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
      if (this.sync) fsyncDir(this.dir);
    }
    writeFully(this.fd, Buffer.from(`${hash} ${this.build}\n`));
    if (this.sync) fsyncSync(this.fd);
  }

  close(): void {
    if (this.fd === null) return;
    try {
      fsyncSync(this.fd);
    } finally {
      closeSync(this.fd);
      this.fd = null;
    }
  }
}

/**
 * The corpus objects present before this epoch's campaign began: recorded by the first master of
 * the epoch (a resumed or joining master reads that record), so a campaign that continues on a
 * corpus never counts what was there as new.
 */
export function campaignBaseline(workDir: string, corpusNow: () => string[]): Set<string> {
  const path = join(workDir, "preexisting");
  mkdirDurable(workDir);
  const pin = PinnedDir.openNoFollow(workDir);
  try {
    if (pin.lstat("preexisting") === null) {
      // Written whole beside, then linked into place: the first master of the epoch wins.
      const temp = join(workDir, `.preexisting.${process.pid}.${randomHex(6)}.tmp`);
      replaceFileSynced(temp, corpusNow().map((h) => h + "\n").join(""));
      try {
        linkSync(temp, path);
        fsyncDir(workDir);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      } finally {
        unlinkSync(temp);
      }
    }
    return new Set(readHashes(pin, "preexisting"));
  } finally {
    pin.close();
  }
}

/** Complete lines of the ledger `name` in `pin` (either format: a hash alone, or a hash and its build); 0 when unreadable. */
export function ledgerLines(pin: PinnedDir, name: string): number {
  return readLedger(pin, name).lines.length;
}

/** How far a ledger was counted: its complete lines up to `offset`, and the line begun there. */
export interface LedgerTally {
  /** The file it was counted in (a replaced ledger is counted again from its start). */
  ino: number;
  lines: number;
  offset: number;
  /** Bytes of the line begun at `offset` (no newline yet), and whether its 65th byte is a space. */
  lineLength: number;
  spaceAt64: boolean;
}

const TALLY_CHUNK = 1024 * 1024;

/**
 * Counts the complete lines of the ledger `name` without parsing them, from where `from` left off
 * (a ledger only grows) in pieces of a mebibyte, so a ledger of a million lines costs a view
 * neither its 78 MB at once nor a regular expression per line. A line is 64 bytes (a hash alone)
 * or 77 (a hash, a space and its build) before its newline: a torn line, or one a torn line ran
 * into, is not counted, as ledgerLines() does not count it. null when unreadable.
 */
export function tallyLedger(pin: PinnedDir, name: string, from: LedgerTally | null = null): LedgerTally | null {
  let fd: number;
  let ino: number;
  try {
    const opened = pin.openFile(name, MAX_LIST_BYTES);
    fd = opened.fd;
    ino = opened.stats.ino;
  } catch {
    return null;
  }
  const t: LedgerTally = from && from.ino === ino ? { ...from } : { ino, lines: 0, offset: 0, lineLength: 0, spaceAt64: false };
  const buf = Buffer.allocUnsafe(TALLY_CHUNK);
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, t.offset);
      if (n === 0) return t;
      const chunk = buf.subarray(0, n);
      for (let start = 0; ; ) {
        const nl = chunk.indexOf(10, start);
        const end = nl === -1 ? n : nl;
        // The line's 65th byte, if it lies in this stretch, must be the space before the build.
        if (t.lineLength <= 64 && t.lineLength + (end - start) > 64) t.spaceAt64 = chunk[start + 64 - t.lineLength] === 32;
        t.lineLength += end - start;
        if (nl === -1) break;
        if (t.lineLength === 64 || (t.lineLength === 77 && t.spaceAt64)) t.lines++;
        t.lineLength = 0;
        t.spaceAt64 = false;
        start = nl + 1;
      }
      t.offset += n;
    }
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

function readLedger(pin: PinnedDir, name: string): { lines: [string, string][]; last: string | null; mtimeMs: number } {
  const lines: [string, string][] = [];
  try {
    const { bytes, stats } = pin.readFile(name, MAX_LIST_BYTES);
    for (const l of bytes.toString("latin1").split("\n")) {
      const m = LEDGER_LINE.exec(l);
      if (m) lines.push([m[1]!, m[2] ?? UNKNOWN_BUILD]);
    }
    return { lines, last: lines.at(-1)?.[1] ?? null, mtimeMs: stats.mtimeMs };
  } catch {
    return { lines, last: null, mtimeMs: 0 };
  }
}

function readHashes(pin: PinnedDir, name: string): string[] {
  try {
    return pin
      .readFile(name, MAX_LIST_BYTES)
      .bytes.toString("latin1")
      .split("\n")
      .filter((l) => HEX64.test(l));
  } catch {
    return [];
  }
}
