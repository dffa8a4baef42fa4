// One failure entry of a generator's results (failures/<name>/), read and validated: its
// meta.json against the contract's schema (size-capped, never through a symlink), its seed
// checked against what the unit was given, its dedup key hashed from the key file, and its
// signature. A string is the reason the entry is malformed.
import { z } from "zod";
import { FileProblem } from "../../files/file-problem.ts";
import type { PinnedDir } from "../../files/pinned-dir.ts";
import type { TreeFile, TreeNode } from "../../files/tree.ts";
import { findSignature, SIGNATURE_MAX_CHARS } from "../../store/signature.ts";
import { hashScanned, pickKeyFile, readScanned } from "./ingest-files.ts";

const META_MAX_BYTES = 1 << 20;
const KEY_FILE_MAX_BYTES = 256 << 20;
const MESSAGE_MAX_CHARS = 2000;

const metaSchema = z.object({
  seed: z.number().int().refine(Number.isSafeInteger, "a safe integer"),
  bucket: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]*$/, "letters, digits and _ . : - only"),
  shrunk: z.boolean().optional(),
  msg: z.string().optional(),
  repro: z.string().optional(),
  signature: z.string().min(1).max(SIGNATURE_MAX_CHARS).optional(),
  key_file: z
    .string()
    .regex(/^[^/\\\0]+$/, "a file name inside the failure directory")
    .refine((n) => n !== "." && n !== "..", "a file name inside the failure directory")
    .optional(),
});

export interface ParsedFailure {
  seed: number;
  bucket: string;
  shrunk: boolean;
  msg: string | null;
  repro: string | null;
  dedupKey: string;
  signature: string;
}

export function readFailureEntry(entry: PinnedDir, nodes: readonly TreeNode[], seedProblem: (seed: number) => string | null): ParsedFailure | string {
  const top = new Map<string, TreeFile>();
  for (const n of nodes) if (n.kind === "file") top.set(n.name, n);
  let metaBytes: Buffer;
  try {
    metaBytes = readScanned(entry, "meta.json", META_MAX_BYTES, top);
  } catch (err) {
    if (err instanceof FileProblem) return problemReason(err);
    throw err;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(metaBytes.toString("utf8"));
  } catch (err) {
    return `meta.json: not JSON (${(err as Error).message})`;
  }
  const meta = metaSchema.safeParse(raw);
  if (!meta.success) {
    const issue = meta.error.issues[0]!;
    return `meta.json: ${issue.path.join(".") || "(root)"}: ${issue.message}`;
  }
  const m = meta.data;
  const misplaced = seedProblem(m.seed);
  if (misplaced !== null) return misplaced;
  // Without a minimized input the key would be the bucket alone, merging unrelated findings.
  const keyName = m.key_file ?? pickKeyFile([...top.keys()]);
  if (keyName === null) return "no minimized input: set key_file or write input.min.* / input.*";
  let dedupKey: string;
  try {
    dedupKey = hashScanned(entry, keyName, KEY_FILE_MAX_BYTES, top, m.bucket + "\n");
  } catch (err) {
    if (err instanceof FileProblem) return problemReason(err);
    throw err;
  }
  const msg = m.msg === undefined ? null : m.msg.slice(0, MESSAGE_MAX_CHARS);
  return {
    seed: m.seed,
    bucket: m.bucket,
    shrunk: m.shrunk ?? true,
    msg,
    repro: m.repro === undefined ? null : m.repro.slice(0, MESSAGE_MAX_CHARS),
    dedupKey,
    signature: findSignature(m.bucket, msg, m.signature ?? null),
  };
}

/** A problem found inside an entry, named relative to it: "report.txt: a symbolic link …". */
export function problemReason(p: FileProblem): string {
  return p.path === "" ? p.detail : `${p.path}: ${p.detail}`;
}
