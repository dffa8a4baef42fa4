// A sweep session's writer over SQLite (the port's SessionStore): opened at `synchronous = FULL`,
// so the session's opening writes are durable when they return; in WAL mode it then hands the
// durability of its commits to ../wal-sync.ts (an fsync of the WAL on the thread pool, and a
// checkpointer thread), and takes it back before the session's last writes. On a TRUNCATE journal
// (a network file system) every COMMIT stays durable by itself and nothing is deferred.
import { journalModeOf, OPEN_BUSY_MS, setBusyTimeout, type Db } from "../db.ts";
import type { SessionStore, StoreDurability } from "../port.ts";
import { WalSync } from "../wal-sync.ts";
import { SqliteSweepStore } from "./sweep-store.ts";

export class SqliteSessionStore extends SqliteSweepStore implements SessionStore {
  private deferred: { sync: WalSync | null } | null = null;

  /** `log`: where the checkpointer says, once, that it cannot copy the WAL. */
  constructor(
    db: Db,
    private readonly path: string,
    private readonly log: (line: string) => void,
  ) {
    super(db, true);
  }

  deferDurability(): StoreDurability | null {
    this.deferred ??= { sync: journalModeOf(this.db) === "wal" ? new WalSync(this.db, this.path, { log: this.log }) : null };
    return this.deferred.sync;
  }

  async settle(): Promise<void> {
    // The checkpointer ends first, so that this connection closes last and removes the WAL.
    await this.deferred?.sync?.close();
    this.db.pragma("synchronous = FULL");
    setBusyTimeout(this.db, OPEN_BUSY_MS);
  }
}
