// What a worker without the shared directory sends of a unit it ran in its own scratch directory:
// the regular files below the results' failures/ and quarantine/ (the outbox, checked against the
// coordinator's caps before a byte is sent), read piece by piece into `put` frames, each file's
// SHA-256 computed as it is read and sent with its last piece. One piece is in memory at a time,
// whatever a file weighs. Symbolic links and other non-regular entries are never followed or sent.
// An explore run's children, when they are few bytes, are read straight into memory instead
// (holdOutputs: one read per child, no stage directory to make, read back and remove per task)
// and sent from there.
import { createHash } from "node:crypto";
import { closeSync, constants, lstatSync, openSync, readdirSync, readSync } from "node:fs";
import { join } from "node:path";
import { formatInt } from "../config/format.ts";
import type { PutFrame, SentFilesT, TransferTermsT } from "../net/messages.ts";
import { FileProblem, type Budgets } from "../explore/state/corpus.ts";
import { openRegular, streamOpened } from "../explore/state/stable-read.ts";
import { BudgetError, type CollectedOutputs } from "../explore/state/staging.ts";
import { randomHex } from "../util/random-hex.ts";

/** Deepest a sent file may lie below {out} (the coordinator refuses deeper). */
const MAX_DEPTH = 32;

export interface OutboxFile {
  /** "/"-separated, relative to the unit's {out}. */
  rel: string;
  /** Where it is read from, unless it is held in memory (`bytes`). */
  abs: string;
  size: number;
  /** The file's bytes, when a small result was kept in memory instead of written to disk. */
  bytes?: Buffer;
}

export interface Outbox {
  files: OutboxFile[];
  bytes: number;
  wrote: SentFilesT["wrote"];
  /** Entries left behind (links, devices, too deep), for the worker's line. */
  skipped: number;
}

/**
 * The files of a unit that ran in `scratch`, below `results` ("" or "a/b", relative to it) and
 * then `kinds` (failures, quarantine). Returns why they cannot be sent when they break a cap.
 */
export function collectOutbox(scratch: string, results: string, kinds: readonly string[], terms: TransferTermsT): { outbox: Outbox } | { over: string } {
  const base = results === "" ? [] : results.split("/");
  const outbox: Outbox = { files: [], bytes: 0, wrote: "nothing", skipped: 0 };
  if (!isDir(scratch)) return { outbox };
  outbox.wrote = isDir(join(scratch, ...base)) ? "results" : "out";
  if (outbox.wrote === "out") return { outbox };
  const walk = (parts: string[]): string | null => {
    const dir = join(scratch, ...parts);
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return null;
    }
    for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const next = [...parts, e.name];
      if (e.isDirectory() && next.length < MAX_DEPTH) {
        const over = walk(next);
        if (over !== null) return over;
      } else if (e.isFile() && next.length <= MAX_DEPTH) {
        const size = lstatSync(join(dir, e.name)).size;
        if (outbox.files.length + 1 > terms.max_files) return `more than ${formatInt(terms.max_files)} files ([distributed] transfer_max_files on the coordinator)`;
        if (size > terms.max_file_bytes) return `${next.join("/")} holds ${formatInt(size)} bytes, over ${formatInt(terms.max_file_bytes)} ([distributed] transfer_max_file_mib on the coordinator)`;
        if (outbox.bytes + size > terms.max_bytes) return `more than ${formatInt(terms.max_bytes)} bytes ([distributed] transfer_max_mib on the coordinator)`;
        outbox.files.push({ rel: next.join("/"), abs: join(dir, e.name), size });
        outbox.bytes += size;
      } else {
        outbox.skipped++;
      }
    }
    return null;
  };
  for (const kind of kinds) {
    const over = walk([...base, kind]);
    if (over !== null) return { over: `the unit's results cannot be sent: ${over}; raise the cap or make the generator keep less` };
  }
  return { outbox };
}

function isDir(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The `put` frames of an outbox, one piece at a time. Throws when a file cannot be read as it was
 * listed (gone, replaced, shorter): the caller stops sending, and the unit's account then falls
 * short, so the coordinator books nothing of it.
 */
export async function* putFrames(unit: number, outbox: Outbox, pieceBytes: number): AsyncGenerator<PutFrame> {
  const pieceMax = Math.max(1, pieceBytes);
  // Sized by the largest file read from disk, not by the piece: a fresh MiB per unit of small
  // files kept the garbage collector busy.
  let buf: Buffer | null = null;
  for (const file of outbox.files) {
    if (file.bytes !== undefined) {
      yield* heldFrames(unit, file, file.bytes, pieceMax);
      continue;
    }
    if (buf === null || buf.length < Math.min(pieceMax, file.size)) buf = Buffer.allocUnsafe(Math.max(1, Math.min(pieceMax, file.size)));
    // Read in place, not in libuv's pool: a piece is at most 1 MiB, and a hop through the pool per
    // open, read and close costs a small file more than its bytes on a busy host.
    const fd = openSync(file.abs, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const hash = createHash("sha256");
      let offset = 0;
      do {
        const want = Math.min(buf.length, file.size - offset);
        const bytesRead = want > 0 ? readSync(fd, buf, 0, want, offset) : 0;
        if (bytesRead !== want) throw new Error(`${file.rel} changed while it was sent`);
        const piece = buf.subarray(0, bytesRead);
        hash.update(piece);
        const last = offset + bytesRead === file.size;
        yield { type: "put", unit, path: file.rel, size: file.size, offset, data: piece.toString("base64"), sha256: last ? hash.digest("hex") : null };
        offset += bytesRead;
      } while (offset < file.size);
    } finally {
      closeSync(fd);
    }
  }
}

function* heldFrames(unit: number, file: OutboxFile, bytes: Buffer, pieceBytes: number): Generator<PutFrame> {
  const hash = createHash("sha256");
  let offset = 0;
  do {
    const piece = bytes.subarray(offset, offset + pieceBytes);
    hash.update(piece);
    const last = offset + piece.length === bytes.length;
    yield { type: "put", unit, path: file.rel, size: bytes.length, offset, data: piece.toString("base64"), sha256: last ? hash.digest("hex") : null };
    offset += piece.length;
  } while (offset < bytes.length);
}

/** The children of one run, held in memory under their hash names (a stage that never touched a disk). */
export interface HeldStage {
  stageId: string;
  hashes: string[];
  stagedBytes: number;
  /** One entry per distinct child. */
  files: Map<string, Buffer>;
}

/**
 * Reads a run's outputs into memory, each hashed as it is read, with the checks stageOutputs makes
 * while it copies (a regular file, never through a symlink, within the budgets even if it grew
 * since it was listed). Only for results small enough to hold: the caller stages larger ones on disk.
 */
export function holdOutputs(outputs: CollectedOutputs, budgets: Budgets): HeldStage {
  if (outputs.files.length > budgets.maxChildren) throw new BudgetError("objects", outputs.files.length, budgets.maxChildren);
  if (outputs.totalBytes > budgets.maxResultBytes) throw new BudgetError("bytes", outputs.totalBytes, budgets.maxResultBytes);
  const held: HeldStage = { stageId: randomHex(16), hashes: [], stagedBytes: 0, files: new Map() };
  for (const file of outputs.files) {
    const room = budgets.maxResultBytes - held.stagedBytes;
    const limit = Math.min(budgets.maxInputBytes, room);
    let opened;
    try {
      opened = openRegular(file.path, limit);
    } catch (err) {
      if (err instanceof FileProblem && err.problem === "too-large" && err.observed !== undefined) {
        throw room < budgets.maxInputBytes ? new BudgetError("bytes", held.stagedBytes + err.observed, budgets.maxResultBytes) : new BudgetError("input-bytes", err.observed, budgets.maxInputBytes);
      }
      throw err;
    }
    const bytes = Buffer.allocUnsafe(opened.identity.size);
    let at = 0;
    let hash: string;
    try {
      hash = streamOpened(file.path, opened, (chunk) => {
        chunk.copy(bytes, at);
        at += chunk.length;
      });
    } finally {
      closeSync(opened.fd);
    }
    if (!held.files.has(hash)) held.files.set(hash, bytes);
    held.hashes.push(hash);
    held.stagedBytes += bytes.length;
  }
  return held;
}
