// The lease table's store in memory: the deterministic simulation's store (test/explore/
// lease-world.ts), with the faults a disk has made explicit. A MemoryDisk stands for one machine's
// storage of a table, shared by every simulated process on it; each process opens its own
// MemoryStore over it:
//
//   visible   what every process reads: a write is there once put() returns (the kernel has it)
//   durable   what a power cut leaves: a write is copied there by a sync, which covers every
//             write made before it (as an fdatasync of a journal does)
//
// The durability policy is the other stores': a put the policy wants durable syncs at once, or at
// the end of the outermost span (a deferred span: at the caller's sync()); beforePublish syncs a
// record written since the last sync. Injected faults: the next `failWrites` puts or removes
// throw EIO and change nothing; the next `failSyncs` syncs throw EIO and leave everything
// unsynced. A process crash is dropping a store (what it had not synced stays visible); a power
// cut (MemoryDisk.powerCut) makes `visible` what `durable` holds.
import { recordProblem, type LeaseRecord } from "../../../core/lease-record.ts";
import type { ReadResult } from "../lease-files.ts";
import type { Durability, RecordStore, Span } from "./port.ts";

export class MemoryDisk {
  visible = new Map<string, LeaseRecord>();
  durable = new Map<string, LeaseRecord>();
  /** Ids written since the last sync of any store on this disk. */
  readonly unsynced = new Set<string>();
  failWrites = 0;
  failSyncs = 0;
  readonly stats = { puts: 0, syncs: 0 };

  /** A power cut: every process is gone, and only what was synced is left. */
  powerCut(): void {
    this.visible = new Map(this.durable);
    this.unsynced.clear();
  }

  /** Copies every write made so far to stable storage (unless a sync fault is due). */
  sync(): void {
    if (this.failSyncs > 0) {
      this.failSyncs--;
      throw eio("fdatasync");
    }
    for (const id of this.unsynced) {
      const rec = this.visible.get(id);
      if (rec === undefined) this.durable.delete(id);
      else this.durable.set(id, rec);
    }
    this.unsynced.clear();
    this.stats.syncs++;
  }

  /** Throws EIO when a write fault is due. */
  checkWrite(what: string): void {
    if (this.failWrites > 0) {
      this.failWrites--;
      throw eio(what);
    }
  }
}

export class MemoryStore implements RecordStore {
  private spans = 0;
  private syncWanted = false;

  constructor(
    protected readonly disk: MemoryDisk,
    readonly durability: Durability,
  ) {}

  mayHold(): boolean {
    return true;
  }

  prepare(): void {}

  /** One simulated process runs at a time, and a transition never yields: it is atomic already. */
  locked<T>(_id: string, fn: () => T): T {
    return fn();
  }

  read(id: string): ReadResult {
    const record = this.disk.visible.get(id);
    if (record === undefined) return { kind: "absent" };
    const problem = recordProblem(record, id);
    return problem === null ? { kind: "valid", record } : { kind: "invalid", reason: problem };
  }

  put(record: LeaseRecord, fence: boolean): void {
    this.disk.checkWrite("write");
    this.disk.visible.set(record.id, structuredClone(record));
    this.disk.unsynced.add(record.id);
    this.disk.stats.puts++;
    if (this.durability === "all" || fence) this.wantSync();
  }

  remove(id: string): void {
    this.disk.checkWrite("unlink");
    this.disk.visible.delete(id);
    this.disk.unsynced.add(id);
    this.wantSync();
  }

  enter(_span: Span): void {
    this.spans++;
  }

  leave(span: Span): void {
    this.spans--;
    if (this.spans > 0 || span === "deferred" || !this.syncWanted) return;
    this.sync();
  }

  beforePublish(id: string): void {
    if (this.disk.unsynced.has(id)) this.sync();
  }

  sync(): void {
    this.disk.sync();
    this.syncWanted = false;
  }

  async syncAsync(): Promise<void> {
    this.sync();
  }

  scan(): LeaseRecord[] {
    return [...this.disk.visible.values()];
  }

  where(id: string): string {
    return `memory record ${id}`;
  }

  close(): void {}

  private wantSync(): void {
    if (this.spans > 0) this.syncWanted = true;
    else this.sync();
  }
}

function eio(what: string): Error {
  return Object.assign(new Error(`EIO: i/o error, ${what} (injected)`), { code: "EIO" });
}
