// Where the master that leads a campaign of several masters can be reached once its root was lost:
// the root's role moves with the root's share (rank 0's), so the master that took that share over
// publishes its address here, under the share's generation, and the other masters join it there
// (explore/fleet/failover.ts). One small file in the campaign's work directory, replaced whole by
// rename; a reader trusts it only while share 0's partition record names the same rank and
// generation, so a record left by an earlier leader is never followed.
import { join } from "node:path";
import { z } from "zod";
import { replaceFileSynced } from "../../files/atomic-write.ts";
import { FileProblem } from "../../files/file-problem.ts";
import { readSmallFile } from "../../files/small-file.ts";

export const COORDINATOR_FILE = "coordinator.json";
const MAX_BYTES = 4096;

const CoordinatorRecord = z
  .object({
    rank: z.number().int().min(1),
    generation: z.number().int().min(1),
    host: z.string().min(1).max(255),
    port: z.number().int().min(1).max(65535),
  })
  .strict();
export type CoordinatorRecord = z.infer<typeof CoordinatorRecord>;

export function coordinatorPath(workDir: string): string {
  return join(workDir, COORDINATOR_FILE);
}

/** Publishes where the leader listens (fsynced, renamed over the last one). */
export function writeCoordinator(workDir: string, r: CoordinatorRecord): void {
  replaceFileSynced(coordinatorPath(workDir), JSON.stringify(CoordinatorRecord.parse(r)) + "\n", 0o600);
}

/**
 * The published leader, null when there is none yet. A file that is not such a record (torn by
 * hand, planted, a symlink) is a problem named with its path: it is never followed or trusted.
 */
export function readCoordinator(workDir: string): { record: CoordinatorRecord | null; problem: string | null } {
  const path = coordinatorPath(workDir);
  let bytes: Buffer | null;
  try {
    bytes = readSmallFile(path, MAX_BYTES);
  } catch (err) {
    if (err instanceof FileProblem) return { record: null, problem: err.message };
    throw err;
  }
  if (bytes === null) return { record: null, problem: null };
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString("utf8"));
  } catch {
    return { record: null, problem: `${path} is not JSON` };
  }
  const checked = CoordinatorRecord.safeParse(value);
  if (!checked.success) return { record: null, problem: `${path} is no leader record: ${checked.error.issues[0]?.message ?? "invalid"}` };
  return { record: checked.data, problem: null };
}
