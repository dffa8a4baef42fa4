// The SQLite adapter of the sweep store port: open a campaign's store as a SweepStore, or take
// one over a connection opened elsewhere. What the composition roots (the commands) import; the
// domain sees only ../port.ts.
import Database from "better-sqlite3";
import { openStore, type Db, type OpenOptions } from "../db.ts";
import type { SweepStore } from "../port.ts";
import { SqliteSweepStore } from "./sweep-store.ts";

export type { JournalChoice, OpenOptions } from "../db.ts";

/** Opens (for writers: creates and migrates) the store at `path`; close() closes it. */
export function openSweepStore(path: string, options: OpenOptions = {}): SweepStore {
  return new SqliteSweepStore(openStore(path, options), true);
}

const wrapped = new WeakMap<Db, SweepStore>();

/** The port over a connection its opener keeps (and closes): one SweepStore per connection. */
export function sqliteSweepStore(db: Db): SweepStore {
  let store = wrapped.get(db);
  if (!store) wrapped.set(db, (store = new SqliteSweepStore(db, false)));
  return store;
}

/**
 * What the sweep session drivers (src/sweep/) hand to the engine, the commit queue and the
 * reports: still their SQLite connection, or a SweepStore. Goes once they hand out a SweepStore.
 */
export type StoreHandle = SweepStore | Db;

export function sweepStoreOf(handle: StoreHandle): SweepStore {
  return handle instanceof Database ? sqliteSweepStore(handle) : handle;
}
