// What an explore master says at the start of a campaign (the banner: epoch, rank, corpus, inputs,
// target and its build, budgets; why content explored before runs again) and when it ends incomplete (its problems and where its state was kept).
import { existsSync } from "node:fs";
import { formatDuration } from "../../config/duration.ts";
import { renderProblems, type Problem } from "../../core/problems.ts";
import { usesFileMode } from "../executor/execute.ts";
import type { Ownership } from "../master/options.ts";
import { UNKNOWN_BUILD } from "../state/ledger.ts";
import type { TargetIdentity } from "../state/target-identity.ts";
import type { ExploreOptions } from "./options.ts";
import type { MasterRole, Place } from "./role.ts";

export function banner(write: (line: string) => void, o: ExploreOptions, b: { place: Place; role: MasterRole; ownership: Ownership; corpusDir: string; inputDirs: string[]; target: TargetIdentity }): void {
  const { epoch, rank, ranks } = b.place;
  write(
    `fuzzfleet explore: epoch ${epoch} (${o.resumeEpoch ? "resumed" : b.role.kind === "participant" ? "joined" : "new"})` +
      `${ranks.length > 1 ? `, rank ${rank} of ${ranks.length} masters (${b.ownership} ownership)` : ""}`,
  );
  write(`  corpus   ${b.corpusDir}`);
  for (const dir of b.inputDirs) write(`  inputs   ${dir}`);
  write(`  target   ${o.target.join(" ")}  (${usesFileMode(o.target) ? "file mode: @@ is the input's path" : "stdin mode"})`);
  const t = b.target;
  const hashed = t.executable ? [t.executable.path, ...t.files.map((f) => f.path)].join(", ") : "the argv alone (--simulate runs no target)";
  write(`  build    ${t.build}  (hashed: ${hashed})`);
  write(
    `  per-run timeout ${formatDuration(o.timeoutSeconds)}, idle window ${o.maxIdleSeconds}s` +
      `${o.wallTimeoutSeconds > 0 ? `, wall budget ${formatDuration(o.wallTimeoutSeconds)}` : ""}${o.simulate ? ", --simulate" : ""}` +
      `${o.follow ? ", --follow (an idle frontier does not end the campaign)" : ""}`,
  );
}

/** Why content earlier campaigns explored runs again (ledger.ts UNKNOWN_BUILD: a ledger older than builds). */
export function targetChangeLine(c: { from: string; to: string; inputs: number }): string {
  const why = c.from === UNKNOWN_BUILD ? "the explored ledger names no target build (written before builds were recorded)" : "target changed since the last campaign";
  return `${why}: build ${c.from} → ${c.to}, ${c.inputs} input(s) run again`;
}

/** The campaign ends incomplete (exit 70 unless a submaster's rendezvous timed out): its problems, and where its state was kept. */
export function report(write: (l: string) => void, problems: readonly Problem[], workDir: string, epoch: string): void {
  for (const line of renderProblems(problems)) write(line);
  if (existsSync(workDir)) write(`hidden state kept in ${workDir} for inspection; resume with --resume ${epoch}`);
}
