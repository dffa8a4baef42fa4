// The sweep's frames: chunks and minimize units assigned, and their `done` reports (with the
// account of the files a worker without the shared directory sent before it).
import { z } from "zod";
import { id, seconds, seed, text } from "./frames-common.ts";


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
