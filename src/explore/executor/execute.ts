// One explore task, worker side (used by remote workers and by the master's local slots alike):
// copy the assigned input while hashing it (or write the bytes that came with the task), run the
// target on it the way SymCC runs targets, stage its children in a hidden per-result directory
// under their hash names (or hand them to the setup's own stager), and describe all of it in a
// TaskResult (task.ts; a remote worker sends it on as a frame). Nothing here writes the public
// corpus; the master verifies and promotes after the parent passed its commit fence. The target may replace anything in its scratch
// directory with a symlink: after a run, the executor reaches the scratch only through the pin it
// opened when it created it, so nothing is read, copied or removed through such a link.
// The target's output (stdout and stderr) goes to a file in the scratch directory; a run that
// crashed or hung reports its finding with the tail of that output (state/findings.ts).
import { createHash } from "node:crypto";
import { closeSync, constants, fchmodSync, fstatSync, ftruncateSync, mkdirSync, openSync, readSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { runChild } from "../../exec/run-child.ts";
import { childEnvironment } from "../../exec/secrets.ts";
import { PinnedDir, type DirIdentity } from "../../files/pinned-dir.ts";
import { copyHashing, currentCorpusMode, FileProblem, type Budgets } from "../state/corpus.ts";
import { writeFully } from "../../files/write.ts";
import { lstatOrNull } from "../state/durable.ts";
import { simulateMutants, seededRandom } from "./simulate.ts";
import { BudgetError, collectOutputs, stageOutputs, type CollectedOutputs } from "../state/staging.ts";
import { classifyRun, TAIL_BYTES } from "../state/findings.ts";
import type { Task, TaskResult } from "../task.ts";

/** The scratch file that receives the target's stdout and stderr. */
const OUTPUT = "output";

export interface ExecuteSetup {
  corpusDir: string;
  /** Stages go to <stageRoot>/<staging_id>/ (shared with the master). */
  stageRoot: string;
  /** Target argv; an argument containing "@@" gets the input's path (file mode), else the input is stdin. */
  target: readonly string[];
  targetCwd: string;
  simulate: boolean;
  budgets: Budgets;
  /** Private scratch space of this executor (inputs, raw outputs, logs). */
  scratchRoot: string;
  killGraceMs?: number;
  /**
   * Stages a run's children instead of stageOutputs under stageRoot (same contract: the stage id,
   * one hash per output, the bytes; BudgetError when a budget breaks). A worker without the shared
   * directory keeps small results in memory until it has sent them.
   */
  stage?: (stageRoot: string, outputs: CollectedOutputs, budgets: Budgets) => { stageId: string; hashes: string[]; stagedBytes: number };
}

// Scratch directories are reused from task to task, and so is the input copy in each: creating
// and removing files and directories per run is a large share of the cost of a trivial target
// (creating a file costs 140–360 µs on ext4 here, opening an existing one 10–20 µs). A directory
// goes back to the pool once its output directory is empty again, its input is still a regular
// file (a target in file mode could have replaced it) and its path still leads to the directory
// that was created; anything odd and its content is removed through the pin instead.
// What a run needs that depends only on the directory (the paths, the argv with @@ filled in, the
// environment: copying process.env costs more than anything else in preparing a run) is built
// once with it. A pool belongs to one scratch root, and a root to one target.
interface Scratch {
  dir: string;
  /** The directory as created: every file operation after a run goes through it. */
  pin: PinnedDir;
  identity: DirIdentity;
  input: string;
  out: string;
  /** The target's output file (appended by runChild, emptied after each run through the pin). */
  output: string;
  fileMode: boolean;
  argv: readonly string[];
  env: NodeJS.ProcessEnv;
}

const freeScratch = new Map<string, Scratch[]>();
let scratchSeq = 0;

function acquireScratch(root: string, target: readonly string[]): Scratch {
  const free = freeScratch.get(root);
  if (free && free.length > 0) return free.pop()!;
  const dir = join(root, `slot-${process.pid}-${scratchSeq++}`);
  const input = join(dir, "input");
  const out = join(dir, "out");
  mkdirSync(out, { recursive: true });
  const pin = PinnedDir.openNoFollow(dir);
  const fileMode = usesFileMode(target);
  // Without fuzzfleet's secrets from the start, so the starter finds nothing to remove per run.
  const env: NodeJS.ProcessEnv = { ...childEnvironment(process.env), SYMCC_OUTPUT_DIR: out };
  if (fileMode) env.SYMCC_INPUT_FILE = input;
  else delete env.SYMCC_INPUT_FILE;
  const argv = fileMode ? target.map((a) => a.replaceAll("@@", input)) : target;
  return { dir, pin, identity: pin.identity(), input, out, output: join(dir, OUTPUT), fileMode, argv, env: Object.freeze(env) };
}

/** `out` is the run's output directory when the run opened it already (it stays the caller's to close). */
function releaseScratch(root: string, scratch: Scratch, out: PinnedDir | null): void {
  try {
    const input = scratch.pin.lstat("input");
    if (input !== null && !input.isFile()) scratch.pin.remove("input");
    // The next run's output is appended to this name: it must be a regular file or absent.
    const output = scratch.pin.lstat(OUTPUT);
    if (output !== null && !output.isFile()) scratch.pin.remove(OUTPUT);
    const dir = out ?? scratch.pin.openDir("out");
    try {
      for (const e of dir.list()) dir.remove(e.name);
    } finally {
      if (dir !== out) dir.close();
    }
    // The paths the next target is given must still lead to this directory.
    const now = lstatOrNull(scratch.dir);
    if (!now?.isDirectory() || now.dev !== scratch.identity.dev || now.ino !== scratch.identity.ino) throw new Error("scratch directory replaced");
    let free = freeScratch.get(root);
    if (!free) freeScratch.set(root, (free = []));
    free.push(scratch);
  } catch {
    dropScratch(scratch);
  }
}

/** Empties the scratch directory through its pin and removes it if its path still names it. */
function dropScratch(scratch: Scratch): void {
  try {
    for (const e of scratch.pin.list()) scratch.pin.remove(e.name);
  } catch {
    // Left for the removal of the whole scratch root.
  }
  scratch.pin.close();
  try {
    // rmdir removes only an empty directory, and never through a symlink at the end of the path.
    rmdirSync(scratch.dir);
  } catch {
    // Replaced or not empty: left as it is.
  }
}

/** Forgets the reusable scratch directories under `root` (call before removing it). */
export function disposeScratch(root: string): void {
  for (const s of freeScratch.get(root) ?? []) s.pin.close();
  freeScratch.delete(root);
}

export function usesFileMode(target: readonly string[]): boolean {
  return target.some((a) => a.includes("@@"));
}

/**
 * Empties the run's output file through the pin (never through a symlink) and returns its last
 * TAIL_BYTES bytes when `want`, else "". A missing or odd file reads as "".
 */
function takeOutput(scratch: Scratch, want: boolean): string {
  const st = scratch.pin.lstat(OUTPUT);
  if (st === null || !st.isFile() || st.size === 0) return "";
  let fd: number;
  try {
    fd = openSync(scratch.pin.entry(OUTPUT), constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return "";
  }
  try {
    const now = fstatSync(fd);
    if (!now.isFile()) return "";
    let tail = "";
    if (want) {
      const n = Math.min(TAIL_BYTES, now.size);
      const buf = Buffer.alloc(n);
      const got = readSync(fd, buf, 0, n, now.size - n);
      // The scratch path differs by slot and host: one name for it keeps signatures comparable.
      tail = buf.subarray(0, got).toString("utf8").replaceAll(scratch.dir, "<scratch>");
    }
    ftruncateSync(fd, 0);
    return tail;
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes an input that came with its task (a worker without the shared directory) straight into
 * the run's input file, hashing the bytes in memory: no file of its own to create and remove per
 * task. The name is reached through the pin and opened without following a symlink.
 */
function writeInput(scratch: Scratch, bytes: Uint8Array, maxBytes: number): { hash: string; size: number } {
  if (bytes.length > maxBytes) {
    throw new FileProblem("too-large", "the task's input", `the task's input holds ${bytes.length} bytes, above the limit of ${maxBytes}; raise the byte budget`, {
      observed: bytes.length,
      limit: maxBytes,
      detail: `larger than ${maxBytes} bytes`,
    });
  }
  const hash = createHash("sha256").update(bytes).digest("hex");
  const fd = openSync(scratch.pin.entry("input"), constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
  try {
    // Exactly the corpus mode, as a copied input gets it: a reused file keeps whatever it had.
    fchmodSync(fd, currentCorpusMode());
    writeFully(fd, bytes);
    ftruncateSync(fd, bytes.length);
  } finally {
    closeSync(fd);
  }
  return { hash, size: bytes.length };
}

/**
 * Runs `task`. Its input is read from the corpus (copied while hashed), or, when `input` is given
 * (the bytes that came with the task), written from memory; either way bytes that do not hash to
 * the task's name are reported and never executed.
 */
export async function executeTask(task: Task, s: ExecuteSetup, signal: AbortSignal, input?: Uint8Array): Promise<TaskResult> {
  const base: TaskResult = {
    taskId: task.id,
    fence: task.fence,
    inputHash: null,
    children: [],
    generated: 0,
    stagedBytes: 0,
    stagingId: "",
    retcode: null,
    seconds: 0,
    failure: null,
    budget: null,
    detail: null,
    finding: null,
  };
  const scratch = acquireScratch(s.scratchRoot, s.target);
  // The run's output directory, pinned once the target has finished: read, staged and emptied through it.
  let out: PinnedDir | null = null;
  try {
    let copied: { hash: string; size: number };
    try {
      copied =
        input === undefined
          ? copyHashing(join(s.corpusDir, task.hash), scratch.pin.entry("input"), { maxBytes: s.budgets.maxInputBytes, durable: false, reuse: true })
          : writeInput(scratch, input, s.budgets.maxInputBytes);
    } catch (err) {
      if (err instanceof FileProblem && err.problem === "too-large") {
        return { ...base, failure: "input-budget-exceeded", budget: { resource: "input-bytes", observed: err.observed ?? 0, limit: err.limit ?? s.budgets.maxInputBytes }, detail: err.message };
      }
      return { ...base, failure: "input-copy-error", detail: (err as Error).message.slice(0, 2000) };
    }
    if (copied.hash !== task.hash) {
      // The bytes behind the name are not the assigned content: report them, do not execute.
      const what = input === undefined ? "the corpus file's content" : "the input sent with the task";
      return { ...base, inputHash: copied.hash, failure: "input-copy-error", detail: `${what} does not match its name` };
    }
    const withInput = { ...base, inputHash: copied.hash };
    // A file left by an earlier target under the output's name must not receive this run's output.
    const before = scratch.pin.lstat(OUTPUT);
    if (before !== null && !before.isFile()) scratch.pin.remove(OUTPUT);
    const r = await runChild({
      argv: scratch.argv,
      cwd: s.targetCwd,
      env: scratch.env,
      // The output is kept only until the run is classified: a finding keeps its tail.
      logPath: scratch.output,
      hardTimeoutMs: task.timeoutSeconds * 1000,
      stdin: scratch.fileMode ? "ignore" : scratch.input,
      signal,
      killGraceMs: s.killGraceMs ?? 5000,
    });
    // The tail is read only when the outcome may make the run a finding (a sanitizer's exit needs it to tell).
    const tail = takeOutput(scratch, r.outcome === "timeout" || r.signal !== null || (r.exitCode ?? 0) !== 0);
    const finding = classifyRun(r, () => tail);
    const ran: TaskResult = { ...withInput, retcode: r.exitCode ?? -1, seconds: r.seconds, finding };
    if (r.outcome === "interrupted") return { ...ran, failure: "interrupted", detail: "the execution was interrupted" };
    if (r.outcome === "error") return { ...ran, failure: "execution-error", detail: (r.error ?? "the target could not run").slice(0, 2000) };
    // A timed-out run still produced whatever children it wrote before the deadline.
    try {
      out = scratch.pin.openDir("out", scratch.out);
    } catch (err) {
      if (!(err instanceof FileProblem)) throw err;
      return { ...ran, failure: "corpus-publication", detail: `the target replaced its SYMCC_OUTPUT_DIR: ${err.message}`.slice(0, 2000) };
    }
    try {
      let outputs = collectOutputs(out, s.budgets);
      if (outputs.files.length === 0 && s.simulate) {
        simulateMutants(scratch.pin.entry("input"), out.path, { budgets: s.budgets, random: seededRandom(task.hash) });
        outputs = collectOutputs(out, s.budgets);
      }
      if (outputs.files.length === 0) return ran;
      const staged = (s.stage ?? stageOutputs)(s.stageRoot, outputs, s.budgets);
      return { ...ran, children: staged.hashes, generated: staged.hashes.length, stagedBytes: staged.stagedBytes, stagingId: staged.stageId };
    } catch (err) {
      if (err instanceof BudgetError) {
        return { ...ran, failure: "result-budget-exceeded", budget: { resource: err.resource, observed: err.observed, limit: err.limit }, detail: err.message };
      }
      return { ...ran, failure: "corpus-publication", detail: (err as Error).message.slice(0, 2000) };
    }
  } finally {
    releaseScratch(s.scratchRoot, scratch, out);
    out?.close();
  }
}
