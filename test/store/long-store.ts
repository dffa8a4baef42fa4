// A long campaign's store, forged quickly: the store is created by the code's own migrations,
// then filled by direct inserts with what weeks of sweeping leave behind (complete chunks of
// several lanes, distinct failures and the seeds that hit them), and left as a schema-2 store
// (the last schema without the views' aggregates) so that opening it for writing runs the
// migrations that build them from the rows, as they do for a store an older fuzzfleet wrote.
import Database from "better-sqlite3";
import { openStore } from "../../src/store/db.ts";

export interface LongCampaign {
  /** Complete chunks in all. */
  chunks: number;
  /** Lanes, chunks handed out round-robin. */
  lanes: readonly string[];
  seedsPerChunk: number;
  /** Distinct failures; failure i (0-based) is hit by `hitsOf(i)` seeds. */
  failures: number;
  hitsOf: (i: number) => number;
  /** Finds pending minimization (one seed each). */
  pending?: number;
  /** Seconds between the starts of two chunks (the fleet's pace), and each chunk's run time. */
  everySeconds?: number;
  chunkSeconds?: number;
}

export interface LongCampaignFacts {
  generationId: number;
  laneIds: Map<string, number>;
  seedsSwept: number;
  finds: number;
  distinct: number;
  hits: number;
  singletons: number;
  doubletons: number;
  /** The seeds each lane swept (all of them below its cursor). */
  laneSeeds: Map<string, number>;
  firstChunkStart: string;
  lastChunkEnd: string;
}

const T0 = Date.parse("2026-01-05T00:00:00Z");
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

/** Tables and indexes of schema 2; anything else a newer schema added is dropped to make the store old again. */
const SCHEMA_2 = new Set([
  "meta", "generation", "lane", "session", "chunk", "worker", "worker_rate", "failure", "failure_seed", "minimize_unit", "minimize_find", "quarantine_reason",
  "lane_active", "chunk_lane", "failure_minimize", "failure_signature",
]);

export function forgeLongCampaign(path: string, o: LongCampaign): LongCampaignFacts {
  openStore(path, { journal: "wal" }).close();
  const db = new Database(path);
  try {
    const every = (o.everySeconds ?? 6) * 1000;
    const runs = (o.chunkSeconds ?? 600) * 1000;
    const last = T0 + (o.chunks - 1) * every + runs;
    const facts = db.transaction(() => {
      const gen = Number(db.prepare("INSERT INTO generation (gen_hash, created_at, note) VALUES (?, ?, 'initial')").run("ab".repeat(32), iso(T0 - 60_000)).lastInsertRowid);
      const session = Number(
        db.prepare("INSERT INTO session (generation_id, started_at, ended_at, requested_seconds, status, mode) VALUES (?, ?, ?, ?, 'done', 'local')").run(gen, iso(T0), iso(last), 14 * 86_400)
          .lastInsertRowid,
      );
      const laneIds = new Map<string, number>();
      const bases = new Map<string, number>();
      o.lanes.forEach((name, i) => {
        const base = 1 + i * 1_000_000_000;
        bases.set(name, base);
        laneIds.set(
          name,
          Number(
            db.prepare("INSERT INTO lane (generation_id, name, params_json, base_seed, cursor, seeds_per_sec, retired, created_at) VALUES (?, ?, ?, ?, ?, 50, 0, ?)").run(
              gen,
              name,
              JSON.stringify({ args: ["--size", name] }),
              base,
              base,
              iso(T0 - 60_000),
            ).lastInsertRowid,
          ),
        );
      });
      const insertChunk = db.prepare(
        `INSERT INTO chunk (session_id, lane_id, seed_from, seed_to, started_at, ended_at, seconds, status, clean, finds, quarantine, unshrunk)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'complete', ?, ?, 0, 0)`,
      );
      // Failing seeds: failure i is hit by hitsOf(i) seeds, each in its own chunk, spread over the campaign.
      const hitsPlan: { failure: number; chunk: number }[] = [];
      let planned = 0;
      for (let f = 0; f < o.failures; f++) {
        for (let h = 0; h < o.hitsOf(f); h++) hitsPlan.push({ failure: f, chunk: (planned++ * 7919) % o.chunks });
      }
      for (let p = 0; p < (o.pending ?? 0); p++) hitsPlan.push({ failure: -1 - p, chunk: (planned++ * 7919) % o.chunks });
      const findsIn = new Map<number, { failure: number; k: number }[]>();
      for (const h of hitsPlan) {
        const list = findsIn.get(h.chunk) ?? [];
        list.push({ failure: h.failure, k: list.length });
        findsIn.set(h.chunk, list);
      }
      const next = new Map(bases);
      const laneSeeds = new Map(o.lanes.map((n) => [n, 0]));
      const chunkAt: { id: number; lane: string; from: number; started: number }[] = [];
      let seeds = 0;
      let finds = 0;
      for (let i = 0; i < o.chunks; i++) {
        const lane = o.lanes[i % o.lanes.length]!;
        const from = next.get(lane)!;
        const to = from + o.seedsPerChunk - 1;
        next.set(lane, to + 1);
        const started = T0 + i * every;
        const n = findsIn.get(i)?.length ?? 0;
        const id = Number(insertChunk.run(session, laneIds.get(lane)!, from, to, iso(started), iso(started + runs), runs / 1000, o.seedsPerChunk - n, n).lastInsertRowid);
        chunkAt.push({ id, lane, from, started });
        seeds += o.seedsPerChunk;
        finds += n;
        laneSeeds.set(lane, laneSeeds.get(lane)! + o.seedsPerChunk);
      }
      for (const [lane, cursor] of next) db.prepare("UPDATE lane SET cursor = ? WHERE id = ?").run(cursor, laneIds.get(lane)!);
      const insertFailure = db.prepare(
        `INSERT INTO failure (generation_id, lane_id, dedup_key, bucket, first_seed, shrunk, message, repro, artifact_dir, first_seen, last_seen, hits, state, signature, minimize_state)
         VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?, 'open', ?, ?)`,
      );
      const insertSeed = db.prepare("INSERT INTO failure_seed (failure_id, seed, chunk_id) VALUES (?, ?, ?)");
      const rows = new Map<number, { id: number; hits: number }>();
      for (const [chunk, list] of [...findsIn].sort((a, b) => a[0] - b[0])) {
        const c = chunkAt[chunk]!;
        for (const { failure, k } of list) {
          const seed = c.from + k;
          const when = iso(c.started + runs);
          let row = rows.get(failure);
          if (!row) {
            const pending = failure < 0;
            const bucket = pending ? "timeout" : ["crash", "wrong-code", "assert"][failure % 3]!;
            const id = Number(
              insertFailure.run(gen, laneIds.get(c.lane)!, `key-${failure}`, bucket, seed, pending ? 0 : 1, `${bucket} number ${failure}`, when, when, 0, `${bucket}: failure ${failure}`, pending ? "pending" : null)
                .lastInsertRowid,
            );
            rows.set(failure, (row = { id, hits: 0 }));
          }
          insertSeed.run(row.id, seed, c.id);
          row.hits++;
        }
      }
      const setHits = db.prepare("UPDATE failure SET hits = ? WHERE id = ?");
      for (const r of rows.values()) setHits.run(r.hits, r.id);
      const distinct = [...rows].filter(([f]) => f >= 0).map(([, r]) => r.hits);
      return {
        generationId: gen,
        laneIds,
        seedsSwept: seeds,
        finds,
        distinct: distinct.length,
        hits: distinct.reduce((a, b) => a + b, 0),
        singletons: distinct.filter((h) => h === 1).length,
        doubletons: distinct.filter((h) => h === 2).length,
        laneSeeds,
        firstChunkStart: iso(T0),
        lastChunkEnd: iso(last),
      };
    })();
    // Back to schema 2: what a newer schema added goes, so a writer's open migrates it again.
    const added = (db.prepare("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index') AND name NOT LIKE 'sqlite_%'").all() as { type: string; name: string }[]).filter(
      (r) => !SCHEMA_2.has(r.name),
    );
    for (const r of added.filter((a) => a.type === "index")) db.exec(`DROP INDEX ${r.name}`);
    for (const r of added.filter((a) => a.type === "table")) db.exec(`DROP TABLE ${r.name}`);
    // Columns a newer schema added to a table of schema 2 (schema 4: how a worker's files travel; schema 5: a failure's last build).
    for (const [table, column] of [["worker", "files"], ["failure", "last_app_build"]] as const) {
      const has = (db.prepare(`SELECT COUNT(*) AS n FROM pragma_table_info('${table}') WHERE name = ?`).get(column) as { n: number }).n > 0;
      if (has) db.exec(`ALTER TABLE ${table} DROP COLUMN ${column}`);
    }
    db.pragma("user_version = 2");
    return facts;
  } finally {
    db.close();
  }
}

/** Opens the store for writing once, as the next `run` would: the migrations bring it up to date. */
export function upgradeStore(path: string): void {
  openStore(path, { journal: "wal" }).close();
}
