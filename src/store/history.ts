// A generation's history at a bounded number of points: the seeds each lane swept and the finds
// its chunks recorded, per time slot, and the distinct failures first seen in each slot. Slot s
// covers [origin + s·width, origin + (s+1)·width) (unix seconds). The width starts at one second
// and doubles (neighbouring slots merged) whenever an event would land past MAX_SLOTS, so a week
// of sweeping keeps as many rows as a minute did; an event before the origin moves the origin
// back by whole slots. A chunk's seeds are spread evenly over the time it ran (a ten-minute
// chunk draws a plateau, not a spike at its end); its finds count in the slot where it ended.
// Called from the statements that book chunks and failures (tallies.ts), in their transaction.
import { type Db, stmt } from "./statement.ts";

/** Most slots a generation keeps; the views show at most half as many points. */
export const MAX_SLOTS = 480;

interface Timeline {
  origin: number;
  width: number;
  last_end: number;
}

/** A generation's stored history, as the views read it. */
export interface SweepHistory {
  /** Unix seconds where slot 0 starts, and each slot's width in seconds. */
  origin: number;
  width: number;
  /** When the latest complete chunk ended (unix seconds). */
  lastEnd: number;
  /** Seeds swept and finds recorded per lane and slot (slots with nothing are absent). */
  lanes: { lane: string; slot: number; seeds: number; finds: number }[];
  /** Distinct failures first seen per slot. */
  distinct: { slot: number; n: number }[];
}

function timeline(db: Db, generationId: number): Timeline | undefined {
  return stmt(db, "SELECT origin, width, last_end FROM sweep_timeline WHERE generation_id = ?").get(generationId) as Timeline | undefined;
}

/** The timeline of the generation, made to cover time `t`: created, moved back, or coarsened as needed. */
function coverTime(db: Db, generationId: number, t: number): Timeline {
  let tl = timeline(db, generationId);
  if (!tl) {
    tl = { origin: Math.floor(t), width: 1, last_end: Math.floor(t) };
    stmt(db, "INSERT INTO sweep_timeline (generation_id, origin, width, last_end) VALUES (?, ?, ?, ?)").run(generationId, tl.origin, tl.width, tl.last_end);
    return tl;
  }
  if (t < tl.origin) {
    const k = Math.ceil((tl.origin - t) / tl.width);
    rewriteSlots(db, generationId, (slot) => slot + k);
    tl = { ...tl, origin: tl.origin - k * tl.width };
  }
  while (Math.floor((t - tl.origin) / tl.width) >= MAX_SLOTS) {
    rewriteSlots(db, generationId, (slot) => Math.floor(slot / 2));
    tl = { ...tl, width: tl.width * 2 };
  }
  stmt(db, "UPDATE sweep_timeline SET origin = ?, width = ? WHERE generation_id = ?").run(tl.origin, tl.width, generationId);
  return tl;
}

/** Renumbers a generation's slots (merging those that meet): at most lanes × MAX_SLOTS rows. */
function rewriteSlots(db: Db, generationId: number, to: (slot: number) => number): void {
  const lanes = stmt(db, "SELECT lane_id, slot, seeds, finds FROM sweep_history WHERE generation_id = ?").all(generationId) as {
    lane_id: number;
    slot: number;
    seeds: number;
    finds: number;
  }[];
  const distinct = stmt(db, "SELECT slot, n FROM distinct_history WHERE generation_id = ?").all(generationId) as { slot: number; n: number }[];
  stmt(db, "DELETE FROM sweep_history WHERE generation_id = ?").run(generationId);
  stmt(db, "DELETE FROM distinct_history WHERE generation_id = ?").run(generationId);
  for (const r of lanes) addLaneSlot(db, generationId, r.lane_id, to(r.slot), r.seeds, r.finds);
  for (const r of distinct) addDistinctSlot(db, generationId, to(r.slot), r.n);
}

function addLaneSlot(db: Db, generationId: number, laneId: number, slot: number, seeds: number, finds: number): void {
  stmt(
    db,
    `INSERT INTO sweep_history (generation_id, lane_id, slot, seeds, finds) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (generation_id, lane_id, slot) DO UPDATE SET seeds = seeds + excluded.seeds, finds = finds + excluded.finds`,
  ).run(generationId, laneId, slot, seeds, finds);
}

function addDistinctSlot(db: Db, generationId: number, slot: number, n: number): void {
  stmt(
    db,
    `INSERT INTO distinct_history (generation_id, slot, n) VALUES (?, ?, ?)
       ON CONFLICT (generation_id, slot) DO UPDATE SET n = n + excluded.n`,
  ).run(generationId, slot, n);
}

/** Spreads `seeds` evenly over [from, to] on the slots of `tl`, calling `add` once per slot touched. */
function spread(tl: { origin: number; width: number }, from: number, to: number, seeds: number, add: (slot: number, seeds: number) => void): void {
  const first = Math.max(0, Math.floor((from - tl.origin) / tl.width));
  const last = Math.max(first, Math.floor((to - tl.origin) / tl.width));
  if (to <= from || first === last) return add(first, seeds);
  const density = seeds / (to - from);
  for (let s = first; s <= last; s++) {
    const overlap = Math.min(to, tl.origin + (s + 1) * tl.width) - Math.max(from, tl.origin + s * tl.width);
    if (overlap > 0) add(s, density * overlap);
  }
}

/** Adds (or, with negative counts, takes back) one complete chunk that ran from `from` to `to` (unix seconds). */
export function addChunkToHistory(db: Db, generationId: number, laneId: number, from: number, to: number, seeds: number, finds: number): void {
  if (!Number.isFinite(from) || !Number.isFinite(to)) return;
  coverTime(db, generationId, from);
  const tl = coverTime(db, generationId, to);
  spread(tl, from, to, seeds, (slot, n) => addLaneSlot(db, generationId, laneId, slot, n, 0));
  if (finds !== 0) addLaneSlot(db, generationId, laneId, Math.max(0, Math.floor((to - tl.origin) / tl.width)), 0, finds);
  if (seeds > 0 && to > tl.last_end) stmt(db, "UPDATE sweep_timeline SET last_end = ? WHERE generation_id = ?").run(to, generationId);
}

/** `n` distinct failures of the generation were first seen at `at` (an ISO time). */
export function addDistinctToHistory(db: Db, generationId: number, at: string, n: number): void {
  const t = Date.parse(at) / 1000;
  if (!Number.isFinite(t)) return;
  const tl = coverTime(db, generationId, t);
  addDistinctSlot(db, generationId, Math.max(0, Math.floor((t - tl.origin) / tl.width)), n);
}

/** The generation's history, or null before anything was recorded: at most lanes × MAX_SLOTS rows. */
export function readHistory(db: Db, generationId: number): SweepHistory | null {
  const tl = timeline(db, generationId);
  if (!tl) return null;
  const lanes = stmt(
    db,
    `SELECT l.name AS lane, h.slot AS slot, h.seeds AS seeds, h.finds AS finds
       FROM sweep_history h JOIN lane l ON l.id = h.lane_id WHERE h.generation_id = ? ORDER BY h.slot, h.lane_id`,
  ).all(generationId) as SweepHistory["lanes"];
  const distinct = stmt(db, "SELECT slot, n FROM distinct_history WHERE generation_id = ? ORDER BY slot").all(generationId) as SweepHistory["distinct"];
  return { origin: tl.origin, width: tl.width, lastEnd: tl.last_end, lanes, distinct };
}

/**
 * Recomputes every generation's history from the rows, in one pass over the complete chunks (in
 * memory, then one row per slot): the width is the one the incremental path would have reached.
 */
export function rebuildHistory(db: Db): void {
  db.exec("DELETE FROM sweep_history; DELETE FROM distinct_history; DELETE FROM sweep_timeline;");
  const gens = db.prepare("SELECT id FROM generation").all() as { id: number }[];
  for (const { id } of gens) {
    // ISO times of one format order as text: the bounds come from SQL, the chunks stream past once.
    const bounds = db
      .prepare(
        `SELECT MIN(c.started_at) AS lo, MAX(c.ended_at) AS hi FROM chunk c JOIN lane l ON l.id = c.lane_id
          WHERE l.generation_id = ? AND c.status = 'complete' AND c.ended_at IS NOT NULL`,
      )
      .get(id) as { lo: string | null; hi: string | null };
    const firsts = (db.prepare(`SELECT first_seen FROM failure WHERE generation_id = ? AND minimize_state IS NULL`).all(id) as { first_seen: string }[])
      .map((r) => Date.parse(r.first_seen) / 1000)
      .filter(Number.isFinite);
    const lastEnd = bounds.hi === null ? NaN : Date.parse(bounds.hi) / 1000;
    const ends = [bounds.lo === null ? NaN : Date.parse(bounds.lo) / 1000, lastEnd, ...firsts].filter(Number.isFinite);
    if (ends.length === 0) continue;
    const lo = ends.reduce((a, b) => Math.min(a, b), Infinity);
    const hi = ends.reduce((a, b) => Math.max(a, b), -Infinity);
    const tl = { origin: Math.floor(lo), width: 1 };
    while (Math.floor((hi - tl.origin) / tl.width) >= MAX_SLOTS) tl.width *= 2;
    const seeds = new Map<string, { lane: number; slot: number; seeds: number; finds: number }>();
    const at = (lane: number, slot: number) => {
      const key = `${lane}:${slot}`;
      let e = seeds.get(key);
      if (!e) seeds.set(key, (e = { lane, slot, seeds: 0, finds: 0 }));
      return e;
    };
    const chunks = db.prepare(
      `SELECT c.lane_id AS lane, c.started_at AS started, c.ended_at AS ended, c.seed_to - c.seed_from + 1 AS seeds, c.finds AS finds
         FROM chunk c JOIN lane l ON l.id = c.lane_id WHERE l.generation_id = ? AND c.status = 'complete' AND c.ended_at IS NOT NULL`,
    );
    for (const c of chunks.iterate(id) as IterableIterator<{ lane: number; started: string; ended: string; seeds: number; finds: number | null }>) {
      const from = Date.parse(c.started) / 1000;
      const to = Date.parse(c.ended) / 1000;
      if (!Number.isFinite(from) || !Number.isFinite(to)) continue;
      spread(tl, from, to, c.seeds, (slot, n) => (at(c.lane, slot).seeds += n));
      if (c.finds) at(c.lane, Math.max(0, Math.floor((to - tl.origin) / tl.width))).finds += c.finds;
    }
    const distinct = new Map<number, number>();
    for (const t of firsts) {
      const slot = Math.max(0, Math.floor((t - tl.origin) / tl.width));
      distinct.set(slot, (distinct.get(slot) ?? 0) + 1);
    }
    db.prepare("INSERT INTO sweep_timeline (generation_id, origin, width, last_end) VALUES (?, ?, ?, ?)").run(id, tl.origin, tl.width, Number.isFinite(lastEnd) ? lastEnd : tl.origin);
    const insert = db.prepare("INSERT INTO sweep_history (generation_id, lane_id, slot, seeds, finds) VALUES (?, ?, ?, ?, ?)");
    for (const e of seeds.values()) insert.run(id, e.lane, e.slot, e.seeds, e.finds);
    const insertDistinct = db.prepare("INSERT INTO distinct_history (generation_id, slot, n) VALUES (?, ?, ?)");
    for (const [slot, n] of distinct) insertDistinct.run(id, slot, n);
  }
}
