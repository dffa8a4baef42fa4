// Taking over expired leases: a `leased` record whose holder stopped renewing it for the lease
// TTL may be claimed by any master (progress when an owner stalls; after --resume, every lease
// with a TTL of 0). The new fence is kept only if the content is still public and intact; a
// record whose corpus file is gone is abandoned at once, since nothing could execute it.
import { IntegrityError, verifyPublic } from "../state/corpus.ts";
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
