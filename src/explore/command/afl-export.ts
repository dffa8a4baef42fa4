// Export of new corpus inputs into an AFL++ sync directory (`explore --afl-sync DIR`), so that
// discoveries flow both ways: AFL++'s queues come in through -i, and what the campaign found goes
// out as DIR/fuzzfleet/queue/id:NNNNNN,src:fuzzfleet,sha256:<hash>, the layout of one more
// instance under AFL's -o directory. An AFL++ main instance (-M) syncs from every instance
// directory there, reading the ids above the last one it took.
//
// Every corpus object that did not come from the input directories is exported once: its bytes
// are copied (and checked against its name) into DIR/fuzzfleet/.incoming/, then linked into
// queue/ under the next id (never over an existing name), so AFL never reads a half-written file.
//
// Nothing is followed through a symlink, at any export: each export pins DIR, DIR/fuzzfleet and
// its two directories anew (opened without following a symlink, everything below reached through
// those descriptors), so a directory swapped for a symlink during the campaign stops the exports
// (said once, counted) and nothing is written where the link points. The ids in queue/ are read
// back at each export that has something to send: nothing is exported twice, ids only grow. An id
// is AFL's: `id:` and 6 to 10 digits, at most 2^32 − 1 (AFL++ keeps ids as 32-bit unsigned); an
// entry named `id:` with anything else is ignored and counted, never a number to continue from.
import { linkSync, mkdirSync, readdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { printable } from "../../core/log-lines.ts";
import { HEX64 } from "../../core/message-checks.ts";
import { UsageError } from "../../errors.ts";
import { PinnedDir } from "../../files/pinned-dir.ts";
import { copyHashing, DEFAULT_BUDGETS, FileProblem } from "../state/corpus.ts";

/** The instance name fuzzfleet takes in the sync directory. */
export const AFL_INSTANCE = "fuzzfleet";
/** The largest id AFL++ reads back (its ids are 32-bit unsigned). */
export const MAX_AFL_ID = 0xffff_ffff;
const STRICT_ID = /^id:(\d{6,10})(?:,|$)/;
const STEP_MS = 1000;
/** Ignored queue entries named one by one in the log; the rest are only counted. */
const NAMED_IGNORED = 3;

export interface AflExportOptions {
  syncDir: string;
  corpusDir: string;
  /** Content that came from the input directories (AFL's own queues): not sent back. */
  isExternal: (hash: string) => boolean;
  maxBytes?: number;
  log: (line: string) => void;
}

/** What a queue entry's name says: AFL's id and, for fuzzfleet's own exports, the content's hash. */
export function parseQueueName(name: string): { id: number; hash: string | null } | "not-an-id" | "malformed" {
  if (!name.startsWith("id:")) return "not-an-id";
  const m = STRICT_ID.exec(name);
  if (!m) return "malformed";
  const id = Number(m[1]);
  if (!Number.isSafeInteger(id) || id > MAX_AFL_ID) return "malformed";
  const field = name.split(",").find((f) => f.startsWith("sha256:"));
  const hash = field !== undefined && HEX64.test(field.slice(7)) ? field.slice(7) : null;
  return { id, hash };
}

interface Pins {
  queue: PinnedDir;
  incoming: PinnedDir;
  close(): void;
}

export class AflExport {
  readonly queue: string;
  private readonly exported = new Set<string>();
  /** Names in queue/ that start like an id and are none (each counted once). */
  private readonly ignored = new Set<string>();
  private nextId = 0;
  private lastStep = -Infinity;
  /** The refusal said last; cleared when the sync directory is usable again. */
  private problem: string | null = null;
  private lastRefusal = "";
  /** Inputs exported by this campaign. */
  count = 0;
  /** Exports that found the sync directory unusable (a symlink, a file) and wrote nothing. */
  refusedExports = 0;

  constructor(private readonly o: AflExportOptions) {
    this.queue = join(o.syncDir, AFL_INSTANCE, "queue");
    let pins: Pins;
    try {
      pins = this.pin(true);
    } catch (err) {
      if (!(err instanceof FileProblem)) throw err;
      throw new UsageError(`--afl-sync: ${err.message}; give a sync directory whose ${AFL_INSTANCE}/ is a plain directory`);
    }
    try {
      this.scanQueue(pins.queue);
    } finally {
      pins.close();
    }
  }

  /** Ignored entries of queue/ (named `id:` without an id AFL reads), each counted once. */
  get ignoredEntries(): number {
    return this.ignored.size;
  }

  /** The campaign's closing line about the export. */
  summary(): string {
    const parts = [`exported ${this.count} new input(s) to ${this.queue} (AFL++ syncs them as the instance '${AFL_INSTANCE}')`];
    if (this.ignored.size > 0) parts.push(`${this.ignored.size} queue entr${this.ignored.size === 1 ? "y" : "ies"} without a valid AFL id ignored`);
    if (this.refusedExports > 0) parts.push(`${this.refusedExports} export(s) refused, nothing written (last: ${this.lastRefusal})`);
    return parts.join("; ");
  }

  /** Exports what is new, at most once a second (the master loop calls it on every turn). */
  step(now: number): void {
    if (now - this.lastStep < STEP_MS) return;
    this.lastStep = now;
    this.flush();
  }

  /** Exports every corpus object not exported yet; returns how many. */
  flush(): number {
    let names: string[];
    try {
      names = readdirSync(this.o.corpusDir).filter((n) => HEX64.test(n));
    } catch (err) {
      this.o.log(`--afl-sync: cannot read the corpus ${this.o.corpusDir}: ${(err as Error).message}`);
      return 0;
    }
    const fresh = names.filter((h) => !this.exported.has(h) && !this.o.isExternal(h));
    if (fresh.length === 0) return 0;
    let pins: Pins;
    try {
      pins = this.pin(false);
    } catch (err) {
      if (!(err instanceof FileProblem)) throw err;
      this.refusedExports++;
      this.lastRefusal = err.message;
      if (err.message !== this.problem) {
        this.problem = err.message;
        this.o.log(`--afl-sync: ${err.message}; nothing is exported until it is a plain directory again`);
      }
      return 0;
    }
    let n = 0;
    try {
      if (this.problem !== null) {
        this.o.log(`--afl-sync: ${this.queue} is a plain directory again; exporting`);
        this.problem = null;
      }
      this.scanQueue(pins.queue);
      for (const hash of fresh.sort()) {
        if (this.exported.has(hash)) continue;
        if (this.nextId > MAX_AFL_ID) {
          this.o.log(`--afl-sync: ${this.queue} holds id ${MAX_AFL_ID}, the largest AFL++ reads; nothing more is exported`);
          break;
        }
        if (this.exportOne(pins, hash)) n++;
      }
    } finally {
      pins.close();
    }
    this.count += n;
    return n;
  }

  /** Pins DIR/fuzzfleet/{queue,.incoming}, each checked (and created when missing) without following a symlink. */
  private pin(atStart: boolean): Pins {
    // DIR itself is the user's path: created at the start when missing, never followed when it is a link.
    if (atStart) {
      try {
        mkdirSync(this.o.syncDir, { recursive: true });
      } catch (err) {
        // A dangling link stands there: the no-follow open below says so.
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
    }
    const top = PinnedDir.openNoFollow(this.o.syncDir);
    const held: PinnedDir[] = [top];
    const close = () => {
      for (const d of held) d.close();
    };
    try {
      const instance = top.makeDir(AFL_INSTANCE);
      held.push(instance);
      const queue = instance.makeDir("queue");
      held.push(queue);
      const incoming = instance.makeDir(".incoming");
      held.push(incoming);
      return { queue, incoming, close };
    } catch (err) {
      close();
      throw err;
    }
  }

  /** Reads the ids and hashes in queue/: the next id continues after the largest valid one. */
  private scanQueue(queue: PinnedDir): void {
    for (const { name } of queue.list()) {
      const parsed = parseQueueName(name);
      if (parsed === "not-an-id") continue;
      if (parsed === "malformed") {
        if (this.ignored.has(name)) continue;
        this.ignored.add(name);
        if (this.ignored.size <= NAMED_IGNORED) {
          this.o.log(`--afl-sync: ${printable(join(this.queue, name), { max: 300 })} has no AFL id (id: and 6 to 10 digits, at most ${MAX_AFL_ID}): ignored`);
        }
        continue;
      }
      this.nextId = Math.max(this.nextId, parsed.id + 1);
      if (parsed.hash !== null) this.exported.add(parsed.hash);
    }
  }

  private exportOne(pins: Pins, hash: string): boolean {
    // A leftover of a killed export (or anything planted under the name) goes first: the copy
    // creates the file anew, never writing through a link.
    const temp = pins.incoming.entry(hash);
    try {
      pins.incoming.remove(hash);
      const copied = copyHashing(join(this.o.corpusDir, hash), temp, { maxBytes: this.o.maxBytes ?? DEFAULT_BUDGETS.maxInputBytes, durable: false });
      if (copied.hash !== hash) {
        unlinkQuiet(temp);
        this.o.log(`--afl-sync: corpus object ${hash.slice(0, 12)} does not hold its name's bytes: not exported`);
        this.exported.add(hash);
        return false;
      }
      // A link never replaces a name: an id taken meanwhile (another writer) moves on to the next.
      for (;;) {
        const name = `id:${String(this.nextId).padStart(6, "0")},src:${AFL_INSTANCE},sha256:${hash}`;
        try {
          linkSync(temp, pins.queue.entry(name));
          break;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== "EEXIST" || this.nextId >= MAX_AFL_ID) throw err;
          this.nextId++;
        }
      }
      unlinkQuiet(temp);
      this.nextId++;
      this.exported.add(hash);
      return true;
    } catch (err) {
      unlinkQuiet(temp);
      // A symlink or a special file named like a hash is never exported; anything else is retried.
      if (err instanceof FileProblem && ["symlink", "not-regular", "too-large"].includes(err.problem)) this.exported.add(hash);
      else this.o.log(`--afl-sync: could not export ${hash.slice(0, 12)}: ${(err as Error).message}`);
      return false;
    }
  }
}

function unlinkQuiet(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Gone already.
  }
}
