// The target's identity: which build of the target produced a result. The explored ledger, every
// finding and the campaign's statistics name it, so that a rebuilt target runs the corpus again
// instead of trusting what an older build did, and a worker that would run another build is
// refused at the handshake (the worker proves the build it runs, the master compares). It is a
// SHA-256 over:
//
//   - the argv template as given (`@@` included): another command line is another target;
//   - the bytes of the executable the kernel would run: argv[0] looked up as the executor starts
//     it (a name without '/' in the PATH of the target's environment, as execvpe does; a path
//     relative to the target's working directory), symbolic links followed as exec(2) follows
//     them, then read as a regular file of bounded size (a FIFO, device or directory is refused);
//   - the bytes of every file the user names as part of the target (--target-file: a SymCC
//     runtime, a configuration, the script an interpreter runs), in no particular order and
//     whatever their paths: a runtime moved to another directory is the same build.
//
// Environment variables and the working directory are not part of it. A simulated campaign runs
// no target: its identity is the argv template alone. `build` is the first 12 hex digits, as the
// sweep's app build id; the full digest is kept beside it.
import { accessSync, constants, realpathSync, statSync } from "node:fs";
import { createHash } from "node:crypto";
import { delimiter, isAbsolute, join, relative, resolve } from "node:path";
import { UsageError } from "../../errors.ts";
import { FileProblem } from "./corpus.ts";
import { hashFile } from "./stable-read.ts";

/** The largest executable or named file that is hashed (bytes). */
export const MAX_TARGET_FILE_BYTES = 4 * 1024 * 1024 * 1024;
/** The search path execvpe uses when the environment has none (as native/spawn.c does). */
const DEFAULT_PATH = "/usr/bin:/bin";
const BUILD_RE = /^[0-9a-f]{12}$/;

export interface HashedFile {
  /** The path as resolved (symbolic links followed). */
  path: string;
  sha256: string;
}

export interface TargetIdentity {
  /** First 12 hex digits of `digest`: what lines and records name. */
  build: string;
  digest: string;
  argv: string[];
  /** null for a simulated campaign (no target runs). */
  executable: HashedFile | null;
  files: HashedFile[];
}

export interface TargetSpec {
  argv: readonly string[];
  /** The target's working directory: relative paths (argv[0], PATH entries, --target-file) resolve here. */
  cwd: string;
  /** --target-file paths, as given. */
  files: readonly string[];
  /** The PATH of the target's environment (undefined: unset). */
  path: string | undefined;
  simulate: boolean;
}

/** Whether `s` can be a build id as lines and records carry it. */
export function isBuildId(s: unknown): s is string {
  return typeof s === "string" && BUILD_RE.test(s);
}

/**
 * The identity of the target `spec` describes. Throws UsageError naming the program or file and
 * the fix when the executable cannot be found or a file cannot be read.
 */
export function targetIdentity(spec: TargetSpec): TargetIdentity {
  const executable = spec.simulate ? null : hashTargetFile(resolveExecutable(spec.argv[0] ?? "", spec.cwd, spec.path), `the target executable (${spec.argv[0]})`);
  const files = spec.files.map((f) => hashTargetFile(resolve(spec.cwd, f), `--target-file ${f}`));
  const h = createHash("sha256");
  h.update("fuzzfleet-target-v1\n");
  h.update(JSON.stringify(spec.argv));
  h.update("\n");
  h.update(executable ? executable.sha256 : "simulated");
  h.update("\n");
  for (const sha of files.map((f) => f.sha256).sort()) h.update(`${sha}\n`);
  const digest = h.digest("hex");
  return { build: digest.slice(0, 12), digest, argv: [...spec.argv], executable, files };
}

/**
 * The file the kernel runs for `program`: execvpe's search (a name without '/' is tried in each
 * PATH entry in turn, an empty entry meaning the working directory; the first executable regular
 * file wins), symbolic links followed.
 */
export function resolveExecutable(program: string, cwd: string, pathVar: string | undefined): string {
  if (program === "") throw new UsageError("the target command is empty; give it after --, e.g. -- ./target @@");
  const candidates = program.includes("/") ? [resolve(cwd, program)] : (pathVar ?? DEFAULT_PATH).split(delimiter).map((d) => resolve(cwd, d === "" ? "." : d, program));
  for (const c of candidates) {
    let real: string;
    try {
      real = realpathSync(c);
      if (!statSync(real).isFile()) continue;
      accessSync(real, constants.X_OK);
    } catch {
      continue;
    }
    return real;
  }
  const where = program.includes("/") ? `at ${candidates[0]}` : "in PATH";
  throw new UsageError(`target '${program}': no executable file ${where}; build the target first, or give its path after --`);
}

function hashTargetFile(path: string, what: string): HashedFile {
  let real: string;
  try {
    real = realpathSync(path);
  } catch (err) {
    throw new UsageError(`${what}: ${path} cannot be resolved (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); name an existing regular file`, { cause: err });
  }
  try {
    return { path: real, sha256: hashFile(real, MAX_TARGET_FILE_BYTES).hash };
  } catch (err) {
    if (!(err instanceof FileProblem)) throw err;
    throw new UsageError(`${what}: ${err.message}; name a regular file of at most ${MAX_TARGET_FILE_BYTES} bytes`, { cause: err });
  }
}

/** What a master asks a worker to prove it runs (the handshake's challenge carries it). */
export interface TargetChallenge {
  argv: readonly string[];
  /** The master's working directory for the target. */
  cwd: string;
  /** --target-file paths as given. */
  files: readonly string[];
  simulate: boolean;
}

/**
 * The build this host runs for the master's target: in the shared directory it resolves the
 * target where the master does; without it, relative to its own working directory `ownDir` (a
 * --target-file the master names by an absolute path below its working directory is looked for
 * at the same place below `ownDir`) and its own PATH. `problem` says why there is no build.
 */
export function provenTarget(c: TargetChallenge, shared: boolean, ownDir: string, pathVar: string | undefined): { build: string | null; problem: string | null } {
  const cwd = shared ? c.cwd : ownDir;
  const files = shared ? c.files : c.files.map((f) => (isAbsolute(f) && below(c.cwd, f) ? join(ownDir, relative(c.cwd, f)) : f));
  try {
    return { build: targetIdentity({ argv: c.argv, cwd, files, path: pathVar, simulate: c.simulate }).build, problem: null };
  } catch (err) {
    if (err instanceof UsageError) return { build: null, problem: err.message };
    throw err;
  }
}

function below(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return rel !== "" && !rel.startsWith("..") && !isAbsolute(rel);
}

/**
 * The master's check, at the handshake, of the build a worker proved it runs: null when it is the
 * master's, else the refusal naming both builds, where the worker looked and the fix.
 */
export function targetProofProblem(master: string, proved: { build: string | null | undefined; problem: string | null }, shared: boolean): string | null {
  if (proved.build === master) return null;
  const seen = proved.build ? `build ${proved.build}` : `no build${proved.problem ? ` (${proved.problem})` : ""}`;
  const where = shared ? "in the shared directory" : "from its own working directory and PATH (it does not see the shared directory)";
  return (
    `target build differs (worker ${seen}, master build ${master}): the worker resolves the target ${where} and finds another ` +
    "executable, --target-file or command line; give it the master's target build (rebuild or copy the same files there), then start it again"
  );
}
