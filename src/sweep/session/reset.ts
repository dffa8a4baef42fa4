// `reset`: start a new generation, or restart one lane. A lane restart retires the lane row and
// creates a fresh one, so the old lane's chunk rows can never be absorbed into the new cursor:
// the reset holds across every later run and coordinate.
import { formatInt } from "../../config/format.ts";
import { loadConfig } from "../../config/load.ts";
import type { CampaignPaths } from "../../config/paths.ts";
import { laneIdentity } from "../../config/schema.ts";
import { RefusedError, UsageError } from "../../errors.ts";
import { CampaignLock } from "../../lock/campaign-lock.ts";
import { openSweepStore } from "../../store/sqlite/index.ts";
import type { Confirm } from "./campaign.ts";
import { tryGenerationHash } from "../../config/identity.ts";

export interface ResetOptions {
  paths: CampaignPaths;
  lane: string | null;
  confirm: Confirm;
  forceUnlock: boolean;
  write?: (line: string) => void;
}

export async function resetCommand(o: ResetOptions): Promise<number> {
  const write = o.write ?? ((line: string) => process.stdout.write(line + "\n"));
  const config = loadConfig(o.paths.configPath);
  const lock = CampaignLock.acquire(o.paths.outDir, { command: "reset", forceUnlock: o.forceUnlock });
  const store = openSweepStore(o.paths.dbPath, { journal: config.store.journal });
  try {
    const gen = store.currentGeneration();
    if (!gen) {
      write("nothing to reset");
      return 0;
    }
    if (o.lane !== null) {
      const row = store.activeLane(gen.id, o.lane);
      const configured = config.lanes.find((l) => l.name === o.lane);
      if (!row && configured) {
        write(`lane '${o.lane}' has not started in generation ${gen.id} yet: the next run starts it at ${formatInt(configured.baseSeed)}; nothing to reset`);
        return 0;
      }
      if (!row) {
        throw new UsageError(`no such lane '${o.lane}' (configured: ${config.lanes.map((l) => l.name).join(", ") || "none"}); check its name in ${config.path}`);
      }
      const identity = configured ? laneIdentity(configured) : row.params_json;
      const base = configured ? configured.baseSeed : row.base_seed;
      const covered = row.cursor - row.base_seed;
      if (!(await o.confirm(`Restart lane '${o.lane}' from seed ${formatInt(base)} (discards ${formatInt(covered)} seeds of coverage)?`))) {
        throw new RefusedError(`lane '${o.lane}' was not reset`);
      }
      store.restartLane(row.id, gen.id, o.lane, identity, base);
      write(`lane '${o.lane}' reset to ${formatInt(base)}`);
      return 0;
    }
    if (!(await o.confirm("Start a new generation? Every lane restarts at base_seed and open failures become 'stale'."))) {
      throw new RefusedError("no new generation was started");
    }
    const hash = tryGenerationHash(config) ?? gen.gen_hash;
    const id = store.startGeneration(gen.id, hash, "manual reset");
    write(`generation ${id} started (${hash.slice(0, 12)})`);
    return 0;
  } finally {
    store.close();
    lock.release();
  }
}
