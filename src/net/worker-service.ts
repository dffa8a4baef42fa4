// The worker service of a command that serves workers — a sweep's `coordinate` and an explore
// master with --port — in one wording: the nonce file workers read back, listening (a failure
// names the address and the fix), the join banner (where it listens, a loopback warning, where the
// token came from, the worker's command line) and the words for how the stop of the workers ended.
// The token itself is net/token.ts's (serverToken); the connections are the worker server's.
//
//   nonce written -> listen -> banner -> serve (the command's) -> stop with the grace -> outcome
//   words -> nonce removed
import { closeSync, constants, fchmodSync, openSync, rmSync, unlinkSync, writeSync } from "node:fs";
import { isIP, type AddressInfo } from "node:net";
import { hostname } from "node:os";
import type { StopOutcome } from "../core/lifecycle.ts";
import { formatDuration } from "../config/duration.ts";
import { RuntimeFailure } from "../errors.ts";
import { randomHex } from "../util/random-hex.ts";
import type { FoundToken } from "./token.ts";

/** How long workers have to acknowledge the stop unless configured (the sweep's [distributed] stop_grace_seconds default). */
export const DEFAULT_STOP_GRACE_SECONDS = 15;

/** A value workers must read back from the shared directory to prove they see it. */
export interface Nonce {
  path: string;
  value: string;
}

/**
 * Writes a fresh nonce to `path`, mode 0600, replacing what a crashed run left there but never
 * writing through a symbolic link planted at the name.
 */
export function writeNonce(path: string): Nonce {
  const value = randomHex(16);
  let fd: number;
  try {
    // Whatever holds the name (an earlier nonce, a hard link, a FIFO, a symlink) is unlinked, never
    // opened: the nonce is always a new file, so nothing is written through and nothing blocks.
    unlinkIfPresent(path);
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === "EISDIR" || code === "EPERM"
        ? "a directory holds its name: remove it"
        : code === "EEXIST"
          ? "another process created it meanwhile: is another coordinator or master using this directory?"
          : `${code ?? (err as Error).message}: check the directory's permissions`;
    throw new RuntimeFailure(`cannot write the nonce file ${path} (${why})`, { cause: err });
  }
  try {
    fchmodSync(fd, 0o600);
    writeSync(fd, value + "\n");
  } finally {
    closeSync(fd);
  }
  return { path, value };
}

function unlinkIfPresent(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

export function removeNonce(nonce: Nonce | null): void {
  if (nonce) rmSync(nonce.path, { force: true });
}

/** What listens: the worker server (through its campaign protocol). */
export interface Listener {
  listen(bind: string, port: number): Promise<AddressInfo>;
}

/** How the command's user changes the address, for the error and the loopback warning. */
export interface AddressFlags {
  /** e.g. `--port` or `--port (or [distributed] port)`. */
  port: string;
  bind: string;
}

export interface Listening {
  /** The address bound. */
  address: string;
  port: number;
  /** The address workers are told to dial: the --bind name when one was given, else the address bound. */
  shown: string;
  /** Whether --bind (or the default) was a host name rather than an address. */
  boundByName: boolean;
}

/** Listens on bind:port; a failure is a RuntimeFailure that names the address and what to change. */
export async function listenForWorkers(server: Listener, bind: string, port: number, flags: AddressFlags): Promise<Listening> {
  let addr: AddressInfo;
  try {
    addr = await server.listen(bind, port);
  } catch (err) {
    throw new RuntimeFailure(listenFailure(err as NodeJS.ErrnoException, bind, port, flags), { cause: err });
  }
  const boundByName = isIP(bind) === 0;
  return { address: addr.address, port: addr.port, shown: boundByName ? bind : addr.address, boundByName };
}

function listenFailure(err: NodeJS.ErrnoException, bind: string, port: number, flags: AddressFlags): string {
  const where = `could not listen on ${bind}:${port}`;
  switch (err.code) {
    case "EADDRINUSE":
      return `${where}: the port is in use (another coordinator or explore master, or another program); pass another ${flags.port}, or 0 for a free one`;
    case "EACCES":
      return `${where}: permission denied (ports below 1024 need privileges); pass ${flags.port} 1024 or above, or 0 for a free one`;
    case "EADDRNOTAVAIL":
      return `${where}: ${bind} is not an address of this host; pass ${flags.bind} with one of its addresses`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `${where}: the name '${bind}' does not resolve here; pass ${flags.bind} with this host's address`;
    default:
      return `${where} — ${err.message}`;
  }
}

export interface BannerOptions {
  token: FoundToken;
  /** The worker reads this token file by itself (a sweep's campaign directory): no flag for it. */
  tokenFileIsWorkersDefault: boolean;
  /** What follows the address on the worker's command line (` -j 1`), if anything. */
  workerArgs?: string;
  /** Said after the worker's command line, in parentheses. */
  workerNote?: string;
  /** The service answers `status --master`. */
  answersStatus: boolean;
  flags: AddressFlags;
}

/** The join banner in two parts, so a command may put its own lines between them. */
export interface JoinBanner {
  /** Where it listens, a warning when that is a loopback address, where the token came from. */
  listening: string[];
  /** The worker's command and, where the service answers status, how to watch it. */
  commands: string[];
}

/**
 * The lines that tell how to join. The secret is never shown unless --token put it on a command
 * line already; continuation lines are indented by three spaces.
 */
export function joinBanner(l: Listening, b: BannerOptions): JoinBanner {
  const listening = [`listening on ${l.address}:${l.port} (${hostname()})`];
  if (l.address.startsWith("127.") || l.address === "::1") {
    listening.push("!! that is a LOOPBACK address — workers on other hosts cannot reach it.");
    listening.push(`   Pass ${b.flags.bind} with this host's LAN address.`);
    if (l.boundByName) listening.push("   (Debian and Ubuntu map the host name to 127.0.1.1 in /etc/hosts: the usual cause.)");
  }
  listening.push(`token from ${b.token.source}`);
  const notes: string[] = [];
  if (b.workerNote !== undefined) notes.push(b.workerNote);
  if (b.token.source === "FUZZFLEET_TOKEN") notes.push(ENV_TOKEN_NOTE);
  const master = `${l.shown}:${l.port}`;
  const commands = [`start workers:  fuzzfleet worker --master ${master}${workerTokenFlag(b.token, b.tokenFileIsWorkersDefault)}${b.workerArgs ?? ""}${notes.length ? `  (${notes.join("; ")})` : ""}`];
  if (b.answersStatus) commands.push(`watch it:       fuzzfleet status --master ${master}`);
  return { listening, commands };
}

/** What someone joining a master whose token came from the environment needs. */
export const ENV_TOKEN_NOTE = "with this master's FUZZFLEET_TOKEN in the environment";

/** What a worker adds to its command line to get the token: never the secret, unless --token gave it. */
export function workerTokenFlag(token: FoundToken, fileIsDefault: boolean): string {
  if (token.source === "--token") return ` --token ${token.token}`;
  if (token.file !== null && !fileIsDefault) return ` --token-file ${token.file}`;
  return "";
}

/** How the stop of the workers ended, in words: a summary line (null when nobody was asked), and one problem per worker that did not acknowledge. */
export interface StopWords {
  summary: string | null;
  problems: string[];
}

export function stopOutcomeWords(outcome: StopOutcome, graceSeconds: number): StopWords {
  const problems = [
    ...outcome.pending.map((n) => `worker ${n} did not acknowledge the stop within ${graceText(graceSeconds)}`),
    ...outcome.gone.map((g) => `worker ${g.name} left before acknowledging the stop (${g.why})`),
  ];
  const asked = outcome.acked.length + problems.length;
  if (asked === 0) return { summary: null, problems };
  const summary = problems.length === 0 ? `all ${asked} worker(s) acknowledged the stop` : `${outcome.acked.length} of ${asked} worker(s) acknowledged the stop`;
  return { summary, problems };
}

/** A grace as configured: whole seconds as a duration (15s, 2m00s), a fraction as given (0.5s). */
export function graceText(seconds: number): string {
  return Number.isInteger(seconds) ? formatDuration(seconds) : `${seconds}s`;
}
