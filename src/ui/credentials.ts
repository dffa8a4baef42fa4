// What the dashboard accepts off loopback besides its login cookie, derived from the campaign
// token so that nothing new has to be kept or shared (docs/dashboard.md, "Who may look"):
// - the *scrape credential*, HMAC-SHA256(token, "fuzzfleet-scrape-v1") in hex: it opens the
//   dashboard and /metrics, and since the worker and master handshakes compare the token itself,
//   a Prometheus server given it cannot join the campaign. It is kept, while a dashboard serves,
//   in `fuzzfleet.scrape-token` (mode 0600) beside the campaign's token file, never printed;
// - the login cookie's name, `fuzzfleet_ui_` and 16 hex digits of HMAC(token, label and port):
//   browsers share cookies between the ports of one host, so two dashboards on one host (two
//   campaigns, or two masters of one) each keep their own login.
import { createHmac } from "node:crypto";
import { closeSync, constants, fchmodSync, fstatSync, fsyncSync, lstatSync, openSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { randomHex } from "../util/random-hex.ts";

export const SCRAPE_TOKEN_FILE_NAME = "fuzzfleet.scrape-token";

export function scrapeCredential(token: string): string {
  return createHmac("sha256", token).update("fuzzfleet-scrape-v1").digest("hex");
}

export function loginCookieName(token: string, port: number): string {
  return `fuzzfleet_ui_${createHmac("sha256", token).update(`fuzzfleet-cookie-v1:${port}`).digest("hex").slice(0, 16)}`;
}

/** A file this process wrote: removed at the end only if the name still holds that very file. */
export interface WrittenFile {
  path: string;
  dev: number;
  ino: number;
}

/**
 * Writes `credential` to `dir/fuzzfleet.scrape-token`, mode 0600: a new file under a temporary
 * name (O_EXCL | O_NOFOLLOW), renamed over the name, so a link planted there is replaced, never
 * written through.
 */
export function writeScrapeTokenFile(dir: string, credential: string): WrittenFile {
  // The directory itself is not followed either: a link in its place is refused.
  if (!lstatSync(dir).isDirectory()) throw Object.assign(new Error(`${dir} is not a directory but a link`), { code: "ELOOP" });
  const path = join(dir, SCRAPE_TOKEN_FILE_NAME);
  const temp = `${path}.${randomHex(6)}.tmp`;
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  let st;
  try {
    try {
      fchmodSync(fd, 0o600);
      writeSync(fd, credential + "\n");
      fsyncSync(fd);
      st = fstatSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
  } catch (err) {
    try {
      unlinkSync(temp);
    } catch {
      // Never created, or renamed already.
    }
    throw err;
  }
  return { path, dev: st.dev, ino: st.ino };
}

/** Removes what writeScrapeTokenFile wrote, unless the name now holds something else. */
export function removeWrittenFile(f: WrittenFile): void {
  try {
    const st = lstatSync(f.path);
    if (st.dev === f.dev && st.ino === f.ino) unlinkSync(f.path);
  } catch {
    // Gone already: nothing to remove.
  }
}
