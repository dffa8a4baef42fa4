// The campaign lock: one file, `<out>/fuzzfleet.lock`, that keeps two writers off one store.
// The store may sit on NFS and be shared by several hosts, so the lock is hostname-aware:
//
//   line      `HOST PID ISO-START MODE PORT|-\n`; the mtime is a heartbeat, touched every 30 s.
//   live      a lock naming another host is always live, however old: this host cannot judge
//             another host's pids, and a wrong guess lets two coordinators write one store.
//             A lock naming this host is live while its pid is (a zombie counts as dead), except
//             one naming this very process that this process does not hold: it was left by an
//             earlier process that had the same pid (a restarted container's pid 1).
//   reclaim   a dead same-host lock, or a malformed one, is replaced without asking;
//             a live one only with --force-unlock.
//
// Every change of the file's content is exclusive, so that racing processes cannot both win:
//   absent -> ours        hard-link a complete temp file to the lock path (fails if it exists,
//                         and readers never see a half-written line, unlike open O_EXCL + write);
//   content X -> Y|gone   first create the claim file `fuzzfleet.lock.claim-<sha256(X)>` the same
//                         way, re-read the lock, and only if it still holds X rename Y over it (or
//                         unlink it). Reclaim, forced takeover, setPort and release all go this way,
//                         so two processes replacing the same content serialise on one claim.
// A claim lives for milliseconds. One left by a dead process of this host, or older than
// CLAIM_ABANDONED_MS, is itself replaced through a claim on its own content.
import { createHash } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { hostname as osHostname } from "node:os";
import { join } from "node:path";
import { RefusedError, RuntimeFailure } from "../errors.ts";
import { formatDuration } from "../config/duration.ts";
import { randomHex } from "../util/random-hex.ts";

/** The command that holds the lock (the fourth field of its line). */
export type LockCommand = "run" | "coordinate" | "resweep" | "reset" | "explore";

export interface LockHolder {
  host: string;
  pid: number;
  started: string;
  command: LockCommand | string;
  port: number | null;
  /** Seconds since the file's mtime, i.e. since the holder's last heartbeat. */
  ageSeconds: number;
  /** The lock names this host. */
  local: boolean;
}

export interface AcquireOptions {
  command: LockCommand;
  port?: number | null;
  forceUnlock?: boolean;
  /** Defaults to os.hostname(). */
  hostname?: string;
  /** Defaults to 30000. */
  heartbeatMs?: number;
  /** Receives the --force-unlock takeover notice. Defaults to stderr. */
  log?: (line: string) => void;
}

const LOCK_FILE = "fuzzfleet.lock";
const HEARTBEAT_MS = 30_000;
/** A remote lock untouched for longer than this (ten missed heartbeats) probably has no owner. */
const REMOTE_PROBABLY_GONE_SECONDS = 300;
const CLAIM_ABANDONED_MS = 60_000;
/** How long acquire/release keep retrying while another process holds a claim. */
const CONTENTION_WAIT_MS = 3_000;
const CONTENTION_POLL_MS = 15;

export function lockPath(outDir: string): string {
  return join(outDir, LOCK_FILE);
}

/** The claim that must be held to change a lock (or claim) file whose content is `content`. */
export function claimPathFor(file: string, content: string): string {
  return `${file}.claim-${createHash("sha256").update(content).digest("hex").slice(0, 16)}`;
}

type LockFile = { kind: "absent" } | { kind: "unreadable"; code: string } | { kind: "present"; raw: string; mtimeMs: number };

function readLockFile(file: string): LockFile {
  try {
    const mtimeMs = statSync(file).mtimeMs;
    return { kind: "present", raw: readFileSync(file, "utf8"), mtimeMs };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "EIO";
    return code === "ENOENT" ? { kind: "absent" } : { kind: "unreadable", code };
  }
}

function readRaw(file: string): string | null {
  const f = readLockFile(file);
  return f.kind === "present" ? f.raw : null;
}

interface LockLine {
  host: string;
  pid: number;
  started: string;
  command: string;
  port: number | null;
}

function parseLockLine(raw: string): LockLine | null {
  const fields = raw.trim().split(/\s+/);
  if (fields.length < 4) return null;
  const [host, pidText, started, command, portText] = fields;
  if (!/^[0-9]+$/.test(pidText)) return null;
  const pid = Number(pidText);
  if (!Number.isSafeInteger(pid) || pid <= 0) return null;
  const port = portText !== undefined && /^[0-9]+$/.test(portText) && Number(portText) > 0 ? Number(portText) : null;
  return { host, pid, started, command, port };
}

function formatLockLine(host: string, pid: number, command: string, port: number | null): string {
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

function thisHost(hostname: string | undefined): string {
  // A hostname is one field of the lock line.
  return (hostname ?? osHostname()).replace(/\s+/g, "_") || "localhost";
}

/** The lock files this process holds now (a lock naming this pid and not among them is a leftover). */
const heldHere = new Set<string>();

function holderFrom(file: LockFile, host: string, path: string): LockHolder | null {
  if (file.kind !== "present") return null;
  const line = parseLockLine(file.raw);
  if (line === null) return null;
  const local = line.host === host;
  if (local && !isPidAlive(line.pid)) return null;
  if (local && line.pid === process.pid && !heldHere.has(path)) return null;
  const ageSeconds = Math.max(0, Math.floor((Date.now() - file.mtimeMs) / 1000));
  return { ...line, ageSeconds, local };
}

/**
 * Reads the lock. Never deletes. Returns null when there is no file, the file is unreadable or
 * malformed (fewer than 4 fields, non-integer pid), or it names this host and a pid that is not
 * alive (a dead same-host lock is reclaimable). A lock naming another host is always returned,
 * however old.
 */
export function readLock(outDir: string, opts: { hostname?: string } = {}): LockHolder | null {
  const path = lockPath(outDir);
  return holderFrom(readLockFile(path), thisHost(opts.hostname), path);
}

/** A lock's age: formatDuration's form, with days for a lock left behind long ago. */
function formatAge(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 86400) return formatDuration(s);
  return `${Math.floor(s / 86400)}d${String(Math.floor(s / 3600) % 24).padStart(2, "0")}h`;
}

/** What the holder is doing, in words: campaigns run for hours, resweep and reset are one-off commands. */
function holderActivity(command: string): string {
  switch (command) {
    case "run":
    case "coordinate":
    case "explore":
      return `${/^[aeiou]/i.test(command) ? "an" : "a"} ${command} campaign`;
    case "resweep":
    case "reset":
      return `a ${command}`;
    default:
      return `a fuzzfleet '${command}'`;
  }
}

export function describeHolder(h: LockHolder): string {
  const where = h.local ? "on this host" : `on host ${h.host}`;
  const port = h.port === null ? "" : `, ${h.command === "coordinate" || h.command === "explore" ? "coordinating" : "serving"} on port ${h.port}`;
  return `${holderActivity(h.command)} is running ${where} (pid ${h.pid}, started ${h.started}${port}; lock touched ${formatAge(h.ageSeconds)} ago)`;
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function tempPathFor(file: string): string {
  return `${file}.tmp-${process.pid}-${randomHex(6)}`;
}

/** Creates `file` holding `content`, atomically and only if it does not exist. */
function createExclusive(file: string, content: string): boolean {
  const tmp = tempPathFor(file);
  writeFileSync(tmp, content, { flag: "wx" });
  try {
    linkSync(tmp, file);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false;
    throw new RuntimeFailure(
      `cannot create ${file}: hard-linking a temp file failed (${code}); the campaign lock needs a ` +
        `filesystem with hard links (any local POSIX filesystem or NFS).`,
      { cause: err },
    );
  } finally {
    rmSync(tmp, { force: true });
  }
}

function replaceWith(file: string, content: string): void {
  const tmp = tempPathFor(file);
  try {
    writeFileSync(tmp, content, { flag: "wx" });
    renameSync(tmp, file);
  } finally {
    rmSync(tmp, { force: true });
  }
}

function claimAbandoned(claim: LockFile & { kind: "present" }, host: string): boolean {
  const line = parseLockLine(claim.raw);
  if (line !== null && line.host === host && !isPidAlive(line.pid)) return true;
  return Date.now() - claim.mtimeMs > CLAIM_ABANDONED_MS;
}

type ReplaceOutcome = "done" | "changed" | "busy";

/**
 * Changes `file` from `expected` to `next` (null: delete it), exclusively with respect to every
 * other process changing it from `expected`. "changed": the file no longer held `expected`;
 * "busy": another process holds the claim, try again shortly.
 */
function replaceContent(file: string, expected: string, next: string | null, host: string, depth = 0): ReplaceOutcome {
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

function refusal(holder: LockHolder, file: string): RefusedError {
  const who = holder.local ? `pid ${holder.pid} on this host` : `pid ${holder.pid} on ${holder.host}`;
  const hint =
    !holder.local && holder.ageSeconds > REMOTE_PROBABLY_GONE_SECONDS
      ? `  Its lock has not been touched for ${formatAge(holder.ageSeconds)}, so its owner is probably gone. ` +
        `A lock held by another host is never reclaimed automatically; once you are sure ${who} is dead, ` +
        `rerun with --force-unlock.`
      : `  Wait for it to finish, or rerun with --force-unlock if you know ${who} is dead.`;
  return new RefusedError(`${describeHolder(holder)}\n${hint}\n  (${file})`);
}

export class CampaignLock {
  readonly path: string;
  readonly #outDir: string;
  readonly #host: string;
  #line: string;
  #timer: NodeJS.Timeout | null = null;
  #released = false;

  private constructor(outDir: string, host: string, line: string) {
    this.path = lockPath(outDir);
    this.#outDir = outDir;
    this.#host = host;
    this.#line = line;
  }

  /** Takes the lock for `outDir` (created if missing) or throws RefusedError naming the holder. */
  static acquire(outDir: string, opts: AcquireOptions): CampaignLock {
    mkdirSync(outDir, { recursive: true });
    const host = thisHost(opts.hostname);
    const file = lockPath(outDir);
    const line = formatLockLine(host, process.pid, opts.command, opts.port ?? null);
    const log = opts.log ?? ((text: string) => process.stderr.write(`${text}\n`));
    // --force-unlock applies to the holder the user saw, not to whoever wins a race meanwhile.
    let forcedContent: string | null = null;
    const deadline = Date.now() + CONTENTION_WAIT_MS;
    while (true) {
      const current = readLockFile(file);
      if (current.kind === "unreadable") {
        throw new RefusedError(`cannot read the campaign lock ${file} (${current.code}); fix its permissions or remove it.`);
      }
      let outcome: ReplaceOutcome | "lost";
      if (current.kind === "absent") {
        outcome = createExclusive(file, line) ? "done" : "lost";
      } else {
        const holder = holderFrom(current, host, file);
        if (holder !== null) {
          if (!opts.forceUnlock || (forcedContent !== null && forcedContent !== current.raw)) throw refusal(holder, file);
          if (forcedContent === null) {
            log(`--force-unlock: taking over the lock from ${holder.host} (pid ${holder.pid})`);
            forcedContent = current.raw;
          }
        }
        outcome = replaceContent(file, current.raw, line, host);
      }
      if (outcome === "done" && readRaw(file) === line) {
        const lock = new CampaignLock(outDir, host, line);
        heldHere.add(file);
        lock.#startHeartbeat(opts.heartbeatMs ?? HEARTBEAT_MS);
        return lock;
      }
      if (Date.now() > deadline) {
        throw new RefusedError(
          `other processes kept changing the campaign lock ${file} for ${CONTENTION_WAIT_MS / 1000} s ` +
            `(see the ${LOCK_FILE}.claim-* files beside it); try again.`,
        );
      }
      if (outcome === "busy") sleepSync(CONTENTION_POLL_MS);
    }
  }

  /** Records the port a server actually listens on (after binding --port 0). */
  setPort(port: number): void {
    if (this.#released) throw new RuntimeFailure(`setPort(${port}) on the released campaign lock ${this.path}`);
    const fields = this.#line.trim().split(" ");
    const next = `${fields.slice(0, 4).join(" ")} ${port > 0 ? port : "-"}\n`;
    const outcome = this.#change(next);
    if (outcome === "busy") {
      throw new RuntimeFailure(`cannot record port ${port} in ${this.path}: another process kept a claim on it; try again.`);
    }
    if (outcome === "changed") {
      const holder = readLock(this.#outDir, { hostname: this.#host });
      const by = holder === null ? "removed" : `taken over: ${describeHolder(holder)}`;
      throw new RefusedError(`the campaign lock ${this.path} is no longer ours (it was ${by}); stop this campaign.`);
    }
    this.#line = next;
  }

  /** Stops the heartbeat and deletes the file if it is still ours. Idempotent; never throws. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    heldHere.delete(this.path);
    this.#stopHeartbeat();
    try {
      this.#change(null);
    } catch {
      // Called from finally blocks: a lock left behind is reported by the next acquire.
    }
  }

  #change(next: string | null): ReplaceOutcome {
    const deadline = Date.now() + CONTENTION_WAIT_MS;
    while (true) {
      const outcome = replaceContent(this.path, this.#line, next, this.#host);
      if (outcome !== "busy" || Date.now() > deadline) return outcome;
      sleepSync(CONTENTION_POLL_MS);
    }
  }

  #startHeartbeat(ms: number): void {
    this.#timer = setInterval(() => {
      try {
        if (readRaw(this.path) !== this.#line) return this.#stopHeartbeat();
        const now = new Date();
        utimesSync(this.path, now, now);
      } catch {
        this.#stopHeartbeat();
      }
    }, ms);
    this.#timer.unref();
  }

  #stopHeartbeat(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }
}

/** Read commands that can ask a running coordinator instead of the store. */
const HAS_MASTER_FLAG: ReadonlySet<string> = new Set(["status", "failures"]);

/**
 * For status, failures and export without --master: returns if there is no live lock or it is
 * this host's (reading beside a local campaign is fine), otherwise throws RefusedError saying
 * where to run `what` instead. Only status and failures have a --master form to suggest.
 */
export function refuseIfRemoteCampaign(outDir: string, what: string, opts: { hostname?: string } = {}): void {
  const holder = readLock(outDir, opts);
  if (holder === null || holder.local) return;
  let advice: string;
  if (holder.command === "coordinate" && holder.port !== null && HAS_MASTER_FLAG.has(what)) {
    advice = `  Ask the coordinator instead:  fuzzfleet ${what} --master ${holder.host}:${holder.port}`;
  } else if (HAS_MASTER_FLAG.has(what)) {
    advice = `  That host's campaign owns this store; run 'fuzzfleet ${what}' there.`;
  } else {
    advice = `  That host's campaign owns this store, and '${what}' cannot ask it remotely: run 'fuzzfleet ${what}' on ${holder.host}, or here once that campaign ends.`;
  }
  throw new RefusedError(`${describeHolder(holder)}\n${advice}\n  (${lockPath(outDir)})`);
}
