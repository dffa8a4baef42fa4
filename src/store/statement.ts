// The SQLite connection's type and its two primitives every statement module uses: a statement
// compiled once per connection, and a unit of work that joins the caller's transaction. Apart from
// db.ts (which opens and migrates a store) so that the migrations and the aggregate builders can use
// them without importing the module that runs them.
import type Database from "better-sqlite3";

export type Db = Database.Database;

const statements = new WeakMap<Db, Map<string, Database.Statement>>();

/** A prepared statement, compiled once per connection. */
export function stmt(db: Db, sql: string): Database.Statement {
  let cache = statements.get(db);
  if (!cache) statements.set(db, (cache = new Map()));
  let s = cache.get(sql);
  if (!s) cache.set(sql, (s = db.prepare(sql)));
  return s;
}

/**
 * Runs `fn` atomically: in a transaction of its own, or simply inside the caller's when one is
 * open already (the caller's transaction, or its savepoint, then makes it atomic). Each nested
 * savepoint is two more statements, and statements are what a busy coordinator pays for.
 */
export function atomically<T>(db: Db, fn: () => T): T {
  return db.inTransaction ? fn() : db.transaction(fn)();
}

