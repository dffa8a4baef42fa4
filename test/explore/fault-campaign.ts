// What the tests of several masters under faults share: a campaign whose every run is logged, a
// remote worker attached to a master's port, and the check that a share was taken over in time.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CLI } from "../helpers/campaign.ts";
import type { ExploreDir } from "../helpers/explore.ts";

/** Each seed line runs ~0.2 s, is logged, and has one child (which has none): n seeds give 2n observations, n generated. */
export function loggedCampaign(e: ExploreDir, seeds: number): { log: string; target: string } {
  for (let i = 0; i < seeds; i++) e.seed(`s${i}`, `seed ${i}\n`);
  const log = join(e.dir, "executions.log");
  const target = e.script(
    "t.sh",
    `read line; sleep 0.2; echo "$line" >> "${log}"
case "$line" in seed*) printf 'child of %s\\n' "$line" > "$SYMCC_OUTPUT_DIR/c" ;; esac`,
  );
  return { log, target };
}

/** Every run the campaign's target logged, in order. */
export function executions(log: string): string[] {
  return existsSync(log) ? readFileSync(log, "utf8").trim().split("\n").filter((l) => l !== "") : [];
}

/** A worker attached to a master's port: its exit code and what it said. */
export function attachWorker(dir: string, port: number, token: string) {
  const child = spawn(process.execPath, [CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", token], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  const done = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  return { child, done, output: () => out };
}

/** Asserts that `output` logs the takeover of `rank`'s share under generation 2, after the lease time and at most 2 s more of silence. */
export function assertTakenOverInTime(output: string, rank: number, ttlSeconds: number): void {
  const took = new RegExp(`took over the share of rank ${rank} \\(generation 2\\) from \\S+, silent for ([0-9.]+) s`).exec(output);
  assert.ok(took, output);
  const silent = Number(took[1]);
  assert.ok(silent >= ttlSeconds && silent <= ttlSeconds + 2, `taken over within the lease time + 2 s (silent ${silent} s)`);
}
