// Every frame of the wire, as strict schemas (docs/protocol.md documents each one). A frame
// that does not match its schema exactly — unknown type, a missing or an extra field, a wrong
// type — is refused with the reason, and the connection is closed.
import { z } from "zod";
import { printable } from "../core/log-lines.ts";
import { HEX64 } from "../core/message-checks.ts";

/**
 * 2: sweep workers also run minimize units (assign's `minimize`, reported by `done` under their wire ids).
 * 3: a worker says whether it sees the shared directory (prove's `shared_dir`); one that does not
 * gets the transfer terms in `welcome` and sends a unit's files in `put` frames before its `done`.
 */
export const PROTOCOL_VERSION = 3;

const id = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const seed = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const text = (max: number) => z.string().max(max);
const token = text(256);
const seconds = z.number().min(0).max(1e9);
/** The most file bytes a `put` may carry: its base64 and JSON stay well under the 4 MiB frame cap. */
export const PUT_PIECE_MAX = 2 << 20;

/**
 * Chunk ids and minimize unit ids are separate sequences; on the wire (the ids a heartbeat lists,
 * the `chunk_id` of a `done`) a minimize unit is MINIMIZE_ID_BASE + its id, above any chunk id.
 */
export const MINIMIZE_ID_BASE = 2 ** 52;

export function minimizeWireId(unitId: number): number {
  return MINIMIZE_ID_BASE + unitId;
}

/** A held id from the wire, as what it names: a chunk or a minimize unit. */
export function heldUnit(wireId: number): { kind: "chunk"; chunkId: number } | { kind: "minimize"; unitId: number } {
  return wireId >= MINIMIZE_ID_BASE ? { kind: "minimize", unitId: wireId - MINIMIZE_ID_BASE } : { kind: "chunk", chunkId: wireId };
}

// ---- first frames (client -> server) ---------------------------------------------------------

export const Hello = z.strictObject({
  type: z.literal("hello"),
  token,
  protocol: z.number().int(),
  host: text(255).min(1),
  jobs: z.number().int().min(1).max(1024),
  slots: z.number().int().min(1).max(64),
});

export const StatusRequest = z.strictObject({
  type: z.literal("status"),
  token,
  json: z.boolean(),
});

export const FailuresRequest = z.strictObject({
  type: z.literal("failures"),
  token,
  state: z.enum(["open", "fixed", "stale", "all"]),
  bucket: text(64).nullable(),
  all_generations: z.boolean(),
  verbose: z.boolean(),
  lines: z.number().int().min(1).max(100_000),
  json: z.boolean(),
});

// ---- handshake (server -> worker, worker -> server) ------------------------------------------

/** What the worker must prove it sees: the same nonce and the same generator and app files. */
export const Challenge = z.strictObject({
  type: z.literal("challenge"),
  nonce_path: text(4096),
  identity: z
    .strictObject({
      command: z.array(text(65536)).max(4096),
      files: z.array(text(4096)).max(4096),
      base_dir: text(4096),
    })
    .nullable(),
  app_path: text(4096).nullable(),
});

export const Prove = z.strictObject({
  type: z.literal("prove"),
  nonce: text(256).nullable(),
  gen_hash: text(128).nullable(),
  app_build: text(128).nullable(),
  /** Why a value is null (the file could not be read), for the refusal message. */
  problem: text(2000).nullable(),
  /**
   * Whether the worker read the nonce, so works in the shared directory; false: it does not see
   * that directory, hashed the identity files below its own working directory, and sends its
   * units' files over the connection. Absent means true (a master joining its root sends it too).
   */
  shared_dir: z.boolean().optional(),
});

/** How a worker without the shared directory sends a unit's files: where they lie and the caps. */
export const TransferTerms = z.strictObject({
  /** The results directory below a chunk's {out}, "/"-separated ("" when it is {out} itself). */
  results: text(4096),
  /** A unit's files may number at most this many, weigh at most max_bytes, each at most max_file_bytes. */
  max_files: z.number().int().min(0).max(10_000_000),
  max_bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  max_file_bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  /** The most file bytes one `put` carries. */
  piece_bytes: z.number().int().min(1).max(PUT_PIECE_MAX),
});
export type TransferTermsT = z.infer<typeof TransferTerms>;

/** What an explore worker needs to run tasks; null for sweeps. */
export const ExploreSetup = z.strictObject({
  corpus_dir: text(4096),
  /** This worker's staging directory: stages go to <stage_root>/<staging_id>/. */
  stage_root: text(4096),
  target: z.array(text(65536)).min(1).max(4096),
  target_cwd: text(4096),
  /** The build the master runs (explore/state/target-identity.ts): a worker that sees another refuses to serve. */
  target_build: text(64),
  /** The --target-file paths hashed into it, as given (relative to target_cwd). */
  target_files: z.array(text(4096)).max(1024),
  simulate: z.boolean(),
  max_children: z.number().int().min(1).max(1_000_000),
  max_result_bytes: z.number().int().min(1),
  max_input_bytes: z.number().int().min(1),
});
export type ExploreSetupT = z.infer<typeof ExploreSetup>;

export const Welcome = z.strictObject({
  type: z.literal("welcome"),
  worker_id: id,
  session: id,
  /** The campaign kind the port serves (WorkProtocol.campaign). */
  mode: z.enum(["sweep", "explore"]),
  lease_seconds: seconds,
  heartbeat_seconds: seconds,
  generation: id,
  explore: ExploreSetup.nullable(),
  /** Present (and not null) when the worker does not see the shared directory: how its files travel. */
  transfer: TransferTerms.nullable().optional(),
});

export const Refuse = z.strictObject({ type: z.literal("refuse"), reason: text(8192) });

// ---- sweep work ------------------------------------------------------------------------------

export const Want = z.strictObject({ type: z.literal("want"), slots: z.number().int().min(1).max(64) });

/** How a worker runs a unit (a chunk or a minimize unit): the command filled in, where, and its bounds. */
const HOW_TO_RUN = {
  argv: z.array(text(65536)).min(1).max(4096),
  cwd: text(4096),
  log_path: text(4096),
  scratch_dir: text(4096),
  hard_timeout: seconds,
  nice: z.number().int().min(0).max(19),
  idle_io: z.boolean(),
};

export const AssignedChunk = z.strictObject({
  chunk_id: id,
  lane: text(64),
  seed_from: seed,
  seed_to: seed,
  ...HOW_TO_RUN,
});
export type AssignedChunk = z.infer<typeof AssignedChunk>;

/**
 * A minimize unit: `[generator] minimize` over a few finds pending minimization of one lane. It
 * is held like a chunk (heartbeated, reported once by a `done`), under its wire id
 * minimizeWireId(unit_id), so one worker's chunks and units never share an id.
 */
export const AssignedMinimize = z.strictObject({
  unit_id: id.max(MINIMIZE_ID_BASE - 1),
  lane: text(64),
  seeds: z.array(seed).min(1).max(10_000),
  ...HOW_TO_RUN,
});
export type AssignedMinimize = z.infer<typeof AssignedMinimize>;

/** Chunks and minimize units for a worker; `minimize` absent means none (a coordinator with no minimizer). */
export const Assign = z
  .strictObject({ type: z.literal("assign"), chunks: z.array(AssignedChunk).max(64), minimize: z.array(AssignedMinimize).max(64).optional() })
  .refine((a) => a.chunks.length + (a.minimize?.length ?? 0) >= 1 && a.chunks.length + (a.minimize?.length ?? 0) <= 64, {
    message: "an assign carries 1 to 64 units (chunks and minimize units together)",
  });
export const Wait = z.strictObject({ type: z.literal("wait"), seconds });
export const Drain = z.strictObject({ type: z.literal("drain"), reason: text(200) });

export const Heartbeat = z.strictObject({ type: z.literal("heartbeat"), ids: z.array(id).max(64) });

export const ChunkOutcome = z.enum(["complete", "timeout", "interrupted", "error"]);

/**
 * What a worker without the shared directory sent of a unit before its `done`: how many files and
 * bytes (each file in `put` frames), and what the run left in its {out}: nothing, {out} without the
 * results directory, or the results directory. Absent: a worker in the shared directory.
 */
export const SentFiles = z.strictObject({
  count: z.number().int().min(0).max(10_000_000),
  bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  wrote: z.enum(["nothing", "out", "results"]),
});
export type SentFilesT = z.infer<typeof SentFiles>;

export const Done = z.strictObject({
  type: z.literal("done"),
  chunk_id: id,
  elapsed: seconds,
  rc: z.number().int().min(-1).max(255).nullable(),
  outcome: ChunkOutcome,
  error: text(2000).nullable(),
  files: SentFiles.nullable().optional(),
});

/**
 * One piece of one file of a unit held by a worker without the shared directory (`unit`: its wire
 * id, as in a heartbeat). A file's pieces come in order, one file after another; `path` is relative
 * to the unit's {out}, "/"-separated; `sha256` comes with the last piece (offset + its bytes =
 * size). Answered by `ack` like a heartbeat (`known`: the ids still held); it renews the leases of
 * everything the worker holds, so a long transfer never starves the heartbeats.
 */
export const Put = z.strictObject({
  type: z.literal("put"),
  unit: id,
  path: text(4096).min(1),
  size: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  /** Base64 of at most PUT_PIECE_MAX bytes. */
  data: z.string().max(Math.ceil(PUT_PIECE_MAX / 3) * 4),
  sha256: z.string().regex(HEX64, "a 64-character lowercase hex SHA-256").nullable(),
});
export type PutFrame = z.infer<typeof Put>;

export const Ack = z.strictObject({
  type: z.literal("ack"),
  drain: z.boolean(),
  /** Reply to a heartbeat: the ids still held by this worker. */
  known: z.array(id).max(64).nullable(),
  /** Reply to a done: what the coordinator made of it. */
  note: text(200).nullable(),
});

// ---- explore work ----------------------------------------------------------------------------

const hash = z.string().regex(HEX64, "a 64-character lowercase hex SHA-256");

export const TaskItem = z.strictObject({
  task_id: id,
  hash,
  /** The lease token this task was dispatched under; echoed in the result. */
  fence: text(512),
  timeout: seconds,
});
export type TaskItemT = z.infer<typeof TaskItem>;

export const Task = z.strictObject({ type: z.literal("task"), tasks: z.array(TaskItem).min(1).max(64) });

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

// ---- shutdown --------------------------------------------------------------------------------

export const Stop = z.strictObject({ type: z.literal("stop"), token: text(128) });
export const StopAck = z.strictObject({ type: z.literal("stop_ack"), token: text(128) });
export const Bye = z.strictObject({ type: z.literal("bye"), reason: text(500) });

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

// ---- read-only replies -----------------------------------------------------------------------

export const TextReply = z.strictObject({ type: z.literal("text"), text: z.string() });
export const JsonReply = z.strictObject({ type: z.literal("json"), data: z.unknown() });

// ---- what each side accepts ------------------------------------------------------------------

/** The first frame of any connection to a coordinator. */
export const FirstFrame = z.discriminatedUnion("type", [Hello, StatusRequest, FailuresRequest, PeerHello]);
/** Frames a worker may send after the handshake. */
export const WorkerFrame = z.discriminatedUnion("type", [Want, Heartbeat, Done, Result, StopAck, Bye]);
/** What a worker may send after the handshake to a campaign that takes files over the connection (a sweep). */
export const WorkerFrameOrPut = z.discriminatedUnion("type", [Want, Heartbeat, Done, Result, StopAck, Bye, Put]);
/** Frames a coordinator may send to a worker in reply to a request. */
export const CoordinatorReply = z.discriminatedUnion("type", [Assign, Task, Wait, Drain, Ack, Stop, Bye, Refuse]);
export const HandshakeReply = z.discriminatedUnion("type", [Challenge, Welcome, Refuse]);
export const ReadReply = z.discriminatedUnion("type", [TextReply, JsonReply, Refuse]);

export type HelloFrame = z.infer<typeof Hello>;
export type FirstFrameT = z.infer<typeof FirstFrame>;
export type WorkerFrameT = z.infer<typeof WorkerFrame>;
export type WorkerFrameOrPutT = z.infer<typeof WorkerFrameOrPut>;
export type CoordinatorReplyT = z.infer<typeof CoordinatorReply>;
export type ChallengeFrame = z.infer<typeof Challenge>;
export type ProveFrame = z.infer<typeof Prove>;
export type WelcomeFrame = z.infer<typeof Welcome>;
export type FailuresRequestFrame = z.infer<typeof FailuresRequest>;
export type PeerHelloFrame = z.infer<typeof PeerHello>;

/** Validates `value` against `schema`; returns the frame or a one-line reason. */
export function check<T>(schema: z.ZodType<T>, value: unknown): { ok: true; frame: T } | { ok: false; reason: string } {
  const r = schema.safeParse(value);
  if (r.success) return { ok: true, frame: r.data };
  const issue = r.error.issues[0]!;
  // The type, the field names and the path are the peer's text: shown escaped and cut.
  const rawType = (value as { type?: unknown })?.type;
  const type = typeof rawType === "string" ? printable(rawType, { max: 64 }) : "?";
  if (issue.code === "invalid_union" && issue.path.length === 1 && issue.path[0] === "type") {
    return { ok: false, reason: `unknown frame type '${type}'` };
  }
  if (issue.code === "unrecognized_keys") {
    return { ok: false, reason: `frame '${type}': unexpected field(s) ${printable(issue.keys.join(", "), { max: 200 })}` };
  }
  const where = issue.path.length ? printable(issue.path.join("."), { max: 200 }) : "(frame)";
  return { ok: false, reason: `frame '${type}': ${where}: ${printable(issue.message, { max: 300 })}` };
}

/** Every frame either side may send. */
export type Frame =
  | z.infer<typeof Hello>
  | z.infer<typeof StatusRequest>
  | z.infer<typeof FailuresRequest>
  | z.infer<typeof Challenge>
  | z.infer<typeof Prove>
  | z.infer<typeof Welcome>
  | z.infer<typeof Refuse>
  | z.infer<typeof Want>
  | z.infer<typeof Assign>
  | z.infer<typeof Wait>
  | z.infer<typeof Drain>
  | z.infer<typeof Heartbeat>
  | z.infer<typeof Done>
  | z.infer<typeof Put>
  | z.infer<typeof Task>
  | z.infer<typeof Result>
  | z.infer<typeof Ack>
  | z.infer<typeof Stop>
  | z.infer<typeof StopAck>
  | z.infer<typeof Bye>
  | z.infer<typeof TextReply>
  | z.infer<typeof JsonReply>
  | z.infer<typeof PeerHello>
  | z.infer<typeof Roster>
  | z.infer<typeof PeerStatus>
  | z.infer<typeof Probe>
  | z.infer<typeof Vote>
  | z.infer<typeof Decision>
  | z.infer<typeof CommitAck>
  | z.infer<typeof Stats>
  | z.infer<typeof StatsAck>
  | z.infer<typeof Release>
  | z.infer<typeof Abandon>;
