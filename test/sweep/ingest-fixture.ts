// A real store and a campaign output directory for ingestChunk tests, generator output written by
// hand, and the whole failure tables to compare.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openStore, type Db } from "../../src/store/db.ts";
import type { SweepStore } from "../../src/store/port.ts";
import { sqliteSweepStore } from "../../src/store/sqlite/index.ts";
import { insertChunk } from "../../src/store/chunks.ts";
import { insertGeneration } from "../../src/store/generations.ts";
import { insertLane } from "../../src/store/lanes.ts";
import { insertSession } from "../../src/store/sessions.ts";
import type { IngestTarget } from "../../src/sweep/generator/ingest.ts";

export { snapshot } from "../helpers/tree-snapshot.ts";

export const GEN_HASH = "ab".repeat(32);

export interface IngestBench {
  db: Db;
  /** The port over `db`, as ingest is handed it. */
  store: SweepStore;
  /** The campaign's output directory. */
  out: string;
  /** A new running chunk and its target; results are `<out>/tmp/chunk-<id>[/sub]`, created by the caller. */
  chunk(seedFrom: number, seedTo: number, sub?: string): IngestTarget & { scratch: string };
}

export function ingestBench(dir: string): IngestBench {
  mkdirSync(dir, { recursive: true });
  const out = join(dir, "out");
  mkdirSync(join(out, "tmp"), { recursive: true });
  mkdirSync(join(out, "failures"));
  const db = openStore(join(dir, "fuzzfleet.db"));
  const gen = insertGeneration(db, GEN_HASH, "initial");
  const lane = insertLane(db, gen, "small", "{}", 1);
  const session = insertSession(db, { generationId: gen, requestedSeconds: 60, appBuild: null, transport: "local", host: "h", port: null });
  return {
    db,
    store: sqliteSweepStore(db),
    out,
    chunk(seedFrom, seedTo, sub) {
      const chunkId = insertChunk(db, { sessionId: session, laneId: lane, seedFrom, seedTo, appBuild: null, status: "running", workerId: null });
      const scratch = join(out, "tmp", `chunk-${chunkId}`);
      return {
        generationId: gen,
        genHash: GEN_HASH,
        laneId: lane,
        chunkId,
        seedFrom,
        seedTo,
        resultsDir: sub ? join(scratch, sub) : scratch,
        outDir: out,
        appBuild: "app1",
        scratch,
      };
    },
  };
}

export function writeFailure(results: string, seed: number, meta: Record<string, unknown>, files: Record<string, string>): string {
  const dir = join(results, "failures", String(seed));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "meta.json"), JSON.stringify(meta));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

/** The failure and failure_seed tables, all but the wall-clock columns. */
export function books(db: Db): { failures: unknown[]; seeds: unknown[] } {
  return {
    failures: db
      .prepare(
        `SELECT id, generation_id, lane_id, dedup_key, bucket, first_seed, shrunk, message, repro, artifact_dir, first_app_build,
                hits, state, resolved_app_build FROM failure ORDER BY id`,
      )
      .all(),
    seeds: db.prepare("SELECT * FROM failure_seed ORDER BY failure_id, seed").all(),
  };
}
