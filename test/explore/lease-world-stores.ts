// The stores and the randomness of the lease-table simulation (lease-world.ts): a seeded
// generator, where real stores live, the fault-injecting shared files, the shared file system's
// client caches that partition records are read through, and the deliberately broken stores in
// memory that the simulation must catch.
import { accessSync, closeSync, constants, openSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { flockSync } from "fs-ext";
import { MemoryStore } from "../../src/explore/state/lease-store/memory.ts";
import { readPartitionFile } from "../../src/explore/state/lease-store/partition-lease.ts";
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

/**
 * The partition records as the clients of a shared file system read them (installed with
 * partition-lease.ts's setPartitionFileReader): each master is a client that keeps the last copy
 * of each record it read. A read made while the record's short lock is held revalidates (taking a
 * lock is a cache coherence point on NFS) and so does one older than `staleMs`; any other read —
 * a claim's, a renewal's, a takeover's look before it locks — may be answered from the client's
 * copy, an older record than the file holds (a `nocto` mount, an attribute cache up to `staleMs`
 * old), which the store cannot tell from a fresh read; now and then a client reads afresh anyway
 * (a cache entry dropped early), so that copies of every age are seen. Nothing is cached for
 * reads outside a client (`client` null): the simulation's own checks read the file itself.
 *
 * `staleCommitCheck` (a broken world) answers from the copy under the lock too while `commit` is
 * set: a write past `leased` that trusts a possibly stale read instead of reading under the lock.
 */
export class PartitionClients {
  /** The master reading now (the simulation runs one at a time), null for the simulation itself. */
  client: number | null = null;
  /** Whether the reader is passing a commit fence, completing or publishing. */
  commit = false;
  /** Reads answered with an older record than the file held. */
  staleAnswers = 0;
  private readonly copies = new Map<string, { text: string; at: number }>();

  constructor(
    private readonly staleMs: number,
    private readonly now: () => number,
    private readonly random: () => number,
    private readonly staleCommitCheck = false,
  ) {}

  readonly read = (path: string): string => {
    if (this.client === null) return readPartitionFile(path);
    const key = `${this.client}\0${path}`;
    const copy = this.copies.get(key);
    const revalidate = lockHeld(path.replace(/\.json$/, ".lock")) && !(this.staleCommitCheck && this.commit);
    if (!revalidate && copy !== undefined && this.now() - copy.at < this.staleMs && this.random() < 0.75) {
      if (copy.text !== fileText(path)) this.staleAnswers++;
      return copy.text;
    }
    const text = readPartitionFile(path);
    this.copies.set(key, { text, at: this.now() });
    return text;
  };

  /** Runs `fn` as master `n`'s reads (`commit`: a write past `leased`), then as before. */
  as<T>(n: number, fn: () => T, commit = false): T {
    const was = { client: this.client, commit: this.commit };
    this.client = n;
    this.commit = commit;
    try {
      return fn();
    } finally {
      this.client = was.client;
      this.commit = was.commit;
    }
  }
}

/** Whether someone holds the flock on `lockPath` (in the simulation: the master reading now). */
function lockHeld(lockPath: string): boolean {
  let fd: number;
  try {
    fd = openSync(lockPath, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
  try {
    flockSync(fd, "exnb");
    flockSync(fd, "un");
    return false;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EAGAIN" || code === "EWOULDBLOCK") return true;
    throw err;
  } finally {
    closeSync(fd);
  }
}

function fileText(path: string): string | null {
  try {
    return readPartitionFile(path);
  } catch {
    return null;
  }
}
