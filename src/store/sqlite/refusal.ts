// SQLite's result codes in the port's words (port.ts, RefusalCode): the one place that knows
// which SQLITE_* code means the store refused a write, and which of those is not worth a retry.
import type { StoreRefusal, RefusalCode } from "../port.ts";
import { sqliteCode } from "../db.ts";

/** The refusal a SQLite error stands for, or null for any other error (a constraint, a bug). */
export function sqliteRefusal(err: unknown): StoreRefusal | null {
  const detail = sqliteCode(err);
  if (detail === null) return null;
  const code = refusalCode(detail);
  return code === null ? null : { code, detail };
}

function refusalCode(code: string): RefusalCode | null {
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) return "busy";
  if (code === "SQLITE_FULL") return "full";
  if (code.startsWith("SQLITE_READONLY")) return "readonly";
  if (code.startsWith("SQLITE_IOERR") || code.startsWith("SQLITE_CANTOPEN") || code === "SQLITE_PROTOCOL" || code === "SQLITE_NOMEM") return "io";
  if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB") return "corrupt";
  return null;
}
