// The campaign lock's file (campaign-lock.ts decides who may hold it): its one line
// `HOST PID ISO-START MODE PORT|-`, reading it, whether a pid of this host is alive, and how its
// content changes so that racing processes cannot both win:
//   absent -> ours        hard-link a complete temp file to the lock path (fails if it exists,
//                         and readers never see a half-written line, unlike open O_EXCL + write);
//   content X -> Y|gone   first create the claim file `fuzzfleet.lock.claim-<sha256(X)>` the same
//                         way, re-read the lock, and only if it still holds X rename Y over it (or
//                         unlink it). Reclaim, forced takeover, setPort and release all go this way,
//                         so two processes replacing the same content serialise on one claim.
// A claim lives for milliseconds. One left by a dead process of this host, or older than
// CLAIM_ABANDONED_MS, is itself replaced through a claim on its own content. The file steps
// themselves (create by link, replace by rename) are files/atomic-write.ts's.
import { createHash } from "node:crypto";
import { readFileSync, rmSync, statSync, unlinkSync } from "node:fs";
import { RuntimeFailure } from "../errors.ts";
import { createFileOnce, replaceFile } from "../files/atomic-write.ts";

const CLAIM_ABANDONED_MS = 60_000;

/** The claim that must be held to change a lock (or claim) file whose content is `content`. */
export function claimPathFor(file: string, content: string): string {
  return `${file}.claim-${createHash("sha256").update(content).digest("hex").slice(0, 16)}`;
}

export type LockFile = { kind: "absent" } | { kind: "unreadable"; code: string } | { kind: "present"; raw: string; mtimeMs: number };

export function readLockFile(file: string): LockFile {
  try {
    const mtimeMs = statSync(file).mtimeMs;
    return { kind: "present", raw: readFileSync(file, "utf8"), mtimeMs };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "EIO";
    return code === "ENOENT" ? { kind: "absent" } : { kind: "unreadable", code };
  }
}

export function readRaw(file: string): string | null {
  const f = readLockFile(file);
  return f.kind === "present" ? f.raw : null;
}

export interface LockLine {
  host: string;
  pid: number;
  started: string;
  command: string;
  port: number | null;
}

export function parseLockLine(raw: string): LockLine | null {
  const fields = raw.trim().split(/\s+/);
  if (fields.length < 4) return null;
  const [host, pidText, started, command, portText] = fields;
  if (!/^[0-9]+$/.test(pidText)) return null;
  const pid = Number(pidText);
  if (!Number.isSafeInteger(pid) || pid <= 0) return null;
  const port = portText !== undefined && /^[0-9]+$/.test(portText) && Number(portText) > 0 ? Number(portText) : null;
  return { host, pid, started, command, port };
}

export function formatLockLine(host: string, pid: number, command: string, port: number | null): string {
  const started = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  return `${host} ${pid} ${started} ${command} ${port !== null && port > 0 ? port : "-"}\n`;
}

/** Whether `pid` names a running process on this host. EPERM means it exists; a zombie has exited. */
export function isPidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name in parentheses may contain spaces or parentheses; the state follows the last ")".
    const state = stat.slice(stat.lastIndexOf(")") + 2).charAt(0);
    if (state === "Z" || state === "X") return false;
  } catch {
    // No /proc (or hidden pids): signal 0 is the best answer available.
  }
  return true;
}

export function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Creates `file` holding `content`, atomically and only if it does not exist. */
export function createExclusive(file: string, content: string): boolean {
  try {
    return createFileOnce(file, content, { mode: 0o666, sync: false });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).syscall !== "link") throw err;
    throw new RuntimeFailure(
      `cannot create ${file}: hard-linking a temp file failed (${(err as NodeJS.ErrnoException).code}); the campaign lock needs a ` +
        `filesystem with hard links (any local POSIX filesystem or NFS).`,
      { cause: err },
    );
  }
}

function replaceWith(file: string, content: string): void {
  replaceFile(file, content, 0o666);
}

function claimAbandoned(claim: LockFile & { kind: "present" }, host: string): boolean {
  const line = parseLockLine(claim.raw);
  if (line !== null && line.host === host && !isPidAlive(line.pid)) return true;
  return Date.now() - claim.mtimeMs > CLAIM_ABANDONED_MS;
}

export type ReplaceOutcome = "done" | "changed" | "busy";

/**
 * Changes `file` from `expected` to `next` (null: delete it), exclusively with respect to every
 * other process changing it from `expected`. "changed": the file no longer held `expected`;
 * "busy": another process holds the claim, try again shortly.
 */
export function replaceContent(file: string, expected: string, next: string | null, host: string, depth = 0): ReplaceOutcome {
  const claim = claimPathFor(file, expected);
  const claimLine = formatLockLine(host, process.pid, "claim", null);
  if (!createExclusive(claim, claimLine)) {
    const existing = readLockFile(claim);
    if (existing.kind !== "present" || depth >= 2 || !claimAbandoned(existing, host)) return "busy";
    if (replaceContent(claim, existing.raw, claimLine, host, depth + 1) !== "done") return "busy";
  }
  try {
    if (readRaw(file) !== expected) return "changed";
    if (next === null) unlinkSync(file);
    else replaceWith(file, next);
    return "done";
  } finally {
    rmSync(claim, { force: true });
  }
}
