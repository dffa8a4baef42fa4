// The SQLite adapter of the sweep store port: open a campaign's store as a SweepStore (readers,
// one-off writers) or as a session's SessionStore, or take one over a connection opened
// elsewhere. What the commands (cli/, and the sweep commands' sessions in sweep/) import; the
// engine, the generator contract and the reports see only ../port.ts.
import { openStore, type Db, type OpenOptions } from "../db.ts";
import type { SessionStore, SweepStore } from "../port.ts";
import { SqliteSessionStore } from "./session-store.ts";
import { SqliteSweepStore } from "./sweep-store.ts";

export type { JournalChoice, OpenOptions } from "../db.ts";

/** Opens (for writers: creates and migrates) the store at `path`; close() closes it. */
export function openSweepStore(path: string, options: OpenOptions = {}): SweepStore {
  return new SqliteSweepStore(openStore(path, options), true);
}

/**
 * Opens (creates, migrates) the store at `path` for a sweep session, its one writer; `log` hears
 * what the deferred durability has to say. close() closes it.
 */
export function openSessionStore(path: string, options: Omit<OpenOptions, "readonly"> & { log: (line: string) => void }): SessionStore {
  const { log, ...open } = options;
  return new SqliteSessionStore(openStore(path, open), path, log);
}

const wrapped = new WeakMap<Db, SweepStore>();

/** The port over a connection its opener keeps (and closes): one SweepStore per connection. */
export function sqliteSweepStore(db: Db): SweepStore {
  let store = wrapped.get(db);
  if (!store) wrapped.set(db, (store = new SqliteSweepStore(db, false)));
  return store;
}
