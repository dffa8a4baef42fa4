// A sweep generator that writes down the environment it was given (as a crash handler or a
// debugging `env` in a generator script would) and finds nothing: for the tests that check what
// a generator sees.
import { chmodSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Campaign } from "./campaign.ts";

/** The [generator] table of a generator that records its environment under `<campaign>/seen/`. */
export function envDumpingGenerator(c: Campaign): string {
  const seen = join(c.dir, "seen");
  mkdirSync(seen, { recursive: true });
  const script = join(c.dir, "dump-env.sh");
  writeFileSync(script, `#!/bin/sh\nenv > ${JSON.stringify(seen)}/seed-$1.env\nsleep 0.2\n`);
  chmodSync(script, 0o755);
  return `[generator]
command = [${JSON.stringify(script)}, "{seed_from}", "{count}", "{out}"]
identity = [${JSON.stringify(script)}]
`;
}

/** Every environment the generator recorded. */
export function seenEnvironments(c: Campaign): string[] {
  const seen = join(c.dir, "seen");
  return readdirSync(seen).map((n) => readFileSync(join(seen, n), "utf8"));
}
