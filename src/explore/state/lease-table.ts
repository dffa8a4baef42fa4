// The fenced lease table: who may execute and commit each explore task, shared by every master
// through the file system. One JSON record per task id (the input's SHA-256):
//
//   <root>/<shard>/<id>.json        the record; shard = first 32 bits of the id mod shardCount
//   <root>/<shard>/<id>.json.lock   its short lock (file-lock.ts), never removed
//
// Each claim issues a fresh fencing token; only the current token may heartbeat, commit or
// complete, so a holder that lost its lease and comes back late changes nothing.
//
//   (none)      --claim-->               leased
//   leased      --claim, once expired--> leased (new token; ttl 0 takes over unconditionally)
//   leased      --abandon-->             (none)
//   leased      --beginCommit-->         committing   irreversible: never reclaimed, however old
//   committing  --beginCommit, same manifest--> committing
//   leased | committing --complete / replayCommit--> done   terminal: never claimed again
//
// Every transition runs under the record's lock and re-reads the record there. A record is
// written as a whole (temp file + fsync + rename + directory fsync). A record that exists but
// does not validate is never overwritten and never counts as free: transitions refuse it and
// scans throw CorruptRecordError.
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { RuntimeFailure } from "../../errors.ts";
import { isCount } from "../../core/message-checks.ts";
import { randomHex } from "../../util/random-hex.ts";
import { fsyncDir, mkdirDurable, replaceFile, replaceFileSynced, unlinkDurable } from "./durable.ts";
import { withFileLock } from "./file-lock.ts";
import { HEX64 } from "../../core/message-checks.ts";

export type LeaseStatus = "leased" | "committing" | "done";
export type Origin = "initial" | "generated";

/** What the task is: the content hash (equal to the record id) and how it entered the corpus. */
export interface WorkPayload {
  hash: string;
  origin: Origin;
}

/** The durable decision of a commit: which staged children the task's result publishes. */
export interface CommitManifest {
  worker: string;
  staging_id: string;
  hashes: string[];
  num_generated: number;
}

export interface LeaseRecord {
  schema: 1;
  id: string;
  status: LeaseStatus;
  payload: WorkPayload;
  owner: string;
  previous_owner: string;
  worker: number;
  token: string;
  /** Wall-clock ms of the last claim, heartbeat, commit or completion. */
  updated: number;
  attempts: number;
  steals: number;
  commit?: CommitManifest;
  completed?: number;
}

export interface LeaseTableOptions {
  /** The table directory, e.g. `<corpus>/.fuzzfleet/work-<epoch>/leases`. */
  root: string;
  /** Default 64, at most 1000 (shard directories are named 000..999). */
  shardCount?: number;
  /** Bound on waiting for one record's lock, on the monotonic clock. Default 30 000. */
  lockTimeoutMs?: number;
  /**
   * "all" (default): every record write is fsynced (file and shard directory).
   * "fence": only a commit fence that has children to publish is fsynced. Every other write is
   * still atomic (temp + rename), so other processes see it at once; only a machine crash can
   * lose it, and each loss is redone: a lost claim or heartbeat is claimed again, a lost `done`
   * leaves the record `committing`, which is replayed idempotently from its manifest, and an
   * empty commit publishes nothing.
   */
  durability?: "all" | "fence";
}

export type CompletionResult = "completed" | "already" | "stale";

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

const STAGING_ID = /^[0-9a-f]{32}$/;
const RECORD_FILE = /^([0-9a-f]{64})\.json$/;
const SHARD_DIR = /^[0-9]{3}$/;
const STATUSES: readonly string[] = ["leased", "committing", "done"];
const ORIGINS: readonly string[] = ["initial", "generated"];
const RECORD_KEYS = new Set(["schema", "id", "status", "payload", "owner", "previous_owner", "worker", "token", "updated", "attempts", "steals", "commit", "completed"]);
const MANIFEST_KEYS = ["hashes", "num_generated", "staging_id", "worker"];

/**
 * The canonical form of a manifest: hashes deduplicated and sorted, keys in sorted order.
 * Throws RangeError if `m` is not a valid manifest: extra or missing keys, a hash that is not
 * 64 lowercase hex, a staging id that is not 32 lowercase hex (or "" exactly when there are no
 * hashes), num_generated not an integer >= the number of unique hashes, or an empty worker.
 */
export function canonicalManifest(m: CommitManifest): CommitManifest {
  const problem = manifestProblem(m);
  if (problem !== null) throw new RangeError(`invalid commit manifest: ${problem}`);
  const hashes = [...new Set(m.hashes)].sort();
  return { hashes, num_generated: m.num_generated, staging_id: m.staging_id, worker: m.worker };
}

function manifestProblem(m: unknown): string | null {
  if (!isPlainObject(m)) return "not an object";
  const keys = Object.keys(m).sort();
  if (keys.join(",") !== MANIFEST_KEYS.join(",")) return `keys must be exactly ${MANIFEST_KEYS.join(", ")} (got ${keys.join(", ")})`;
  if (typeof m.worker !== "string" || m.worker === "") return "worker must be a non-empty string";
  if (!Array.isArray(m.hashes)) return "hashes must be an array";
  for (const h of m.hashes) if (typeof h !== "string" || !HEX64.test(h)) return `hash ${JSON.stringify(h)} is not 64 lowercase hex`;
  const unique = new Set(m.hashes as string[]).size;
  if (typeof m.staging_id !== "string") return "staging_id must be a string";
  if (unique === 0 ? m.staging_id !== "" : !STAGING_ID.test(m.staging_id)) {
    return `staging_id ${JSON.stringify(m.staging_id)} must be 32 lowercase hex, or "" exactly when there are no hashes`;
  }
  if (!Number.isSafeInteger(m.num_generated) || (m.num_generated as number) < unique) {
    return `num_generated ${JSON.stringify(m.num_generated)} must be an integer >= ${unique} (the number of unique hashes)`;
  }
  return null;
}

type ReadResult = { kind: "absent" } | { kind: "valid"; record: LeaseRecord } | { kind: "invalid"; reason: string };

export class LeaseTable {
  readonly root: string;
  readonly stats = { directorySyncs: 0, heartbeatBatches: 0, renewals: 0 };
  private readonly shardCount: number;
  private readonly lockTimeoutMs: number;
  private readonly readyShards = new Set<number>();
  private readonly durability: "all" | "fence";

  constructor(opts: LeaseTableOptions) {
    const { root, shardCount = 64, lockTimeoutMs = 30_000, durability = "all" } = opts;
    this.durability = durability;
    if (typeof root !== "string" || root === "") throw new RangeError("lease table root must be a non-empty path");
    if (!Number.isSafeInteger(shardCount) || shardCount < 1 || shardCount > 1000) {
      throw new RangeError(`lease table shardCount must be an integer from 1 to 1000 (got ${shardCount})`);
    }
    if (!Number.isFinite(lockTimeoutMs) || lockTimeoutMs <= 0) {
      throw new RangeError(`lease table lockTimeoutMs must be a finite number of milliseconds > 0 (got ${lockTimeoutMs})`);
    }
    this.root = root;
    this.shardCount = shardCount;
    this.lockTimeoutMs = lockTimeoutMs;
    this.stats.directorySyncs += mkdirDurable(root);
  }

  /**
   * Takes the task for `owner`: succeeds when there is no record, or a valid `leased` record
   * whose age `now - updated` is at least `ttlMs`, or any `leased` record when `ttlMs` is 0
   * (forced takeover, even of a lease dated in the future). Returns the new fencing token, or
   * null: invalid id, unexpired lease, `committing` or `done` record, or a corrupt record.
   */
  claim(id: string, payload: WorkPayload, owner: string, opts: { now: number; ttlMs: number; worker?: number }): string | null {
    const { now, ttlMs, worker = 0 } = opts;
    requireTime("now", now);
    requireTime("ttlMs", ttlMs);
    if (typeof owner !== "string" || owner === "") throw new RangeError("claim: owner must be a non-empty string");
    if (!Number.isSafeInteger(worker) || worker < 0) throw new RangeError(`claim: worker must be an integer >= 0 (got ${worker})`);
    if (!isId(id)) return null;
    if (!isPlainObject(payload) || payload.hash !== id || !ORIGINS.includes(payload.origin)) {
      throw new RangeError(`claim: payload must be {hash: ${id}, origin: "initial" | "generated"} (got ${JSON.stringify(payload)})`);
    }
    this.prepareShard(id);
    return this.locked(id, () => {
      const found = this.read(id);
      if (found.kind === "invalid") return null;
      const prev = found.kind === "valid" ? found.record : null;
      if (prev !== null && (prev.status !== "leased" || (ttlMs > 0 && now - prev.updated < ttlMs))) return null;
      const token = `${owner}:${worker}:${process.pid}:${randomHex(8)}`;
      this.write({
        schema: 1,
        id,
        status: "leased",
        payload: { hash: payload.hash, origin: payload.origin },
        owner,
        previous_owner: prev?.owner ?? "",
        worker,
        token,
        updated: now,
        attempts: (prev?.attempts ?? 0) + 1,
        steals: (prev?.steals ?? 0) + (prev !== null && prev.owner !== owner ? 1 : 0),
      });
      return token;
    });
  }

  /**
   * Renews every (id, token) whose record is `leased` or `committing` under that token; the
   * rest are lost. Each record file is fsynced as it is written, each affected shard directory
   * once at the end, in shard order, even when a later record failed. The first error thrown
   * (a record's or a directory's) propagates: a renewal is never acknowledged undurably.
   */
  heartbeatMany(tokens: ReadonlyMap<string, string>, now: number): { renewed: string[]; lost: string[] } {
    requireTime("now", now);
    this.stats.heartbeatBatches++;
    const renewed: string[] = [];
    const lost: string[] = [];
    const dirty = new Set<number>();
    let failure: { error: unknown } | null = null;
    try {
      for (const [id, token] of [...tokens].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
        if (!isId(id) || typeof token !== "string" || token === "" || !this.shardExists(id)) {
          lost.push(id);
          continue;
        }
        const ok = this.locked(id, () => {
          const found = this.read(id);
          if (found.kind !== "valid" || found.record.token !== token || found.record.status === "done") return false;
          this.write({ ...found.record, updated: now }, false, dirty);
          return true;
        });
        (ok ? renewed : lost).push(id);
      }
    } catch (error) {
      failure = { error };
    }
    for (const shard of [...dirty].sort((a, b) => a - b)) {
      try {
        this.syncDir(join(this.root, shardName(shard)));
      } catch (error) {
        failure ??= { error };
      }
    }
    if (failure !== null) throw failure.error;
    this.stats.renewals += renewed.length;
    return { renewed, lost };
  }

  /** Deletes a `leased` record held under `token` (e.g. its input vanished). Never once committing. */
  abandon(id: string, token: string): boolean {
    if (!isId(id) || !this.shardExists(id)) return false;
    return this.locked(id, () => {
      const found = this.read(id);
      if (found.kind !== "valid" || found.record.status !== "leased" || found.record.token !== token) return false;
      if (unlinkDurable(this.recordPath(id))) this.stats.directorySyncs++;
      return true;
    });
  }

  /**
   * Passes the commit fence: a `leased` or `committing` record held under `token` becomes
   * `committing` with `manifest` stored durably. From then on no claim takes it, however old.
   * Repeating it with the same token and an identical manifest succeeds; a different manifest
   * is refused.
   */
  beginCommit(id: string, token: string, manifest: CommitManifest, now: number): boolean {
    requireTime("now", now);
    const commit = canonicalManifest(manifest);
    if (!isId(id) || !this.shardExists(id)) return false;
    return this.locked(id, () => {
      const found = this.read(id);
      if (found.kind !== "valid" || found.record.token !== token) return false;
      const rec = found.record;
      if (rec.status === "done") return false;
      if (rec.status === "committing" && rec.commit !== undefined && serialize(rec.commit) !== serialize(commit)) return false;
      this.write({ ...rec, status: "committing", updated: now, commit }, commit.hashes.length > 0);
      return true;
    });
  }

  /** "completed": the record held under `token` is now done; "already": it was; "stale": not ours. */
  complete(id: string, token: string, now: number): CompletionResult {
    requireTime("now", now);
    if (!isId(id) || !this.shardExists(id)) return "stale";
    return this.locked(id, () => this.finish(id, token, now, null));
  }

  /**
   * Re-applies a commit that passed its fence but may not have finished: if the record is
   * `committing` under `token` with a manifest, calls `publish(manifest)` under the record lock,
   * then marks it done. "already" if it is done under `token` (publish is not called); "stale"
   * otherwise. If publish throws, the record stays `committing` and the error propagates.
   */
  replayCommit(id: string, token: string, publish: (m: CommitManifest) => void, now: number): CompletionResult {
    requireTime("now", now);
    if (!isId(id) || !this.shardExists(id)) return "stale";
    return this.locked(id, () => this.finish(id, token, now, publish));
  }

  /**
   * A result without children has nothing to publish, so its fence and its completion are one
   * step: a `leased` (or `committing`) record held under `token` becomes `done` with the empty
   * manifest. "already" if it is done under `token`; "stale" otherwise, or if `manifest` lists
   * children (those go through beginCommit and replayCommit).
   */
  commitEmpty(id: string, token: string, manifest: CommitManifest, now: number): CompletionResult {
    requireTime("now", now);
    const commit = canonicalManifest(manifest);
    if (commit.hashes.length > 0 || !isId(id) || !this.shardExists(id)) return "stale";
    return this.locked(id, () => {
      const found = this.read(id);
      if (found.kind !== "valid" || found.record.token !== token) return "stale";
      const rec = found.record;
      if (rec.status === "done") return "already";
      if (rec.status === "committing" && rec.commit !== undefined && serialize(rec.commit) !== serialize(commit)) return "stale";
      this.write({ ...rec, status: "done", updated: now, completed: now, commit });
      return "completed";
    });
  }

  /**
   * The `leased` records at least `ttlMs` old (every one when `ttlMs` is 0), oldest first, by
   * (updated, id), at most `limit`. Reads only; the caller claims each with the same ttl.
   * Throws CorruptRecordError, before returning anything, if any record is invalid.
   */
  recoverExpired(now: number, ttlMs: number, limit = Number.POSITIVE_INFINITY): { id: string; payload: WorkPayload; updated: number }[] {
    requireTime("now", now);
    requireTime("ttlMs", ttlMs);
    if (limit !== Number.POSITIVE_INFINITY && (!Number.isSafeInteger(limit) || limit < 0)) {
      throw new RangeError(`recoverExpired: limit must be an integer >= 0 (got ${limit})`);
    }
    return this.snapshot()
      .filter((r) => r.status === "leased" && isExpired(r, now, ttlMs))
      .slice(0, limit)
      .map((r) => ({ id: r.id, payload: r.payload, updated: r.updated }));
  }

  /** Every `committing` record with its manifest, for redo after a crash. Throws if one lacks a manifest. */
  recoverCommitting(): { id: string; payload: WorkPayload; token: string; commit: CommitManifest }[] {
    return this.snapshot()
      .filter((r) => r.status === "committing")
      .map((r) => {
        if (r.commit === undefined) throw new CorruptRecordError(this.recordPath(r.id), "committing without a commit manifest");
        return { id: r.id, payload: r.payload, token: r.token, commit: r.commit };
      });
  }

  /** Every record, by (updated, id). Throws CorruptRecordError on any invalid record. */
  snapshot(): LeaseRecord[] {
    const records: LeaseRecord[] = [];
    for (const entry of readdirSync(this.root, { withFileTypes: true })) {
      if (!SHARD_DIR.test(entry.name)) continue;
      const dir = join(this.root, entry.name);
      if (!entry.isDirectory()) throw new CorruptRecordError(dir, "a shard entry that is not a directory");
      for (const name of readdirSync(dir)) {
        const id = RECORD_FILE.exec(name)?.[1];
        if (id === undefined) continue;
        const path = join(dir, name);
        if (shardName(this.shardOf(id)) !== entry.name) throw new CorruptRecordError(path, `a record in the wrong shard (${entry.name})`);
        const found = this.read(id);
        if (found.kind === "invalid") throw new CorruptRecordError(path, found.reason);
        if (found.kind === "valid") records.push(found.record);
      }
    }
    return records.sort((a, b) => a.updated - b.updated || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** Disjoint counts: leased (unexpired), committing, expired (leased, at least ttlMs old), done. */
  counts(now: number, ttlMs: number): { leased: number; committing: number; expired: number; done: number } {
    requireTime("now", now);
    requireTime("ttlMs", ttlMs);
    const counts = { leased: 0, committing: 0, expired: 0, done: 0 };
    for (const r of this.snapshot()) {
      if (r.status === "leased") counts[isExpired(r, now, ttlMs) ? "expired" : "leased"]++;
      else counts[r.status]++;
    }
    return counts;
  }

  /** The record of `id`, null if there is none (or the id is invalid). Throws on a corrupt record. */
  record(id: string): LeaseRecord | null {
    if (!isId(id)) return null;
    const found = this.read(id);
    if (found.kind === "invalid") throw new CorruptRecordError(this.recordPath(id), found.reason);
    return found.kind === "valid" ? found.record : null;
  }

  private finish(id: string, token: string, now: number, publish: ((m: CommitManifest) => void) | null): CompletionResult {
    const found = this.read(id);
    if (found.kind !== "valid" || found.record.token !== token) return "stale";
    const rec = found.record;
    if (rec.status === "done") return "already";
    if (publish !== null) {
      if (rec.status !== "committing" || rec.commit === undefined) return "stale";
      publish(rec.commit);
    }
    this.write({ ...rec, status: "done", updated: now, completed: now });
    return "completed";
  }

  private locked<T>(id: string, fn: () => T): T {
    return withFileLock(`${this.recordPath(id)}.lock`, this.lockTimeoutMs, fn);
  }

  private read(id: string): ReadResult {
    const path = this.recordPath(id);
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

  /**
   * Writes a whole record atomically; fsyncs it, and its shard directory, unless the durability
   * policy says it may be redone. With `deferDirSync` the shard is added to that set instead, for
   * the caller to sync once for a whole batch.
   */
  private write(record: LeaseRecord, fence = false, deferDirSync?: Set<number>): void {
    const path = this.recordPath(record.id);
    if (this.durability === "fence" && !fence) {
      replaceFile(path, serialize(record));
      return;
    }
    replaceFileSynced(path, serialize(record));
    if (deferDirSync) deferDirSync.add(this.shardOf(record.id));
    else this.syncDir(join(this.root, shardName(this.shardOf(record.id))));
  }

  /** Overridable so that tests can inject a failing directory fsync (an OS fault). */
  protected syncDir(dir: string): void {
    fsyncDir(dir);
    this.stats.directorySyncs++;
  }

  /** Creates the shard directory on first use in this process, and makes its name durable. */
  private prepareShard(id: string): void {
    const shard = this.shardOf(id);
    if (this.readyShards.has(shard)) return;
    try {
      mkdirSync(join(this.root, shardName(shard)));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    // Synced even if another process created it: it may not have synced the root yet.
    this.syncDir(this.root);
    this.readyShards.add(shard);
  }

  /** Without its shard directory a record cannot exist; transitions then need no lock. */
  private shardExists(id: string): boolean {
    if (this.readyShards.has(this.shardOf(id))) return true;
    try {
      return lstatSync(join(this.root, shardName(this.shardOf(id)))).isDirectory();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw err;
    }
  }

  private shardOf(id: string): number {
    return Number.parseInt(id.slice(0, 8), 16) % this.shardCount;
  }

  private recordPath(id: string): string {
    return join(this.root, shardName(this.shardOf(id)), `${id}.json`);
  }
}

function recordProblem(v: unknown, id: string): string | null {
  if (!isPlainObject(v)) return "not a JSON object";
  const extra = Object.keys(v).filter((k) => !RECORD_KEYS.has(k));
  if (extra.length > 0) return `unknown keys ${extra.join(", ")}`;
  if (v.schema !== 1) return `schema ${JSON.stringify(v.schema)} is not 1`;
  if (v.id !== id) return `id ${JSON.stringify(v.id)} does not match the file name`;
  if (typeof v.status !== "string" || !STATUSES.includes(v.status)) return `status ${JSON.stringify(v.status)} is not leased, committing or done`;
  const p = v.payload;
  if (!isPlainObject(p) || Object.keys(p).sort().join(",") !== "hash,origin") return "payload must be exactly {hash, origin}";
  if (p.hash !== id) return `payload hash ${JSON.stringify(p.hash)} does not match the record id`;
  if (typeof p.origin !== "string" || !ORIGINS.includes(p.origin)) return `payload origin ${JSON.stringify(p.origin)} is not initial or generated`;
  if (typeof v.owner !== "string" || v.owner === "") return "owner must be a non-empty string";
  if (typeof v.previous_owner !== "string") return "previous_owner must be a string";
  if (!isCount(v.worker)) return "worker must be an integer >= 0";
  if (typeof v.token !== "string" || v.token === "") return "token must be a non-empty string";
  if (!isTime(v.updated)) return `updated ${JSON.stringify(v.updated)} is not a finite time >= 0`;
  if (!isCount(v.attempts) || v.attempts < 1) return "attempts must be an integer >= 1";
  if (!isCount(v.steals)) return "steals must be an integer >= 0";
  if (v.completed !== undefined && !isTime(v.completed)) return "completed must be a finite time >= 0";
  if (v.commit !== undefined) {
    const problem = manifestProblem(v.commit);
    if (problem !== null) return `commit manifest: ${problem}`;
    if (serialize(canonicalManifest(v.commit as CommitManifest)) !== serialize(v.commit)) return "commit manifest is not canonical";
  }
  return null;
}

/** Keys sorted at every level, compact, newline-terminated: the same record always gives the same bytes. */
function serialize(value: unknown): string {
  return `${JSON.stringify(sortKeys(value))}\n`;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) if (value[key] !== undefined) out[key] = sortKeys(value[key]);
  return out;
}

function isExpired(r: LeaseRecord, now: number, ttlMs: number): boolean {
  return ttlMs === 0 || now - r.updated >= ttlMs;
}

function requireTime(name: string, value: number): void {
  if (!isTime(value)) throw new RangeError(`${name} must be a finite number of milliseconds >= 0 (got ${value})`);
}

function isTime(v: unknown): v is number {
  return typeof v === "number" && Number.isFinite(v) && v >= 0;
}

function isId(id: unknown): id is string {
  return typeof id === "string" && HEX64.test(id);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function shardName(shard: number): string {
  return String(shard).padStart(3, "0");
}
