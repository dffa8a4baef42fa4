// generation rows: one per version of the generator. The current generation is the newest row.
import { type Db, isoNow, stmt } from "./db.ts";
import { laneSeedsSwept } from "./lanes.ts";
import type { GenerationRow } from "./records.ts";
export type { GenerationRow } from "./records.ts";

export function currentGeneration(db: Db): GenerationRow | undefined {
  return stmt(db, "SELECT * FROM generation ORDER BY id DESC LIMIT 1").get() as GenerationRow | undefined;
}

export function insertGeneration(db: Db, genHash: string, note: string): number {
  const info = stmt(db, "INSERT INTO generation (gen_hash, created_at, note) VALUES (?, ?, ?)").run(genHash, isoNow(), note);
  return Number(info.lastInsertRowid);
}

/**
 * Ends a generation: its open failures become 'stale' (their seeds no longer mean the same tests)
 * and its lanes are retired. Returns how many failures went stale.
 */
export function closeGeneration(db: Db, generationId: number): number {
  const stale = stmt(db, "UPDATE failure SET state = 'stale' WHERE generation_id = ? AND state = 'open'").run(generationId);
  stmt(db, "UPDATE lane SET retired = 1 WHERE generation_id = ? AND retired = 0").run(generationId);
  return stale.changes;
}

/**
 * Starts a new generation, closing `previousId` first when there is one (its open failures go
 * stale, its lanes retire), in one transaction. Returns the new generation's id.
 */
export function startGeneration(db: Db, previousId: number | null, genHash: string, note: string): number {
  return db.transaction(() => {
    if (previousId !== null) closeGeneration(db, previousId);
    return insertGeneration(db, genHash, note);
  })();
}

/** Distinct seeds covered by complete chunks of every lane (retired or not) of a generation. */
export function seedsSwept(db: Db, generationId: number): number {
  const lanes = stmt(db, "SELECT id FROM lane WHERE generation_id = ?").all(generationId) as { id: number }[];
  return lanes.reduce((n, lane) => n + laneSeedsSwept(db, lane.id), 0);
}
