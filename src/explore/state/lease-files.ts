// The files of the lease table (lease-table.ts): reading one record file, never through a
// symlink, all of them for a scan, and what is wrong with one that does not validate.
import { closeSync, constants, fstatSync, openSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { recordProblem, type LeaseRecord } from "../../core/lease-record.ts";
import { HEX64 } from "../../core/message-checks.ts";
import { RuntimeFailure } from "../../errors.ts";

const RECORD_FILE = /^([0-9a-f]{64})\.json$/;
const SHARD_DIR = /^[0-9]{3}$/;

export type ReadResult = { kind: "absent" } | { kind: "valid"; record: LeaseRecord } | { kind: "invalid"; reason: string };

/** A record file exists but is not a valid record; it blocks its task instead of freeing it. */
export class CorruptRecordError extends RuntimeFailure {
  readonly path: string;
  constructor(path: string, reason: string) {
    super(
      `lease record ${path} is corrupt (${reason}); it is never overwritten or treated as free: ` +
        `inspect it, and move it away only once no fuzzfleet process uses this campaign`,
    );
    this.path = path;
  }
}

/** Reads the record file of `id` at `path`, never through a symlink: absent, valid, or why not. */
export function readRecordFile(path: string, id: string): ReadResult {
  let text: string;
  try {
    const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      if (!fstatSync(fd).isFile()) return { kind: "invalid", reason: "not a regular file" };
      text = readFileSync(fd, "utf8");
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return { kind: "absent" };
    return { kind: "invalid", reason: `unreadable: ${code ?? String(err)}` };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { kind: "invalid", reason: "not JSON" };
  }
  const problem = recordProblem(value, id);
  return problem === null ? { kind: "valid", record: value as LeaseRecord } : { kind: "invalid", reason: problem };
}

export function isId(id: unknown): id is string {
  return typeof id === "string" && HEX64.test(id);
}

export function shardName(shard: number): string {
  return String(shard).padStart(3, "0");
}

/**
 * Every valid record under `root` (its shard directories; `shardOf(id)` names the shard a record
 * belongs in), in directory order. Throws CorruptRecordError on any invalid record.
 */
export function readRecordFiles(root: string, shardOf: (id: string) => string): LeaseRecord[] {
  const records: LeaseRecord[] = [];
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    if (!SHARD_DIR.test(entry.name)) continue;
    const dir = join(root, entry.name);
    if (!entry.isDirectory()) throw new CorruptRecordError(dir, "a shard entry that is not a directory");
    for (const name of readdirSync(dir)) {
      const id = RECORD_FILE.exec(name)?.[1];
      if (id === undefined) continue;
      const path = join(dir, name);
      if (shardOf(id) !== entry.name) throw new CorruptRecordError(path, `a record in the wrong shard (${entry.name})`);
      const found = readRecordFile(path, id);
      if (found.kind === "invalid") throw new CorruptRecordError(path, found.reason);
      if (found.kind === "valid") records.push(found.record);
    }
  }
  return records;
}

/** The order of scans: by (updated, id). */
export function byUpdated(a: LeaseRecord, b: LeaseRecord): number {
  return a.updated - b.updated || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}
