// Durability of a sweep writer's commits off the event loop, for a store in WAL mode.
//
// With `synchronous = FULL` every COMMIT fsyncs the WAL on the calling thread: 1.5–2.5 ms of a
// coordinator's event loop per group commit, during which no frame is read. Here the writer's
// connection runs with `synchronous = NORMAL` (a COMMIT appends its frames to the WAL and
// returns; the store stays consistent, but a power loss could roll the last commits back) and
// its CommitQueue makes each commit durable itself, before anything that depends on it happens:
// `sync()` fsyncs the WAL file on libuv's thread pool, and the queue settles the commit's handlers
// (the acks, the removals, the console lines) only once an fsync that started after the commit
// has returned. So what a worker is told, and what is removed, is on disk as it was with FULL;
// commits that arrive while an fsync runs share the next one.
//
// The WAL's frames are copied into the database file by a checkpoint. SQLite would run it on the
// writer's thread at a commit (fsyncs of both files); here automatic checkpoints are off on the
// writer's connection and a worker thread with its own connection (synchronous = FULL: the WAL
// is synced before the database file is written) runs a PASSIVE checkpoint twice a second, which
// never waits for the writer and lets the WAL start over from its beginning.
//
// On a network file system the store keeps the TRUNCATE journal with FULL; nothing here applies.
import { closeSync, constants, fsync, openSync } from "node:fs";
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { StoreError } from "../errors.ts";
import { journalModeOf, type Db } from "./db.ts";

/** How often the checkpointer copies the WAL into the database file. */
export const CHECKPOINT_EVERY_MS = 500;

// The checkpointer's whole program: plain JavaScript, evaluated in the worker thread, so that it
// loads the same way from the compiled package and from the sources.
const CHECKPOINTER = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true, timeout: 0 });
db.pragma("synchronous = FULL");
const tick = () => {
  try {
    db.pragma("wal_checkpoint(PASSIVE)");
  } catch (err) {
    // Busy or locked: the next tick tries again; anything else is said once.
    if (!/BUSY|LOCKED/.test(String(err && err.code))) parentPort.postMessage({ error: String(err && err.message) });
  }
};
const timer = setInterval(tick, workerData.everyMs);
parentPort.on("message", (m) => {
  if (m !== "stop") return;
  clearInterval(timer);
  tick();
  db.close();
  parentPort.close();
});
`;

export interface WalSyncOptions {
  /** Said once when the checkpointer cannot copy the WAL (the writer's own close still does). */
  log: (line: string) => void;
  everyMs?: number;
}

export class WalSync {
  private fd: number | null;
  private readonly checkpointer: Worker;
  private closing: Promise<void> | null = null;
  private inFlight = 0;
  private idle: (() => void) | null = null;

  /**
   * Switches `db` (a writer in WAL mode, already migrated) to deferred durability. Throws a
   * StoreError when the store is not in WAL mode or its WAL cannot be opened.
   */
  constructor(db: Db, private readonly path: string, o: WalSyncOptions) {
    const mode = journalModeOf(db);
    if (mode !== "wal") throw new StoreError(`the store ${path} is in ${mode} mode; deferred durability needs WAL`);
    // The WAL exists once a connection has read the store in WAL mode (the migration did).
    try {
      this.fd = openSync(`${path}-wal`, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (err) {
      throw new StoreError(`cannot open the store's WAL ${path}-wal: ${(err as Error).message}`, { cause: err });
    }
    db.pragma("wal_autocheckpoint = 0");
    db.pragma("synchronous = NORMAL");
    const driver = createRequire(import.meta.url).resolve("better-sqlite3");
    this.checkpointer = new Worker(CHECKPOINTER, { eval: true, workerData: { path, driver, everyMs: o.everyMs ?? CHECKPOINT_EVERY_MS } });
    let said = false;
    this.checkpointer.on("message", (m: { error?: string }) => {
      if (said || !m.error) return;
      said = true;
      o.log(`the store's checkpointer cannot copy ${path}-wal into the store (${m.error}); the WAL grows until the session ends`);
    });
    this.checkpointer.on("error", (err) => {
      if (said) return;
      said = true;
      o.log(`the store's checkpointer stopped (${err.message}); the WAL grows until the session ends`);
    });
    this.checkpointer.unref();
  }

  /** Resolves once every commit made before the call is on disk; rejects with a StoreError when the fsync fails. */
  sync(): Promise<void> {
    const fd = this.fd;
    if (fd === null) return Promise.reject(new StoreError(`the store ${this.path} is closed`));
    this.inFlight++;
    return new Promise((resolve, reject) => {
      fsync(fd, (err) => {
        if (--this.inFlight === 0) this.idle?.();
        if (err) reject(new StoreError(`cannot make the store ${this.path} durable (fsync of its WAL: ${err.code ?? err.message})`, { cause: err }));
        else resolve();
      });
    });
  }

  /** Stops the checkpointer (after one last checkpoint) and closes the WAL, once no fsync is in flight. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.inFlight > 0) await new Promise<void>((r) => (this.idle = r));
      if (this.fd !== null) closeSync(this.fd);
      this.fd = null;
      const ended = new Promise<void>((r) => this.checkpointer.once("exit", () => r()));
      this.checkpointer.ref(); // the session waits for its last checkpoint
      this.checkpointer.postMessage("stop");
      await Promise.race([ended, new Promise<void>((r) => setTimeout(r, 5_000).unref())]);
      await this.checkpointer.terminate();
    })();
    return this.closing;
  }
}
