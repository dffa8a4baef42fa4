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
// Every change of the file's content is exclusive, so that racing processes cannot both win: the
// line, its reading and the claims that serialise each change are lock-file.ts.
import { mkdirSync, utimesSync } from "node:fs";
import { hostname as osHostname } from "node:os";
import { join } from "node:path";
import { RefusedError, RuntimeFailure } from "../errors.ts";
import { createExclusive, formatLockLine, isPidAlive, parseLockLine, readLockFile, readRaw, replaceContent, sleepSync, type LockFile, type ReplaceOutcome } from "./lock-file.ts";
import { formatDuration } from "../config/duration.ts";

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
/** How long acquire/release keep retrying while another process holds a claim. */
const CONTENTION_WAIT_MS = 3_000;
const CONTENTION_POLL_MS = 15;

export function lockPath(outDir: string): string {
  return join(outDir, LOCK_FILE);
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
