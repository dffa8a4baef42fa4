// Headless Chromium for the dashboard tests, with a profile directory of its own that goes with
// it: closing the browser removes the profile (about 13 MB each), so a test run leaves none behind.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";

export interface Chromium {
  context: BrowserContext;
  /** The profile directory; anything a test saves there (a screenshot) goes with it. */
  profile: string;
  /** Closes the browser, then removes its profile. */
  close(): Promise<void>;
}

export async function launchChromium(executablePath: string, args: readonly string[]): Promise<Chromium> {
  const profile = mkdtempSync(join(tmpdir(), "fuzzfleet-chromium-"));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, { executablePath, headless: true, args: [...args] });
  } catch (err) {
    rmSync(profile, { recursive: true, force: true });
    throw err;
  }
  return {
    context,
    profile,
    async close() {
      try {
        await context.close();
      } finally {
        rmSync(profile, { recursive: true, force: true });
      }
    },
  };
}
