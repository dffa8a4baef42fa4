// The wire's common ground: the protocol version, the value shapes every frame is built of, and
// the frames both campaign kinds exchange (the first frames, the handshake, the pull of work, a
// unit's files in `put` frames, the shutdown, the read-only replies). The sweep's frames are in
// frames-sweep.ts, explore's in frames-explore.ts; net/messages.ts is the one entry point.
import { z } from "zod";
import { HEX64 } from "../core/message-checks.ts";

/**
 * 2: sweep workers also run minimize units (assign's `minimize`, reported by `done` under their wire ids).
 * 3: a worker says whether it sees the shared directory (prove's `shared_dir`); one that does not
 * gets the transfer terms in `welcome` and sends a unit's files in `put` frames before its `done`.
 * 4: explore takes workers without the shared directory: the master checks the target build at the
 *   handshake (challenge's `target`, prove's `target_build`), a task's input travels inline or in
 *   `fetch`/`piece` frames, and the children travel back in `put` frames before the `result`.
 */
export const PROTOCOL_VERSION = 4;

export const id = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
export const seed = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
export const text = (max: number) => z.string().max(max);
export const token = text(256);
export const seconds = z.number().min(0).max(1e9);
export const hash = z.string().regex(HEX64, "a 64-character lowercase hex SHA-256");
/** The most file bytes a `put` may carry: its base64 and JSON stay well under the 4 MiB frame cap. */
export const PUT_PIECE_MAX = 2 << 20;

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
  /**
   * Explore: the target whose build the worker must prove it runs (explore/state/target-identity.ts):
   * the argv template, the master's working directory for it, the --target-file paths as given, and
   * whether the campaign is simulated. Absent for sweeps.
   */
  target: z
    .strictObject({
      argv: z.array(text(65536)).min(1).max(4096),
      cwd: text(4096),
      files: z.array(text(4096)).max(1024),
      simulate: z.boolean(),
    })
    .nullable()
    .optional(),
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
  /** Explore: the target build the worker runs (from the shared directory, or from its own working directory and PATH); null when unreadable (see problem). */
  target_build: text(64).nullable().optional(),
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
export type RefuseFrame = z.infer<typeof Refuse>;

// ---- pulling work (both kinds) ---------------------------------------------------------------

export const Want = z.strictObject({ type: z.literal("want"), slots: z.number().int().min(1).max(64) });
export const Wait = z.strictObject({ type: z.literal("wait"), seconds });
export const Drain = z.strictObject({ type: z.literal("drain"), reason: text(200) });

export const Heartbeat = z.strictObject({ type: z.literal("heartbeat"), ids: z.array(id).max(64) });

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

// ---- shutdown --------------------------------------------------------------------------------

export const Stop = z.strictObject({ type: z.literal("stop"), token: text(128) });
export const StopAck = z.strictObject({ type: z.literal("stop_ack"), token: text(128) });
export const Bye = z.strictObject({ type: z.literal("bye"), reason: text(500) });

// ---- read-only replies -----------------------------------------------------------------------

export const TextReply = z.strictObject({ type: z.literal("text"), text: z.string() });
export const JsonReply = z.strictObject({ type: z.literal("json"), data: z.unknown() });
