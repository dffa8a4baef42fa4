// Campaign preparation shared by `run` and `coordinate`: make sure the store's generation matches
// the generator on disk, that every configured lane has an active row with the same identity,
// and rebuild each lane's in-memory state from its chunk table.
import type { Config, LaneConfig } from "../../config/schema.ts";
import { laneIdentity } from "../../config/schema.ts";
import { formatInt } from "../../config/format.ts";
import { LaneState } from "../../core/lane-state.ts";
import { RefusedError, UsageError } from "../../errors.ts";
import type { GenerationRow, LaneRow, SweepStore } from "../../store/port.ts";
import type { EngineLane } from "../engine/sweep-engine.ts";

/** Asks the user a yes/no question; resolves false when the answer is not an explicit yes. */
export type Confirm = (question: string) => Promise<boolean>;

export interface GenerationChoice {
  generation: GenerationRow;
  /** True when this call created the generation (all lanes start at base_seed). */
  fresh: boolean;
}

/** Finds or starts the generation for the generator on disk. A change asks before voiding coverage. */
export async function ensureGeneration(store: SweepStore, genHash: string, confirm: Confirm, log: (line: string) => void): Promise<GenerationChoice> {
  const current = store.currentGeneration();
  if (!current) {
    store.startGeneration(null, genHash, "initial");
    return { generation: store.currentGeneration()!, fresh: true };
  }
  if (current.gen_hash === genHash) return { generation: current, fresh: false };
  const swept = store.seedsSwept(current.id);
  const open = store.openFailureCount(current.id);
  log(`the generator changed: ${current.gen_hash.slice(0, 12)} -> ${genHash.slice(0, 12)}`);
  log(`  generation ${current.id} swept ${formatInt(swept)} seeds; a new generation restarts every lane at base_seed`);
  if (open > 0) log(`  its ${open} open failure(s) become 'stale' (their seeds no longer mean the same tests)`);
  if (!(await confirm("Start a new generation (all cursors reset to base_seed)?"))) {
    throw new RefusedError(
      "the generator changed and no new generation was started; restore the generator (or the [generator] command), or re-run with --yes",
    );
  }
  store.startGeneration(current.id, genHash, "generator changed");
  return { generation: store.currentGeneration()!, fresh: true };
}

/**
 * Makes sure every configured lane (enabled or not) has an active row whose identity matches the
 * config. A lane whose identity changed is retired and restarted only after confirmation.
 */
export async function syncLanes(
  store: SweepStore,
  generationId: number,
  config: Config,
  confirm: Confirm,
  log: (line: string) => void,
): Promise<Map<string, LaneRow>> {
  const rows = new Map<string, LaneRow>();
  for (const lane of config.lanes) {
    const identity = laneIdentity(lane);
    const row = store.activeLane(generationId, lane.name);
    if (row && row.params_json === identity) {
      rows.set(lane.name, row);
      continue;
    }
    if (row) {
      const swept = store.laneSeedsSwept(row.id);
      log(`lane '${lane.name}' changed: ${row.params_json} -> ${identity}`);
      log(`  ${formatInt(swept)} seeds of its coverage would be discarded`);
      if (!(await confirm(`Restart lane '${lane.name}' from base_seed ${lane.baseSeed}?`))) {
        throw new RefusedError(
          `lane '${lane.name}' changed its args or base_seed; restore them, rename the lane, or re-run with --yes`,
        );
      }
    }
    store.restartLane(row?.id ?? null, generationId, lane.name, identity, lane.baseSeed);
    rows.set(lane.name, store.activeLane(generationId, lane.name)!);
  }
  return rows;
}

export interface RecoveredLanes {
  lanes: EngineLane[];
  lastCounts: Map<string, number | null>;
  /** Per lane: seeds below the handed-out frontier that no complete chunk covers. */
  uncovered: Map<string, number>;
}

/** Rebuilds cursor, frontier and gaps of each lane from its chunk rows (crash recovery). */
export function recoverLanes(store: SweepStore, lanes: readonly LaneConfig[], rows: ReadonlyMap<string, LaneRow>): RecoveredLanes {
  const out: RecoveredLanes = { lanes: [], lastCounts: new Map(), uncovered: new Map() };
  for (const lane of lanes) {
    const row = rows.get(lane.name)!;
    const state = LaneState.recover(row.base_seed, row.cursor, store.laneChunks(row.id));
    if (state.cursor !== row.cursor) store.saveCursor(row.id, state.cursor);
    const queued = state.queued();
    if (queued > 0) out.uncovered.set(lane.name, queued);
    out.lanes.push({ config: lane, laneId: row.id, state, rate: row.seeds_per_sec });
    out.lastCounts.set(lane.name, store.lastCompleteCount(row.id));
  }
  return out;
}

/** Restricts the session to `names` (which may enable a lane the config disables). */
export function selectLanes(config: Config, names: readonly string[]): LaneConfig[] {
  if (names.length === 0) return config.lanes;
  const known = new Set(config.lanes.map((l) => l.name));
  const unknown = names.filter((n) => !known.has(n));
  if (unknown.length > 0) {
    throw new UsageError(`no such lane(s): ${unknown.join(", ")} (configured: ${[...known].join(", ")})`);
  }
  return config.lanes.map((l) => ({ ...l, enabled: names.includes(l.name) }));
}
