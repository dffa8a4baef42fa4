// The campaign token: the shared secret on the first frame of every connection, and the one
// place every command gets it from (coordinate, worker, status/failures --master, explore).
//
// Resolution: --token, else --token-file FILE, else $FUZZFLEET_TOKEN, else the campaign's own
// file `<dir>/fuzzfleet.token` (a sweep's --out directory; an explore campaign's
// CORPUS_DIR/.fuzzfleet). Rules, the same for every source (docs/distributed.md):
// - a token is 8 to 256 visible ASCII characters; whitespace around it (a file's final newline)
//   is not part of it; anything else is refused, an empty or blank FUZZFLEET_TOKEN included;
// - a token file is read only if it is a regular file reached without a symlink, owned by this
//   user, with no permission for group or others, and at most MAX_FILE_BYTES long;
// - only servers (a coordinator, an explore master that serves) create the file: mode 0600 under
//   a temporary name (O_EXCL | O_NOFOLLOW), then hard-linked into place, so no reader ever sees it
//   half written and an existing file or link at the name is never replaced or followed;
// - a file named with --token-file is the user's: read, never created nor removed (a missing one
//   is refused, for servers and clients alike: a typo must not start a campaign under a new secret).
// --token puts the secret on the command line, where any local user can read it (`ps`); every
// command that takes it also takes --token-file, and its help says so.
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { formatDuration } from "../config/duration.ts";
import { RefusedError, RuntimeFailure, UsageError } from "../errors.ts";
import { FileProblem } from "../files/file-problem.ts";
import { problemCode, readSmallFile } from "../files/small-file.ts";
import { createFileOnce } from "../files/atomic-write.ts";
import { WakeablePause } from "../util/pause.ts";
import { randomHex } from "../util/random-hex.ts";

export const TOKEN_FILE_NAME = "fuzzfleet.token";
const MIN_CHARS = 8;
const MAX_CHARS = 256;
/** A token file holds one token and a newline; anything longer is not a token file. */
const MAX_FILE_BYTES = 1024;
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;
/** How often a waiting client looks for the file again. */
const POLL_MS = 250;

export function tokenPath(dir: string): string {
  return join(dir, TOKEN_FILE_NAME);
}

export interface TokenSource {
  /** --token. */
  flag?: string | undefined;
  /** --token-file: read the token from this file instead of the campaign's own. */
  file?: string | undefined;
  env?: NodeJS.ProcessEnv;
  /** The campaign directory that holds `fuzzfleet.token`. */
  outDir: string;
  /** The user a token file must belong to (default: this process's effective uid). */
  uid?: number;
}

export interface FoundToken {
  token: string;
  /** Where it came from, for banners: `--token`, `FUZZFLEET_TOKEN`, the file's path (`… (new)`). */
  source: string;
  /** The file it was read from or written to; null when it came from the flag or the environment. */
  file: string | null;
}

/** The token file this source reads (and a server creates). */
export function tokenFileOf(s: TokenSource): string {
  return s.file ?? tokenPath(s.outDir);
}

/**
 * For servers: the token from the flag, the environment or the file, creating the campaign's own
 * file if absent. A --token-file that does not exist is refused, not created.
 */
export function serverToken(s: TokenSource): FoundToken {
  const found = findToken(s);
  if (found) return found;
  if (s.file !== undefined) throw missingFile(s.file, " (a file given with --token-file is read, never created)");
  const path = tokenFileOf(s);
  const created = createTokenFile(path);
  if (created !== null) return { token: created, source: `${path} (new)`, file: path };
  // Another server linked its file in between the look and the link: use that one.
  const raced = readTokenFile(path, s.uid);
  if (raced === null) throw new RuntimeFailure(`${path} appeared and vanished while this command created it; start it again`);
  return { token: raced, source: path, file: path };
}

/** For workers and clients: never creates anything; refuses at once when there is no token. */
export function clientToken(s: TokenSource): string {
  const found = findToken(s);
  if (found) return found.token;
  if (s.file !== undefined) throw missingFile(s.file, "");
  throw new RefusedError(
    `no campaign token: none given with --token or FUZZFLEET_TOKEN, and no ${tokenFileOf(s)}. ` +
      "Run from the shared campaign directory (the coordinator writes the token there), pass --out, or pass --token.",
  );
}

export interface TokenWait {
  waitSeconds: number;
  signal: AbortSignal;
  log: (line: string) => void;
  /** Who creates the file, for the waiting line ("the coordinator or explore master"). */
  creator: string;
  /** The end of the refusal when the wait runs out: how to point this command at the right file. */
  fix: string;
}

/**
 * For clients started before their server: the token as clientToken finds it, else waits up to
 * `waitSeconds` for the file to appear, saying so once. Null when the signal aborted the wait.
 * A file that is there but unacceptable is refused at once, not waited out.
 */
export async function awaitToken(s: TokenSource, w: TokenWait): Promise<FoundToken | null> {
  const deadline = performance.now() + w.waitSeconds * 1000;
  const path = tokenFileOf(s);
  const pause = new WakeablePause();
  const onAbort = () => pause.wake();
  w.signal.addEventListener("abort", onAbort, { once: true });
  try {
    let said = false;
    for (;;) {
      if (w.signal.aborted) return null;
      const found = findToken(s);
      if (found) return found;
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new RefusedError(`no campaign token: ${path} did not appear within ${formatDuration(w.waitSeconds)} (--wait); ${w.fix}`);
      }
      if (!said) {
        w.log(`no campaign token yet: waiting up to ${formatDuration(w.waitSeconds)} for ${path} (${w.creator} writes it when it starts) …`);
        said = true;
      }
      await pause.pause(Math.min(POLL_MS, left));
    }
  } finally {
    w.signal.removeEventListener("abort", onAbort);
  }
}

function findToken(s: TokenSource): FoundToken | null {
  if (s.flag !== undefined && s.file !== undefined) {
    throw new UsageError("--token and --token-file exclude each other: give the secret one way");
  }
  if (s.flag !== undefined) return { token: validToken(s.flag, "the token given with --token", usage, null), source: "--token", file: null };
  if (s.file === undefined) {
    const env = (s.env ?? process.env).FUZZFLEET_TOKEN;
    if (env !== undefined) {
      const fix = `or unset it to use ${tokenPath(s.outDir)}`;
      return { token: validToken(env, "FUZZFLEET_TOKEN", usage, fix), source: "FUZZFLEET_TOKEN", file: null };
    }
  }
  const path = tokenFileOf(s);
  const fromFile = readTokenFile(path, s.uid);
  return fromFile === null ? null : { token: fromFile, source: path, file: path };
}

/** A token file named explicitly that is not there: most likely a mistyped path, said as such. */
function missingFile(path: string, note: string): RefusedError {
  return new RefusedError(`no campaign token: the token file ${path} does not exist${note}; check the path, or give the token in FUZZFLEET_TOKEN`);
}

const usage = (m: string) => new UsageError(m);
const refused = (m: string) => new RefusedError(m);

/** The token `raw` holds, without the whitespace around it; `what` names where it came from. */
function validToken(raw: string, what: string, fail: (m: string) => Error, fix: string | null): string {
  const token = raw.trim();
  const problem =
    token === "" ? "is empty"
    : token.length < MIN_CHARS || token.length > MAX_CHARS ? `has ${token.length} characters`
    : !VISIBLE_ASCII.test(token) ? "holds a space, a control or a non-ASCII character"
    : null;
  if (problem === null) return token;
  const rule = `a token is ${MIN_CHARS} to ${MAX_CHARS} visible ASCII characters (make one with: openssl rand -hex 16)`;
  throw fail(`${what} ${problem}; ${rule}${fix ? `; ${fix}` : ""}`);
}

/** The token in `path`, or null when there is no such file. Refuses any file it must not trust. */
function readTokenFile(path: string, uid = process.geteuid?.()): string | null {
  let bytes: Buffer | null;
  try {
    bytes = readSmallFile(path, MAX_FILE_BYTES, (st) => {
      if (uid !== undefined && st.uid !== uid) {
        throw new RefusedError(`${path} belongs to uid ${st.uid}, not to this user (uid ${uid}), so someone else may have written it: remove it (a server writes a fresh one), or pass FUZZFLEET_TOKEN`);
      }
      const mode = st.mode & 0o777;
      if ((mode & 0o077) !== 0) {
        throw new RefusedError(`${path} is open to other users (mode 0${mode.toString(8)}), so the secret may be known: chmod 600 ${path} if nobody else could read it, else remove it (a server writes a fresh one)`);
      }
    });
  } catch (err) {
    if (!(err instanceof FileProblem)) throw err;
    switch (err.problem) {
      case "symlink":
        throw new RefusedError(`${path} is a symbolic link; a token file is never followed through a link: replace it with the file itself`);
      case "not-regular":
        throw new RefusedError(`${path} is not a regular file: remove it (a server writes a fresh token file), or pass FUZZFLEET_TOKEN`);
      case "too-large":
        throw new RefusedError(`${path} is longer than ${MAX_FILE_BYTES} bytes, which no token file is: remove it (a server writes a fresh one)`);
      default:
        throw new RefusedError(`cannot read the token file ${path} (${problemCode(err)}): fix its permissions, or pass FUZZFLEET_TOKEN`);
    }
  }
  if (bytes === null) return null;
  return validToken(bytes.toString("utf8"), `the token in ${path}`, refused, "remove the file (a server writes a fresh one)");
}

/** Writes a fresh token to `path` unless something already has that name. Null if it did. */
function createTokenFile(path: string): string | null {
  mkdirSync(dirname(path), { recursive: true });
  const token = randomHex(16);
  try {
    // The umask may only take permissions away; 0600 exactly is what readers require.
    return createFileOnce(path, token + "\n", { mode: 0o600, exactMode: true }) ? token : null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if ((err as NodeJS.ErrnoException).syscall !== "link") throw err;
    throw new RuntimeFailure(`cannot create the token file ${path} (${code ?? (err as Error).message}): pass --token or FUZZFLEET_TOKEN instead`, { cause: err });
  }
}

// The constant-time comparison lives with the one machine that checks tokens.
export { tokensEqual } from "../core/handshake-checks.ts";
