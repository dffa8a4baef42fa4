// The stores and the randomness of the lease-table simulation (lease-world.ts): a seeded
// generator, where real stores live, the fault-injecting shared files, and the deliberately
// broken stores in memory that the simulation must catch.
import { accessSync, constants, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { MemoryStore } from "../../src/explore/state/lease-store/memory.ts";
import type { ReadResult } from "../../src/explore/state/lease-store/port.ts";
import { SharedFilesStore } from "../../src/explore/state/lease-store/shared-files.ts";
import type { LeaseRecord } from "../../src/explore/state/lease-table.ts";

/** mulberry32: a small seeded generator, enough to schedule. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Where real stores live: a RAM file system when there is one (the simulation checks logic, not power cuts of a disk). */
export function simulationRoot(): string {
  try {
    if (statSync("/dev/shm").isDirectory()) {
      accessSync("/dev/shm", constants.W_OK);
      return "/dev/shm";
    }
  } catch {
    // No /dev/shm here: the disk it is.
  }
  return tmpdir();
}

/** Each master reads its own cached copy: the bug of a store without one view of the records. */
export class StaleCacheStore extends MemoryStore {
  private readonly cache = new Map<string, ReadResult>();
  override read(id: string): ReadResult {
    let r = this.cache.get(id);
    if (r === undefined) {
      r = super.read(id);
      this.cache.set(id, r);
    }
    return r;
  }
  override put(record: LeaseRecord, fence: boolean): void {
    super.put(record, fence);
    this.cache.set(record.id, { kind: "valid", record });
  }
}

/** Commit fences written like any other record and never synced before a publication. */
export class UnsyncedFenceStore extends MemoryStore {
  override put(record: LeaseRecord, _fence: boolean): void {
    super.put(record, false);
  }
  override beforePublish(): void {}
}

/** Shared record files whose directory fsyncs fail while `failSyncs` counts down. */
export class FaultyFiles extends SharedFilesStore {
  failSyncs = 0;
  protected override syncDir(dir: string): void {
    if (this.failSyncs > 0) {
      this.failSyncs--;
      throw Object.assign(new Error(`fsync ${dir}: EIO (injected)`), { code: "EIO" });
    }
    super.syncDir(dir);
  }
}
