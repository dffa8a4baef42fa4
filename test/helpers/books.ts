// The audit of a sweep's books after a fault: what the store claims, checked against what the
// bundled planted generator really does with each seed. ARCHITECTURE.md §7: every seed below a
// cursor lies in a complete chunk; no seed or hit is counted twice; no failure found in a
// complete chunk is lost; the file is intact.
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { mergeRanges, type Range } from "../../src/core/ranges.ts";
import { coverageViolations, PLANTED, waitFor, type Campaign, type Running } from "./campaign.ts";
import { pathToFileURL } from "node:url";

interface PlantedSeeds {
  checkSeeds(seeds: number[], settings: { size: string; costMs: number; fixed: string[]; hangSeed: number | null }): { seed: number; bucket: string }[];
}
const { checkSeeds } = (await import(pathToFileURL(PLANTED.replace(/planted\.mjs$/, "seeds.mjs")).href)) as PlantedSeeds;

export interface BooksAudit {
  /** Coverage problems: holes below a cursor, or a cursor that disagrees with the complete chunks. */
  holes: string[];
  /** Failing seeds of complete chunks with no failure_seed row. */
  lost: number[];
  /** Seeds with a failure_seed row that do not fail, or that no complete chunk holds. */
  stray: number[];
  /** Failures whose hits differ from their number of seeds. */
  miscounted: string[];
  integrity: string;
  /** Seeds held by complete chunks (merged), for the record. */
  sweptSeeds: number;
}

export function auditBooks(c: Campaign): BooksAudit {
  const holes = coverageViolations(c);
  const db = new Database(c.dbPath, { readonly: true, fileMustExist: true });
  try {
    const generation = (db.prepare("SELECT MAX(id) AS id FROM generation").get() as { id: number }).id;
    const lanes = db.prepare("SELECT id, name, params_json FROM lane WHERE generation_id = ? AND retired = 0").all(generation) as {
      id: number;
      name: string;
      params_json: string;
    }[];
    const failingInComplete = new Set<number>();
    const inComplete = new Set<number>();
    let sweptSeeds = 0;
    for (const lane of lanes) {
      const args = (JSON.parse(lane.params_json) as { args: string[] }).args;
      const size = args[args.indexOf("--size") + 1] ?? "small";
      const ranges = mergeRanges(
        (db.prepare("SELECT seed_from, seed_to FROM chunk WHERE lane_id = ? AND status = 'complete'").all(lane.id) as { seed_from: number; seed_to: number }[]).map(
          (r): Range => [r.seed_from, r.seed_to],
        ),
      );
      for (const [from, to] of ranges) {
        const seeds = Array.from({ length: to - from + 1 }, (_, i) => from + i);
        sweptSeeds += seeds.length;
        for (const s of seeds) inComplete.add(s);
        for (const v of checkSeeds(seeds, { size, costMs: 0, fixed: [], hangSeed: null })) {
          if (v.bucket !== "ok" && v.bucket !== "quarantine") failingInComplete.add(v.seed);
        }
      }
    }
    const hitRows = db
      .prepare("SELECT fs.seed AS seed FROM failure_seed fs JOIN failure f ON f.id = fs.failure_id WHERE f.generation_id = ?")
      .all(generation) as { seed: number }[];
    const hitSeeds = new Map<number, number>();
    for (const { seed } of hitRows) hitSeeds.set(seed, (hitSeeds.get(seed) ?? 0) + 1);
    const lost = [...failingInComplete].filter((s) => !hitSeeds.has(s)).sort((a, b) => a - b);
    const stray = [...hitSeeds.keys()].filter((s) => !failingInComplete.has(s) || !inComplete.has(s) || hitSeeds.get(s)! > 1).sort((a, b) => a - b);
    const miscounted = (
      db
        .prepare(
          "SELECT f.id AS id, f.hits AS hits, COUNT(fs.seed) AS seeds FROM failure f LEFT JOIN failure_seed fs ON fs.failure_id = f.id GROUP BY f.id HAVING f.hits != COUNT(fs.seed)",
        )
        .all() as { id: number; hits: number; seeds: number }[]
    ).map((r) => `failure ${r.id}: hits ${r.hits}, seeds ${r.seeds}`);
    const integrity = String(db.pragma("integrity_check", { simple: true }));
    return { holes, lost, stray, miscounted, integrity, sweptSeeds };
  } finally {
    db.close();
  }
}

/** Asserts a clean audit, with every problem in the message. */
export function assertBooksTrue(c: Campaign, context = ""): BooksAudit {
  const a = auditBooks(c);
  const problems = [
    ...a.holes,
    ...(a.lost.length ? [`${a.lost.length} failing seed(s) of complete chunks not recorded: ${a.lost.slice(0, 10).join(", ")}`] : []),
    ...(a.stray.length ? [`${a.stray.length} seed(s) recorded that no complete chunk found failing (or twice): ${a.stray.slice(0, 10).join(", ")}`] : []),
    ...a.miscounted,
    ...(a.integrity === "ok" ? [] : [`integrity_check: ${a.integrity}`]),
  ];
  if (problems.length > 0) throw new Error(`the books lie${context ? ` (${context})` : ""}:\n  ${problems.join("\n  ")}`);
  return a;
}

export function completeChunks(c: Campaign): number {
  return c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE status = 'complete'").n;
}

/**
 * For a test of a store that refused writes for a while: once the session says the store takes
 * writes again and a chunk completed after that, it has shown what such a test asks of it, and
 * Ctrl-C ends it (interrupted sessions owe the same exit code; a long budget would only add seconds).
 */
export async function interruptWhenWritesResume(c: Campaign, session: Running): Promise<void> {
  try {
    await waitFor("the session to say the store takes writes again", () => (/takes writes again/.test(session.output()) ? true : undefined), 30_000);
    const landed = completeChunks(c);
    await waitFor("a chunk completed after the store took writes again", () => (completeChunks(c) > landed ? true : undefined), 60_000);
  } catch (err) {
    throw new Error(`${(err as Error).message}; the session's output:\n${session.output()}`);
  }
  session.child.kill("SIGINT");
}

/** The exit code a session's first run must give: 1 when it recorded a distinct failure (pending finds are not), else 0. */
export function firstSessionExit(c: Campaign): number {
  return c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE minimize_state IS NULL").n > 0 ? 1 : 0;
}

/**
 * The exit code `run` or `coordinate` owes for the session summary in `out`: 1 when it found a
 * newly distinct or reopened failure, or a find under a signature never seen before.
 */
export function exitForSummary(out: string): number {
  return newlyDistinct(out) > 0 || newSignatures(out) > 0 || /REOPENED:/.test(out) ? 1 : 0;
}

function newSignatures(out: string): number {
  const m = /\(([\d,]+) under a signature never seen before: exit 1\)/.exec(out);
  return m ? Number(m[1]!.replace(/,/g, "")) : 0;
}

function newlyDistinct(out: string): number {
  const m = /failures: +([\d,]+) newly distinct/.exec(out);
  assert.ok(m, `no session summary in:\n${out}`);
  return Number(m[1]!.replace(/,/g, ""));
}

/**
 * The exit code a `run` or `coordinate` session owes, from what the store recorded: 1 when it
 * recorded a distinct failure first or reopened one, else 0. A distinct failure is the session's
 * when one of its chunks recorded it already minimized (the chunk holding its first seed belongs
 * to the session, and no minimize unit made it), or when one of its minimize units made it
 * (minimize_unit.new_failures). A find pending minimization counts only when it is the generation's
 * first row of its signature and its first seed lies in a chunk the session completed (a minimize
 * unit moves a find's seeds to the failure it merges into, so the seed rows cannot tell). The session is the one
 * whose summary is in `out`, and the summary's "newly distinct" count must be the store's. Exit
 * codes the summary does not decide (4 every lane disabled, 70 lifecycle incomplete) are not owed
 * here: a session that should end so must be asserted so.
 */
export function exitOwed(store: { dbPath: string }, out: string): number {
  const m = /^session (\d+) (?:done|interrupted) — /m.exec(out);
  assert.ok(m, `no session summary in:\n${out}`);
  const session = Number(m[1]);
  const db = new Database(store.dbPath, { readonly: true, fileMustExist: true });
  let recorded: number;
  let signatures: number;
  try {
    const fromChunks = (
      db
        .prepare(
          `SELECT COUNT(*) AS n FROM failure f
            WHERE f.minimize_state IS NULL
              AND NOT EXISTS (SELECT 1 FROM minimize_find m WHERE m.failure_id = f.id)
              AND NOT EXISTS (SELECT 1 FROM failure g WHERE g.merged_into = f.id AND g.first_seed = f.first_seed)
              AND EXISTS (SELECT 1 FROM failure_seed fs JOIN chunk ch ON ch.id = fs.chunk_id
                           WHERE fs.failure_id = f.id AND fs.seed = f.first_seed AND ch.session_id = ?)`,
        )
        .get(session) as { n: number }
    ).n;
    const fromUnits = (
      db.prepare("SELECT COALESCE(SUM(new_failures), 0) AS n FROM minimize_unit WHERE session_id = ? AND status = 'complete'").get(session) as { n: number }
    ).n;
    recorded = fromChunks + fromUnits;
    signatures = (
      db
        .prepare(
          `SELECT COUNT(*) AS n FROM failure f
            WHERE (f.shrunk = 0 OR EXISTS (SELECT 1 FROM minimize_find m WHERE m.failure_id = f.id))
              AND NOT EXISTS (SELECT 1 FROM failure g WHERE g.generation_id = f.generation_id AND g.signature = f.signature AND g.id < f.id)
              AND EXISTS (SELECT 1 FROM chunk ch WHERE ch.lane_id = f.lane_id AND ch.status = 'complete'
                           AND f.first_seed BETWEEN ch.seed_from AND ch.seed_to AND ch.session_id = ?)`,
        )
        .get(session) as { n: number }
    ).n;
  } finally {
    db.close();
  }
  assert.equal(newlyDistinct(out), recorded, `session ${m[1]}: the summary's newly distinct failures are the ones it recorded first`);
  assert.equal(newSignatures(out), signatures, `session ${m[1]}: the summary's finds under a new signature are the ones it recorded first`);
  return exitForSummary(out);
}
