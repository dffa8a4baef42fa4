// The campaign token: a shared secret carried by the first frame of every connection.
// Resolution order: --token, then $FUZZFLEET_TOKEN, then <out>/fuzzfleet.token. Only a
// coordinator or an explore master creates the file, and only when it is absent (mode 0600).
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { closeSync, mkdirSync, openSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { RefusedError, UsageError } from "../errors.ts";

export function tokenPath(outDir: string): string {
  return join(outDir, "fuzzfleet.token");
}

export interface TokenSource {
  flag?: string | undefined;
  env?: NodeJS.ProcessEnv;
  outDir: string;
}

/** For servers: the token from the flag, the environment or the file, creating the file if absent. */
export function serverToken(s: TokenSource): { token: string; source: string } {
  const found = findToken(s);
  if (found) return found;
  const path = tokenPath(s.outDir);
  mkdirSync(s.outDir, { recursive: true });
  const token = randomBytes(16).toString("hex");
  try {
    const fd = openSync(path, "wx", 0o600);
    try {
      writeSync(fd, token + "\n");
    } finally {
      closeSync(fd);
    }
    return { token, source: `${path} (new)` };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return { token: readTokenFile(path)!, source: path };
    throw err;
  }
}

/** For workers and clients: never creates anything. */
export function clientToken(s: TokenSource): string {
  const found = findToken(s);
  if (found) return found.token;
  throw new RefusedError(
    `no campaign token: none given with --token or FUZZFLEET_TOKEN, and no ${tokenPath(s.outDir)}. ` +
      "Run from the shared campaign directory (the coordinator writes the token there), pass --out, or pass --token.",
  );
}

function findToken(s: TokenSource): { token: string; source: string } | null {
  if (s.flag !== undefined) return { token: validToken(s.flag, "--token"), source: "--token" };
  const env = (s.env ?? process.env).FUZZFLEET_TOKEN;
  if (env !== undefined && env.trim() !== "") return { token: validToken(env.trim(), "FUZZFLEET_TOKEN"), source: "FUZZFLEET_TOKEN" };
  const fromFile = readTokenFile(tokenPath(s.outDir));
  return fromFile === null ? null : { token: fromFile, source: tokenPath(s.outDir) };
}

function readTokenFile(path: string): string | null {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return null;
  }
  return validToken(text.trim(), path);
}

function validToken(token: string, where: string): string {
  if (token.length < 8 || token.length > 256 || /\s/.test(token)) {
    throw new UsageError(`the token from ${where} must be 8 to 256 characters without spaces (got ${token.length} characters)`);
  }
  return token;
}

/** Constant-time comparison (hashing first makes the lengths equal). */
export function tokensEqual(a: string, b: string): boolean {
  const ha = createHash("sha256").update(a).digest();
  const hb = createHash("sha256").update(b).digest();
  return timingSafeEqual(ha, hb);
}
