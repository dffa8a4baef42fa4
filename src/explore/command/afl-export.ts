// Export of new corpus inputs into an AFL++ sync directory (`explore --afl-sync DIR`), so that
// discoveries flow both ways: AFL++'s queues come in through -i, and what the campaign found goes
// out as DIR/fuzzfleet/queue/id:NNNNNN,src:fuzzfleet,sha256:<hash>, the layout of one more
// instance under AFL's -o directory. An AFL++ main instance (-M) syncs from every instance
// directory there, reading the ids above the last one it took.
//
// Every corpus object that did not come from the input directories is exported once: its bytes
// are copied (and checked against its name) into DIR/fuzzfleet/.incoming/, then renamed into
// queue/ with the next id, so AFL never reads a half-written file. Ids and hashes already in queue/
// (an earlier campaign's export) are read back at the start: nothing is exported twice, ids only
// grow. Nothing is followed through a symlink: DIR/fuzzfleet and its two directories must be real
// directories.
import { lstatSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { HEX64 } from "../../core/message-checks.ts";
import { UsageError } from "../../errors.ts";
import { copyHashing, DEFAULT_BUDGETS, FileProblem } from "../state/corpus.ts";

/** The instance name fuzzfleet takes in the sync directory. */
export const AFL_INSTANCE = "fuzzfleet";
const EXPORTED = /^id:(\d{6,}),.*sha256:([0-9a-f]{64})(?:,|$)/;
const STEP_MS = 1000;

export interface AflExportOptions {
  syncDir: string;
  corpusDir: string;
  /** Content that came from the input directories (AFL's own queues): not sent back. */
  isExternal: (hash: string) => boolean;
  maxBytes?: number;
  log: (line: string) => void;
}

export class AflExport {
  readonly queue: string;
  private readonly incoming: string;
  private readonly exported = new Set<string>();
  private nextId = 0;
  private lastStep = -Infinity;
  /** Inputs exported by this campaign. */
  count = 0;

  constructor(private readonly o: AflExportOptions) {
    const instance = join(o.syncDir, AFL_INSTANCE);
    this.queue = join(instance, "queue");
    this.incoming = join(instance, ".incoming");
    mkdirSync(o.syncDir, { recursive: true });
    for (const dir of [o.syncDir, instance, this.queue, this.incoming]) {
      mkdirSync(dir, { recursive: true });
      const st = lstatSync(dir);
      if (!st.isDirectory()) {
        throw new UsageError(`--afl-sync: ${dir} is ${st.isSymbolicLink() ? "a symbolic link" : "not a directory"}; give a sync directory whose ${AFL_INSTANCE}/ is a plain directory (nothing is followed through a symlink)`);
      }
    }
    for (const name of readdirSync(this.queue)) {
      const m = EXPORTED.exec(name);
      if (!m) continue;
      this.nextId = Math.max(this.nextId, Number(m[1]) + 1);
      this.exported.add(m[2]!);
    }
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
      names = readdirSync(this.o.corpusDir);
    } catch (err) {
      this.o.log(`--afl-sync: cannot read the corpus ${this.o.corpusDir}: ${(err as Error).message}`);
      return 0;
    }
    let n = 0;
    for (const hash of names.sort()) {
      if (!HEX64.test(hash) || this.exported.has(hash) || this.o.isExternal(hash)) continue;
      if (this.exportOne(hash)) n++;
    }
    this.count += n;
    return n;
  }

  private exportOne(hash: string): boolean {
    const temp = join(this.incoming, hash);
    try {
      const copied = copyHashing(join(this.o.corpusDir, hash), temp, { maxBytes: this.o.maxBytes ?? DEFAULT_BUDGETS.maxInputBytes, durable: false, reuse: true });
      if (copied.hash !== hash) {
        rmSync(temp, { force: true });
        this.o.log(`--afl-sync: corpus object ${hash.slice(0, 12)} does not hold its name's bytes: not exported`);
        this.exported.add(hash);
        return false;
      }
      const id = String(this.nextId).padStart(6, "0");
      renameSync(temp, join(this.queue, `id:${id},src:${AFL_INSTANCE},sha256:${hash}`));
      this.nextId++;
      this.exported.add(hash);
      return true;
    } catch (err) {
      rmSync(temp, { force: true });
      // A symlink or a special file named like a hash is never exported; anything else is retried.
      if (err instanceof FileProblem && ["symlink", "not-regular", "too-large"].includes(err.problem)) this.exported.add(hash);
      else this.o.log(`--afl-sync: could not export ${hash.slice(0, 12)}: ${(err as Error).message}`);
      return false;
    }
  }
}
