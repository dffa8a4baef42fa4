// Explore's frames: tasks and their results between a master and its workers, and the frames
// of the masters among themselves (join, roster, quiescence, statistics).
import { z } from "zod";
import { HEX64 } from "../core/message-checks.ts";
import { Challenge, hash, id, Refuse, seconds, text, token } from "./frames-common.ts";

// ---- explore work ----------------------------------------------------------------------------

/** The most input bytes a task carries inline; a larger input is fetched piece by piece (`fetch`). */
export const INLINE_INPUT_MAX = 64 << 10;
/** The most input bytes one `task` frame carries inline, all its tasks together (its base64 stays under the frame cap). */
export const INLINE_FRAME_MAX = 1 << 20;
/** The most input bytes one `piece` carries. */
export const PIECE_MAX = 1 << 20;

export const TaskItem = z.strictObject({
  task_id: id,
  hash,
  /** The lease token this task was dispatched under; echoed in the result. */
  fence: text(512),
  timeout: seconds,
  /**
   * For a worker without the shared directory: the input's size, and its bytes (base64) when they
   * travel inline; `data` null means the worker fetches them (`fetch`). Absent for a shared worker.
   */
  input: z.strictObject({ size: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER), data: z.string().max(Math.ceil(INLINE_INPUT_MAX / 3) * 4).nullable() }).optional(),
});
export type TaskItemT = z.infer<typeof TaskItem>;

export const Task = z.strictObject({ type: z.literal("task"), tasks: z.array(TaskItem).min(1).max(64) });

/** A worker without the shared directory asks for the bytes of a task's input from `offset` on (answered by `piece`, or `refuse`). */
export const Fetch = z.strictObject({ type: z.literal("fetch"), task_id: id, offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER) });
export type FetchFrame = z.infer<typeof Fetch>;

/** Bytes of a task's input from `offset` (base64 of at most PIECE_MAX bytes); `size` is the whole input's. An empty `data` before `size` means the task is no longer held. */
export const Piece = z.strictObject({
  type: z.literal("piece"),
  task_id: id,
  offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  size: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  data: z.string().max(Math.ceil(PIECE_MAX / 3) * 4),
});
export type PieceFrame = z.infer<typeof Piece>;

export const ProtocolErrorKind = z.enum(["", "input-copy-error", "input-budget-exceeded", "result-budget-exceeded", "execution-error", "corpus-publication", "interrupted"]);

/** How a target run that is a finding ended (a crash or a hang), as a worker saw it. */
export const RunFinding = z.strictObject({
  kind: z.enum(["crash", "hang"]),
  signal: z.number().int().min(0).max(128).nullable(),
  exit_code: z.number().int().min(0).max(255).nullable(),
  stderr_tail: text(4096),
});

export const Result = z.strictObject({
  type: z.literal("result"),
  task_id: id,
  fence: text(512),
  /** SHA-256 of the bytes the worker actually executed (recomputed while copying). */
  input_hash: hash.nullable(),
  /** One entry per child file, duplicates allowed. */
  new_hashes: z.array(hash).max(1_000_000),
  num_generated: z.number().int().min(0),
  staged_bytes: z.number().int().min(0),
  /** 32 lowercase hex when there are children, "" when there are none. */
  staging_id: z.string().regex(/^([0-9a-f]{32})?$/, "32 lowercase hex characters or empty"),
  retcode: z.number().int().min(-1).max(255).nullable(),
  elapsed: seconds,
  protocol_error: ProtocolErrorKind,
  budget: z.strictObject({ resource: text(32), observed: z.number().min(0), limit: z.number().min(0) }).nullable(),
  detail: text(2000).nullable(),
  /** Set when the run crashed or hung the target; the master records the finding. */
  finding: RunFinding.nullable().optional(),
});
export type ResultFrame = z.infer<typeof Result>;
// ---- master <-> master (explore with several masters) -------------------------------------------

const token64 = z.string().regex(HEX64, "64 lowercase hex characters");
const rank = z.number().int().min(0).max(4095);

/** First frame of a submaster's connection to the root. `setup` must equal the root's. */
export const PeerHello = z.strictObject({
  type: z.literal("peer_hello"),
  token,
  protocol: z.number().int(),
  host: text(255).min(1),
  /** SHA-256 of the campaign setup (corpus, inputs, target, timeouts, budgets, ownership). */
  setup: token64,
  setup_text: text(65536),
  /** The master rank a launched submaster asks for (its launcher rank); the root grants or refuses it. */
  rank: rank.optional(),
});

/** Sent by the root once every master joined: the campaign is on. */
export const Roster = z.strictObject({
  type: z.literal("roster"),
  epoch: token64,
  rank,
  ranks: z.array(rank).min(1).max(4096),
});

export const PeerStatus = z.strictObject({ type: z.literal("status"), rank, sequence: z.number().int().min(1), idle: z.boolean() });
export const Probe = z.strictObject({ type: z.literal("probe"), token: token64 });
export const Vote = z.strictObject({ type: z.literal("vote"), rank, token: token64, idle: z.boolean() });
export const Decision = z.strictObject({ type: z.enum(["commit", "abort"]), token: token64 });
export const CommitAck = z.strictObject({ type: z.literal("commit_ack"), rank, token: token64, committed: z.boolean() });
const count = z.number().int().min(0);
export const Stats = z.strictObject({
  type: z.literal("stats"),
  rank,
  token: token64,
  observations: count,
  generated: count,
  interesting: count,
  external: count,
  late: count,
  local_slots: count,
  remote_workers: count,
});
export const StatsAck = z.strictObject({ type: z.literal("stats_ack"), rank, token: token64 });
/** The root's end of the final rendezvous: the shared state is settled, submasters may exit. */
export const Release = z.strictObject({ type: z.literal("release"), token: token64 });
/** Either side gives up on the campaign (the reason is reported by rank). */
export const Abandon = z.strictObject({ type: z.literal("abandon"), rank, reason: text(2000) });

/** What the root receives from a submaster after the handshake. */
export const FromPeer = z.discriminatedUnion("type", [PeerStatus, Vote, CommitAck, Stats, Abandon]);
/** What a submaster receives from the root. */
export const FromRoot = z.discriminatedUnion("type", [Roster, PeerStatus, Probe, Decision, StatsAck, Release, Abandon, Refuse, Challenge]);
export type FromPeerT = z.infer<typeof FromPeer>;
export type FromRootT = z.infer<typeof FromRoot>;
