// Recording the finding of a committed run (a crash or a hang) in the findings store, once per
// commit fence: the store refuses a repeated fence ("already"), so a replayed commit records
// nothing twice. A store that cannot be written is a problem of the campaign, not of the run.
// Both name the target build the run was made with.
import { describeFinding, type FindingsStore } from "../state/findings.ts";
import type { TaskResult } from "../task.ts";

export interface FindingRecording {
  findings: FindingsStore;
  found: { recorded: number; newInputs: number };
  build: string;
  wallNow: () => number;
  log: (line: string) => void;
  problem: (message: string) => void;
}

export function recordRunFinding(
  m: FindingRecording,
  task: { hash: string; fence: string },
  r: TaskResult,
): void {
  if (!r.finding) return;
  let outcome: "new" | "again" | "already";
  try {
    outcome = m.findings.record(task.hash, task.fence, r.finding, new Date(m.wallNow()), m.build);
  } catch (err) {
    m.problem(`the finding of ${task.hash.slice(0, 12)} could not be recorded in ${m.findings.dir}: ${(err as Error).message}`);
    return;
  }
  if (outcome === "already") return;
  m.found.recorded++;
  if (outcome === "new") m.found.newInputs++;
  m.log(`finding: ${task.hash.slice(0, 12)} ${describeFinding(r.finding)}${outcome === "again" ? ", seen before" : ""}`);
}

/** A recorded input ran under `m.build` without a crash or hang: said once per build. */
export function recordNotReproduced(m: FindingRecording, hash: string): void {
  let changed: boolean;
  try {
    changed = m.findings.notReproduced(hash, m.build);
  } catch (err) {
    m.problem(`the finding of ${hash.slice(0, 12)} could not be updated in ${m.findings.dir}: ${(err as Error).message}`);
    return;
  }
  if (changed) m.log(`finding: ${hash.slice(0, 12)} not reproduced by build ${m.build}`);
}
