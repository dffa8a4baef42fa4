// A minimize unit's results: the generator's `[generator] minimize` command was given a few finds
// pending minimization and wrote the contract's failure layout for them. The same validated walk
// as a chunk's ingest reads it (ingestChunk with the unit's seeds in place of a range); each
// minimized entry is then keyed like any find, and the pending find merges into the distinct
// failure of that key (an existing one, or a new one). A find the minimizer wrote nothing valid
// for, or wrote as unshrunk, is final as 'failed': every find is minimized at most once. Results
// refused as a whole (a symlink where a directory belongs) decide nothing about any find.
// Replayable like a chunk's ingest: it runs inside the caller's transaction.
import type { SweepStore } from "../../store/port.ts";
import { ingestChunk, type IngestResult, type ParsedFailure } from "./ingest.ts";

export interface MinimizeTarget {
  generationId: number;
  genHash: string;
  laneId: number;
  unitId: number;
  /** The finds the unit was given (still 'running'), each by its seed. */
  finds: readonly { id: number; seed: number }[];
  resultsDir: string;
  outDir: string;
  appBuild: string | null;
}

export interface MinimizeResult {
  /** Finds merged into a distinct failure known before. */
  merged: number;
  /** Distinct failures this unit found first. */
  newFailures: number;
  newFailureIds: number[];
  /** Fixed failures a minimized find turned out to be: reopened (a regression). */
  reopened: number;
  failed: number;
  malformed: IngestResult["malformed"];
  refused: string | null;
}

export function ingestMinimized(store: SweepStore, t: MinimizeTarget): MinimizeResult {
  const r: MinimizeResult = { merged: 0, newFailures: 0, newFailureIds: [], reopened: 0, failed: 0, malformed: [], refused: null };
  const bySeed = new Map(t.finds.map((f) => [f.seed, f.id]));
  const handled = new Set<number>();
  const seeds = [...bySeed.keys()];
  store.atomically(() => {
    const ingest = ingestChunk(store, {
      generationId: t.generationId,
      genHash: t.genHash,
      laneId: t.laneId,
      chunkId: t.unitId,
      seedFrom: Math.min(...seeds),
      seedTo: Math.max(...seeds),
      resultsDir: t.resultsDir,
      outDir: t.outDir,
      appBuild: t.appBuild,
      minimize: {
        seeds: new Set(seeds),
        record: (p: ParsedFailure, place: () => string) => {
          const findId = bySeed.get(p.seed)!;
          if (handled.has(findId)) return; // a second entry for one seed: the first one counts
          handled.add(findId);
          if (!p.shrunk) {
            // The entry's msg is the minimizer's own word on why (the Csmith example's says so).
            store.markFindFailed(findId, `the minimizer wrote it as not minimized (shrunk: false)${p.msg ? `: ${p.msg}` : ""}`);
            r.failed++;
            return;
          }
          let target = store.failureByKey(t.generationId, p.dedupKey);
          if (target?.merged_into != null) target = store.failureById(target.merged_into) ?? target;
          let targetId: number;
          if (!target) {
            targetId = store.recordFailure({
              generationId: t.generationId,
              laneId: t.laneId,
              dedupKey: p.dedupKey,
              bucket: p.bucket,
              seed: p.seed,
              shrunk: true,
              message: p.msg,
              repro: p.repro,
              artifactDir: place(),
              appBuild: t.appBuild,
              signature: p.signature,
            });
            r.newFailures++;
            r.newFailureIds.push(targetId);
          } else {
            targetId = target.id;
            if (target.minimize_state !== null) {
              // Another find's whole input is this minimized input: that find is the distinct failure.
              store.promoteFind(target.id);
              r.newFailures++;
              r.newFailureIds.push(target.id);
            } else {
              r.merged++;
            }
          }
          if (store.mergeFind(findId, targetId)) r.reopened++;
        },
      },
    });
    r.malformed = ingest.malformed;
    r.refused = ingest.refused;
    // Refused results decided nothing (nothing of them was recorded): the caller gives the finds back.
    if (ingest.refused !== null) return;
    for (const f of t.finds) {
      if (handled.has(f.id)) continue;
      const why =
        ingest.malformed.length > 0
            ? `the minimizer wrote no valid failure entry for seed ${f.seed} (${ingest.malformed.length} malformed, kept under malformed/)`
            : `the minimizer wrote no failure entry for seed ${f.seed} (it no longer fails?)`;
      store.markFindFailed(f.id, why);
      r.failed++;
    }
  });
  return r;
}
