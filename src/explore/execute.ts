// One explore task, worker side (used by remote workers and by the master's local slots alike):
// copy the assigned input while hashing it, run the target on it the way SymCC runs targets,
// stage its children in a hidden per-result directory under their hash names, and describe all
// of it in a `result` frame. Nothing here writes the public corpus; the master verifies and
// promotes after the parent passed its commit fence.
import { mkdirSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { runChild } from "../exec/run-child.ts";
import type { ResultFrame, TaskItemT } from "../net/messages.ts";
import { copyHashing, FileProblem, type Budgets } from "./corpus.ts";
import { lstatOrNull } from "./durable.ts";
import { simulateMutants, seededRandom } from "./simulate.ts";
import { BudgetError, collectOutputs, stageOutputs } from "./staging.ts";

export interface ExecuteSetup {
  corpusDir: string;
  /** Stages go to <stageRoot>/<staging_id>/ (shared with the master). */
  stageRoot: string;
  /** Target argv; an argument containing "@@" gets the input's path (file mode), else the input is stdin. */
  target: readonly string[];
  /** The target's working directory; undefined = this process's own (no check per run). */
  targetCwd?: string;
  simulate: boolean;
  budgets: Budgets;
  /** Private scratch space of this executor (inputs, raw outputs, logs). */
  scratchRoot: string;
  killGraceMs?: number;
}

// Scratch directories are reused from task to task, and so is the input copy in each: creating
// and removing files and directories per run is a large share of the cost of a trivial target
// (creating a file costs 140–360 µs on ext4 here, opening an existing one 10–20 µs). A directory goes back to the
// pool once its output directory is empty again and its input is still a regular file (a target
// in file mode could have replaced it); anything odd and it is removed instead.
const freeScratch = new Map<string, string[]>();
let scratchSeq = 0;

function acquireScratch(root: string): string {
  const free = freeScratch.get(root);
  if (free && free.length > 0) return free.pop()!;
  const dir = join(root, `slot-${process.pid}-${scratchSeq++}`);
  mkdirSync(join(dir, "out"), { recursive: true });
  return dir;
}

function releaseScratch(root: string, dir: string): void {
  try {
    const input = join(dir, "input");
    if (lstatOrNull(input)?.isFile() === false) rmSync(input, { recursive: true, force: true });
    const out = join(dir, "out");
    for (const name of readdirSync(out)) rmSync(join(out, name), { recursive: true, force: true });
    let free = freeScratch.get(root);
    if (!free) freeScratch.set(root, (free = []));
    free.push(dir);
  } catch {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Forgets the reusable scratch directories under `root` (call before removing it). */
export function disposeScratch(root: string): void {
  freeScratch.delete(root);
  for (const dir of targetEnvs.keys()) if (dir.startsWith(`${root}/`)) targetEnvs.delete(dir);
}

// The target's environment depends only on the scratch directory (its output directory and input
// path are fixed) and the mode, so it is built once per directory: copying process.env costs
// more than anything else in preparing a run.
const targetEnvs = new Map<string, { fileMode: boolean; env: NodeJS.ProcessEnv }>();

function targetEnv(scratch: string, fileMode: boolean): NodeJS.ProcessEnv {
  const known = targetEnvs.get(scratch);
  if (known?.fileMode === fileMode) return known.env;
  const env: NodeJS.ProcessEnv = { ...process.env, SYMCC_OUTPUT_DIR: join(scratch, "out") };
  if (fileMode) env.SYMCC_INPUT_FILE = join(scratch, "input");
  else delete env.SYMCC_INPUT_FILE;
  targetEnvs.set(scratch, { fileMode, env });
  return env;
}

export function usesFileMode(target: readonly string[]): boolean {
  return target.some((a) => a.includes("@@"));
}

export async function executeTask(task: TaskItemT, s: ExecuteSetup, signal: AbortSignal): Promise<ResultFrame> {
  const base: ResultFrame = {
    type: "result",
    task_id: task.task_id,
    fence: task.fence,
    input_hash: null,
    new_hashes: [],
    num_generated: 0,
    staged_bytes: 0,
    staging_id: "",
    retcode: null,
    elapsed: 0,
    protocol_error: "",
    budget: null,
    detail: null,
  };
  const scratch = acquireScratch(s.scratchRoot);
  try {
    const input = join(scratch, "input");
    let copied: { hash: string; size: number };
    try {
      copied = copyHashing(join(s.corpusDir, task.hash), input, s.budgets.maxInputBytes, undefined, false, true);
    } catch (err) {
      if (err instanceof FileProblem && err.problem === "too-large") {
        return { ...base, protocol_error: "input-budget-exceeded", budget: { resource: "input-bytes", observed: err.observed ?? 0, limit: err.limit ?? s.budgets.maxInputBytes }, detail: err.message };
      }
      return { ...base, protocol_error: "input-copy-error", detail: (err as Error).message.slice(0, 2000) };
    }
    if (copied.hash !== task.hash) {
      // The bytes behind the name are not the assigned content: report them, do not execute.
      return { ...base, input_hash: copied.hash, protocol_error: "input-copy-error", detail: "the corpus file's content does not match its name" };
    }
    const withInput = { ...base, input_hash: copied.hash };
    const outDir = join(scratch, "out");
    const fileMode = usesFileMode(s.target);
    const r = await runChild({
      argv: fileMode ? s.target.map((a) => a.replaceAll("@@", input)) : s.target,
      cwd: s.targetCwd,
      env: targetEnv(scratch, fileMode),
      // The target's own output is not kept (as SymCC's runner does); its children are what count.
      logPath: null,
      hardTimeoutMs: task.timeout * 1000,
      stdin: fileMode ? "ignore" : input,
      signal,
      killGraceMs: s.killGraceMs ?? 5000,
    });
    const ran = { ...withInput, retcode: r.exitCode ?? -1, elapsed: r.seconds };
    if (r.outcome === "interrupted") return { ...ran, protocol_error: "interrupted", detail: "the execution was interrupted" };
    if (r.outcome === "error") return { ...ran, protocol_error: "execution-error", detail: (r.error ?? "the target could not run").slice(0, 2000) };
    // A timed-out run still produced whatever children it wrote before the deadline.
    try {
      let outputs = collectOutputs(outDir, s.budgets);
      if (outputs.files.length === 0 && s.simulate) {
        simulateMutants(input, outDir, s.budgets, seededRandom(task.hash));
        outputs = collectOutputs(outDir, s.budgets);
      }
      if (outputs.files.length === 0) return ran;
      const staged = stageOutputs(s.stageRoot, outputs, s.budgets);
      return { ...ran, new_hashes: staged.hashes, num_generated: staged.hashes.length, staged_bytes: staged.stagedBytes, staging_id: staged.stageId };
    } catch (err) {
      if (err instanceof BudgetError) {
        return { ...ran, protocol_error: "result-budget-exceeded", budget: { resource: err.resource, observed: err.observed, limit: err.limit }, detail: err.message };
      }
      return { ...ran, protocol_error: "corpus-publication", detail: (err as Error).message.slice(0, 2000) };
    }
  } finally {
    releaseScratch(s.scratchRoot, scratch);
  }
}
