// How a master learns of corpus objects it owns that other masters published (several masters,
// rendezvous ownership). The fleet says what it committed: a master that commits a child another
// rank owns appends its hash to that rank's hint file, and each rank reads only the new lines of
// its own file; a full listing of the corpus stays as the safety net (a hint lost to a crash
// between promotion and append, a file added by hand), taken on the first scan, on every
// refresh (the quiescence decision), and otherwise at most every FULL_RESCAN_MS — or less often
// when listing takes long, so that the listings never cost more than a fiftieth of the loop.
//
//   <work>/discovered/r<rank>      one 64-hex hash per line, appended by any master (O_APPEND)
//
// A hint is only a hint: the object is verified (verifyPublic) before it is claimed, a line that
// is not a hash is ignored, and the file is never followed through a symlink.
import { closeSync, constants, mkdirSync, openSync, readdirSync, readSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { HEX64 } from "../../core/message-checks.ts";
import { FileProblem, IntegrityError, verifyPublic } from "../state/corpus.ts";
import { writeFully } from "../state/durable.ts";

export const FULL_RESCAN_MS = 5000;
/** A full listing costs at most this share of the time between two of them. */
const LISTING_SHARE = 1 / 50;

export interface DiscoveryOptions {
  corpusDir: string;
  /** <work>/discovered: shared by every master of the campaign. */
  hintDir: string;
  rank: number;
  maxInputBytes: number;
  /** Corpus names already considered; ownership never changes, so each is looked at once. */
  observed: Set<string>;
  owns: (hash: string) => boolean;
  /** Claims an owned, verified object; true when it became a task. */
  claim: (hash: string) => boolean;
  integrity: (message: string) => void;
  problem: (message: string) => void;
}

export class CorpusDiscovery {
  readonly stats = { fullScans: 0, hintsRead: 0 };
  private lastFull = Number.NEGATIVE_INFINITY;
  private listingMs = 0;
  private inbox: number | null = null;
  private inboxOffset = 0;
  private partial = "";
  private readonly outboxes = new Map<number, number>();

  constructor(private readonly o: DiscoveryOptions) {}

  /** New owned objects: a full listing when `full` or when one is due, else the new hints. */
  scan(full = false): number {
    const now = performance.now();
    if (full || now - this.lastFull >= Math.max(FULL_RESCAN_MS, this.listingMs / LISTING_SHARE)) {
      // Hints up to here are covered by the listing.
      this.readHints();
      this.lastFull = now;
      const added = this.listAll();
      this.listingMs = performance.now() - now;
      return added;
    }
    let added = 0;
    for (const hash of this.readHints()) added += this.consider(hash) ? 1 : 0;
    return added;
  }

  /** Tells the owners of `children` (other ranks) that they are public now. */
  hint(children: readonly string[], ownerOf: (hash: string) => number): void {
    const byRank = new Map<number, string[]>();
    for (const h of children) {
      const r = ownerOf(h);
      if (r !== this.o.rank) byRank.set(r, [...(byRank.get(r) ?? []), h]);
    }
    for (const [rank, hashes] of byRank) {
      try {
        writeFully(this.outbox(rank), Buffer.from(hashes.map((h) => `${h}\n`).join(""), "utf8"));
      } catch (err) {
        // The owner's full listing finds them anyway.
        this.o.problem(`cannot hint rank ${rank} of ${hashes.length} new object(s): ${(err as Error).message}; its next full listing finds them`);
      }
    }
  }

  close(): void {
    for (const fd of this.outboxes.values()) closeSync(fd);
    this.outboxes.clear();
    if (this.inbox !== null) closeSync(this.inbox);
    this.inbox = null;
  }

  private listAll(): number {
    let names: string[];
    try {
      names = readdirSync(this.o.corpusDir);
    } catch (err) {
      this.o.problem(`cannot read the corpus directory ${this.o.corpusDir}: ${(err as Error).message}`);
      return 0;
    }
    this.stats.fullScans++;
    let added = 0;
    for (const hash of names) if (HEX64.test(hash) && this.consider(hash)) added++;
    return added;
  }

  private consider(hash: string): boolean {
    const { observed } = this.o;
    if (observed.has(hash)) return false;
    observed.add(hash);
    if (!this.o.owns(hash)) return false;
    try {
      verifyPublic(this.o.corpusDir, hash, this.o.maxInputBytes);
    } catch (err) {
      if (err instanceof IntegrityError) this.o.integrity(err.message);
      // A file that changed or could not be read is looked at again by the next listing; a
      // symlink or a directory named like a hash is never accepted.
      else if (!(err instanceof FileProblem) || !["symlink", "not-regular", "too-large"].includes(err.problem)) observed.delete(hash);
      return false;
    }
    return this.o.claim(hash);
  }

  /** The hashes appended to this rank's file since the last read. */
  private readHints(): string[] {
    const fd = this.inboxFd();
    if (fd === null) return [];
    const out: string[] = [];
    const buf = Buffer.alloc(64 * 1024);
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, this.inboxOffset);
      if (n === 0) break;
      this.inboxOffset += n;
      const lines = (this.partial + buf.toString("latin1", 0, n)).split("\n");
      this.partial = lines.pop() ?? "";
      for (const line of lines) if (HEX64.test(line)) out.push(line);
    }
    this.stats.hintsRead += out.length;
    return out;
  }

  private inboxFd(): number | null {
    if (this.inbox !== null) return this.inbox;
    try {
      this.inbox = this.openHints(this.o.rank, constants.O_RDONLY);
    } catch {
      return null;
    }
    return this.inbox;
  }

  private outbox(rank: number): number {
    let fd = this.outboxes.get(rank);
    if (fd === undefined) {
      fd = this.openHints(rank, constants.O_WRONLY | constants.O_APPEND);
      this.outboxes.set(rank, fd);
    }
    return fd;
  }

  private openHints(rank: number, flags: number): number {
    mkdirSync(this.o.hintDir, { recursive: true, mode: 0o700 });
    return openSync(join(this.o.hintDir, `r${rank}`), flags | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
  }
}
