// Temporary directories for the unit tests of one file, removed when that file's tests end.
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after } from "node:test";

/** A scratch root named after `prefix`, and `freshDir()`: a new empty directory under it. */
export function scratchDirs(prefix: string): { scratch: string; freshDir: () => string } {
  const scratch = mkdtempSync(join(tmpdir(), `fuzzfleet-${prefix}-`));
  after(() => rmSync(scratch, { recursive: true, force: true }));
  let count = 0;
  return {
    scratch,
    freshDir() {
      const dir = join(scratch, `d-${++count}`);
      mkdirSync(dir);
      return dir;
    },
  };
}

export function sha256(data: Buffer | string): string {
  return createHash("sha256").update(data).digest("hex");
}
