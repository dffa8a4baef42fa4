// Taking over expired leases: a `leased` record whose holder stopped renewing it for the lease
// TTL may be claimed by any master (progress when an owner stalls; after --resume, every lease
// with a TTL of 0). The new fence is kept only if the content is still public and intact; a
// record whose corpus file is gone is abandoned at once, since nothing could execute it.
//
// Taking over shares: with several masters each serves its share under a partition lease
// (state/lease-store/partitioned.ts); a share whose lease expired and whose holder is gone is
// taken over whole, logged with how long its holder had been silent and how long the takeover took.
import { performance } from "node:perf_hooks";
import { sharesIdle } from "../../core/quiescence.ts";
import { IntegrityError, verifyPublic } from "../state/corpus.ts";
import type { LeaseTable } from "../state/lease-table.ts";
import type { CommitContext } from "./commits.ts";

/** Claims every expired lease not held already; the (id, fence) of each one taken over. */
export function takeOverExpired(
  ctx: CommitContext,
  o: { ttlMs: number; owner: string; rank: number; holds: (id: string) => boolean; log: (line: string) => void; integrity: (message: string) => void },
): { id: string; fence: string }[] {
  const taken: { id: string; fence: string }[] = [];
  for (const r of ctx.leases.recoverExpired(ctx.wallNow(), o.ttlMs)) {
    if (o.holds(r.id)) continue;
    const fence = ctx.leases.claim(r.id, r.payload, o.owner, { now: ctx.wallNow(), ttlMs: o.ttlMs, worker: o.rank });
    if (!fence) continue;
    try {
      verifyPublic(ctx.corpusDir, r.id, ctx.maxInputBytes);
    } catch (err) {
      if (err instanceof IntegrityError) {
        o.integrity(err.message);
      } else {
        ctx.leases.abandon(r.id, fence);
        o.log(`recovered task ${r.id.slice(0, 12)} has no corpus file: abandoned`);
      }
      continue;
    }
    taken.push({ id: r.id, fence });
  }
  return taken;
}

/** Takes over every share whose lease expired; whether one was taken (the caller replays its commits and reruns its leases). */
export function takeOverShares(leases: LeaseTable, log: (line: string) => void, wallNow: number): boolean {
  if (leases.partition === null) return false;
  const started = performance.now();
  let taken = false;
  for (const t of leases.takeOverShares()) {
    if (t.kind !== "taken") continue;
    taken = true;
    const silent = t.previous && t.previous.holder !== "" ? `, silent for ${((wallNow - t.previous.heartbeat) / 1000).toFixed(1)} s` : "";
    const committing = t.records.filter((r) => r.status === "committing").length;
    const leased = t.records.filter((r) => r.status === "leased").length;
    log(
      `took over the share of rank ${t.rank} (generation ${t.generation}) from ${t.previous?.holder || "nobody"}${silent}: ` +
        `${t.records.length} record(s), ${committing} committing to finish, ${leased} leased to run again; takeover took ${(performance.now() - started).toFixed(1)} ms`,
    );
  }
  return taken;
}

/** Whether every share of a partitioned table is served under a live lease (always, unpartitioned). */
export function sharesServed(leases: LeaseTable): boolean {
  const p = leases.partition;
  if (p === null) return true;
  const shares = p.partitions();
  return sharesIdle(shares, new Set(shares.map((s) => s.holder)));
}
