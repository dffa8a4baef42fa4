// One record of the fenced lease table (concolic-spec §4), as pure transitions: each takes the
// record as it was read under its lock (null when there is none) and returns the record to write,
// or why it refuses. The lease table (explore/state/lease-table.ts) owns the files, the locks and
// the durability; the clock and the fence are passed in.
//
//   (none)      --claim-->                         leased      fresh fence
//   leased      --claim, once expired-->           leased      new fence (ttl 0: unconditionally)
//   leased      --renew, same fence-->             leased      (a heartbeat; also committing)
//   leased      --abandon, same fence-->           (none)
//   leased      --beginCommit, same fence-->       committing  irreversible: never reclaimed, however old
//   committing  --beginCommit, same fence and manifest--> committing
//   leased | committing --complete, same fence-->  done        terminal: never claimed again
//   committing  --completeCommitted, same fence--> done        (the manifest's children published)
//   leased | committing --commitEmpty, same fence, no children--> done
//
// The fence is the one word for the fencing token: every claim issues a fresh one, and only the
// current fence may renew, commit or complete, so a holder that lost its lease and comes back
// late changes nothing. On disk (and only there) the record keeps it under its schema-1 key
// `token`. Misuse (a time that is not finite, a payload that is not the id's) is asserted; a
// refusal is an ordinary answer.
import assert from "node:assert/strict";
import { HEX64, isCount } from "./message-checks.ts";

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

/** A record exactly as it is stored (schema 1). */
export interface LeaseRecord {
  schema: 1;
  id: string;
  status: LeaseStatus;
  payload: WorkPayload;
  owner: string;
  previous_owner: string;
  worker: number;
  /** The fence of the current claim. */
  token: string;
  /** Wall-clock ms of the last claim, heartbeat, commit or completion. */
  updated: number;
  attempts: number;
  steals: number;
  commit?: CommitManifest;
  completed?: number;
}

/**
 * Why a transition changes nothing:
 *   held            an unexpired `leased` record (claim)
 *   committing      past its commit fence: never claimed, however old (claim)
 *   done            terminal (claim, renew, beginCommit; complete* and commitEmpty answer "already")
 *   stale           no record, or the fence is not the record's
 *   other-manifest  committing under another manifest (beginCommit, commitEmpty)
 *   not-committing  no commit manifest to replay (completeCommitted)
 *   not-leased      abandon of a record past its commit fence
 *   has-children    commitEmpty of a manifest that lists children
 */
export type Refusal = "held" | "committing" | "done" | "stale" | "other-manifest" | "not-committing" | "not-leased" | "has-children";

export type Transition = { next: LeaseRecord } | { refused: Refusal };

/** What claim() needs besides the record: who claims, when, and the fresh fence it issues. */
export interface ClaimRequest {
  id: string;
  payload: WorkPayload;
  owner: string;
  /** The claimant's worker number (a master's rank). */
  worker: number;
  fence: string;
  now: number;
  /** A `leased` record this old is expired; 0 takes any `leased` record over (forced takeover). */
  ttlMs: number;
}

const STAGING_ID = /^[0-9a-f]{32}$/;
const STATUSES: readonly string[] = ["leased", "committing", "done"];
const ORIGINS: readonly string[] = ["initial", "generated"];
const RECORD_KEYS = new Set(["schema", "id", "status", "payload", "owner", "previous_owner", "worker", "token", "updated", "attempts", "steals", "commit", "completed"]);
const MANIFEST_KEYS = ["hashes", "num_generated", "staging_id", "worker"];

/** A time or a duration in milliseconds: finite and >= 0. */
export function assertTime(name: string, value: number): void {
  assert.ok(isTime(value), `${name} must be a finite number of milliseconds >= 0 (got ${value})`);
}

/** The misuse checks of a claim, made before any file is touched. */
export function assertClaimRequest(c: Omit<ClaimRequest, "fence">): void {
  assertTime("now", c.now);
  assertTime("ttlMs", c.ttlMs);
  assert.ok(typeof c.owner === "string" && c.owner !== "", "claim: owner must be a non-empty string");
  assert.ok(Number.isSafeInteger(c.worker) && c.worker >= 0, `claim: worker must be an integer >= 0 (got ${c.worker})`);
  const p: unknown = c.payload;
  assert.ok(
    isPlainObject(p) && p.hash === c.id && ORIGINS.includes(p.origin as string),
    `claim: payload must be {hash: ${c.id}, origin: "initial" | "generated"} (got ${JSON.stringify(p)})`,
  );
}

export function isExpired(r: LeaseRecord, now: number, ttlMs: number): boolean {
  return ttlMs === 0 || now - r.updated >= ttlMs;
}

/** No record, or an expired `leased` one: a new claim with a fresh fence. */
export function claim(prev: LeaseRecord | null, c: ClaimRequest): Transition {
  assertClaimRequest(c);
  assert.ok(typeof c.fence === "string" && c.fence !== "", "claim: the fence must be a non-empty string");
  if (prev !== null) {
    assert.equal(prev.id, c.id, "claim: the record read is another task's");
    if (prev.status !== "leased") return { refused: prev.status };
    if (c.ttlMs > 0 && c.now - prev.updated < c.ttlMs) return { refused: "held" };
  }
  return {
    next: {
      schema: 1,
      id: c.id,
      status: "leased",
      payload: { hash: c.payload.hash, origin: c.payload.origin },
      owner: c.owner,
      previous_owner: prev?.owner ?? "",
      worker: c.worker,
      token: c.fence,
      updated: c.now,
      attempts: (prev?.attempts ?? 0) + 1,
      steals: (prev?.steals ?? 0) + (prev !== null && prev.owner !== c.owner ? 1 : 0),
    },
  };
}

/** A heartbeat: a `leased` or `committing` record under `fence` is dated `now`. */
export function renew(rec: LeaseRecord | null, fence: string, now: number): Transition {
  assertTime("now", now);
  if (rec === null || rec.token !== fence) return { refused: "stale" };
  if (rec.status === "done") return { refused: "done" };
  return { next: { ...rec, updated: now } };
}

/** Whether a record may be deleted by its holder: only `leased`, only under its fence. */
export function abandonable(rec: LeaseRecord | null, fence: string): Refusal | null {
  if (rec === null || rec.token !== fence) return "stale";
  return rec.status === "leased" ? null : "not-leased";
}

/**
 * The commit fence: a `leased` or `committing` record under `fence` becomes `committing` with the
 * canonical form of `manifest`. Repeating it with the same manifest succeeds; another is refused.
 */
export function beginCommit(rec: LeaseRecord | null, fence: string, manifest: CommitManifest, now: number): Transition {
  assertTime("now", now);
  const commit = canonicalManifest(manifest);
  if (rec === null || rec.token !== fence) return { refused: "stale" };
  if (rec.status === "done") return { refused: "done" };
  if (rec.status === "committing" && rec.commit !== undefined && !sameManifest(rec.commit, commit)) return { refused: "other-manifest" };
  return { next: { ...rec, status: "committing", updated: now, commit } };
}

/** A `leased` or `committing` record under `fence` becomes `done` (refused "done": it was already). */
export function complete(rec: LeaseRecord | null, fence: string, now: number): Transition {
  assertTime("now", now);
  if (rec === null || rec.token !== fence) return { refused: "stale" };
  if (rec.status === "done") return { refused: "done" };
  return { next: { ...rec, status: "done", updated: now, completed: now } };
}

/**
 * complete() of a record that passed its commit fence: only a `committing` record with a manifest
 * under `fence`; the caller publishes `next.commit` before it writes `next`.
 */
export function completeCommitted(rec: LeaseRecord | null, fence: string, now: number): Transition {
  const step = complete(rec, fence, now);
  if ("refused" in step) return step;
  if (rec!.status !== "committing" || rec!.commit === undefined) return { refused: "not-committing" };
  return step;
}

/**
 * A result without children has nothing to publish, so its fence and its completion are one
 * step: a `leased` (or `committing`, same manifest) record under `fence` becomes `done` with the
 * empty manifest. A manifest with children goes through beginCommit and completeCommitted.
 */
export function commitEmpty(rec: LeaseRecord | null, fence: string, manifest: CommitManifest, now: number): Transition {
  assertTime("now", now);
  const commit = canonicalManifest(manifest);
  if (commit.hashes.length > 0) return { refused: "has-children" };
  if (rec === null || rec.token !== fence) return { refused: "stale" };
  if (rec.status === "done") return { refused: "done" };
  if (rec.status === "committing" && rec.commit !== undefined && !sameManifest(rec.commit, commit)) return { refused: "other-manifest" };
  return { next: { ...rec, status: "done", updated: now, completed: now, commit } };
}

// ---- what a valid record is ---------------------------------------------------------------------

/**
 * The canonical form of a manifest: hashes deduplicated and sorted, keys in sorted order. Asserts
 * that `m` is a valid manifest: exactly its four keys, hashes of 64 lowercase hex, a staging id
 * of 32 lowercase hex (or "" exactly when there are no hashes), num_generated an integer >= the
 * number of unique hashes, a non-empty worker.
 */
export function canonicalManifest(m: CommitManifest): CommitManifest {
  const problem = manifestProblem(m);
  assert.ok(problem === null, `invalid commit manifest: ${problem}`);
  const hashes = [...new Set(m.hashes)].sort();
  return { hashes, num_generated: m.num_generated, staging_id: m.staging_id, worker: m.worker };
}

export function sameManifest(a: CommitManifest, b: CommitManifest): boolean {
  return recordText(a) === recordText(b);
}

/** Why `m` is not a valid manifest, or null. */
export function manifestProblem(m: unknown): string | null {
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

/** Why `v`, read from the file of record `id`, is not a valid record, or null. */
export function recordProblem(v: unknown, id: string): string | null {
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
    if (recordText(canonicalManifest(v.commit as CommitManifest)) !== recordText(v.commit)) return "commit manifest is not canonical";
  }
  return null;
}

/** Keys sorted at every level, compact, newline-terminated: the same record always gives the same bytes. */
export function recordText(value: unknown): string {
  return `${JSON.stringify(sortKeys(value))}\n`;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) if (value[key] !== undefined) out[key] = sortKeys(value[key]);
  return out;
}

function isTime(v: unknown): v is number {
  return typeof v === "number" && Number.isFinite(v) && v >= 0;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
