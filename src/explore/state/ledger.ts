// What earlier campaigns on a corpus already did, so the next campaign runs only new content:
//
//   <corpus>/.fuzzfleet/explored/<epoch>-r<rank>.log   the explored ledger: one content hash per
//                                                       line, appended by that master as it
//                                                       completes each task
//   <corpus>/.fuzzfleet/work-<epoch>/preexisting       the corpus objects there before the
//                                                       campaign started (written once per epoch)
//
// The ledger outlives the campaign's work directory. A campaign reads every master's ledger of
// every other epoch (its own epoch's tasks are in its lease table) and skips content listed there;
// `--fresh` runs everything again. Durability follows the lease records: a line lost to a machine
// crash changes no outcome (that content is only run again by the next campaign), so lines are
// fsynced only with `--sync all`. A torn last line does not read as a hash and is ignored.
// The baseline tells this campaign's new inputs from the ones the corpus held already.
import { closeSync, constants, fsyncSync, linkSync, openSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { HEX64 } from "../../core/message-checks.ts";
import { PinnedDir } from "../../files/pinned-dir.ts";
import { randomHex } from "../../util/random-hex.ts";
import { fsyncDir, mkdirDurable, replaceFileSynced, writeFully } from "./durable.ts";

const LEDGER_NAME = /^([0-9a-f]{64})-r(\d{1,4})\.log$/;
/** A ledger or baseline file larger than this is refused (about 4 million hashes). */
const MAX_LIST_BYTES = 256 * 1024 * 1024;

export function ledgerDir(stateDir: string): string {
  return join(stateDir, "explored");
}

export class ExploredLedger {
  private fd: number | null = null;
  readonly path: string;

  constructor(
    readonly dir: string,
    private readonly epoch: string,
    rank: number,
    private readonly sync: boolean,
  ) {
    this.path = join(dir, `${epoch}-r${rank}.log`);
  }

  /** The content every other epoch's masters completed. Unreadable or odd files are passed over. */
  loadEarlier(): Set<string> {
    const seen = new Set<string>();
    let pin: PinnedDir;
    try {
      pin = PinnedDir.openNoFollow(this.dir);
    } catch {
      return seen;
    }
    try {
      for (const e of pin.list()) {
        const m = LEDGER_NAME.exec(e.name);
        if (!m || m[1] === this.epoch || e.kind !== "file") continue;
        for (const h of readHashes(pin, e.name)) seen.add(h);
      }
    } finally {
      pin.close();
    }
    return seen;
  }

  /** Appends `hash` (a completed task) to this master's ledger. */
  add(hash: string): void {
    if (this.fd === null) {
      mkdirDurable(this.dir);
      this.fd = openSync(this.path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
      if (this.sync) fsyncDir(this.dir);
    }
    writeFully(this.fd, Buffer.from(hash + "\n"));
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
