// Finding a child's program as execvp would, and saying in words why a start failed (missing
// program, no permission, a bad working directory), so runChild's "error" outcome names the thing
// and the fix. Looked at only after a start failed, or for the ionice wrapper, never before every start.
import { constants as fsConstants } from "node:fs";
import { access, stat } from "node:fs/promises";
import { resolve as resolvePath } from "node:path";

let ioniceLookup: Promise<string | null> | undefined;
/** The `ionice` executable on fuzzfleet's own PATH, looked up once per process. */
export function findIonice(): Promise<string | null> {
  ioniceLookup ??= resolveProgram("ionice", process.env.PATH, process.cwd()).then((found) =>
    typeof found === "string" ? found : null,
  );
  return ioniceLookup;
}

/**
 * Finds `program` the way execvp does: a name with a slash is a path (relative to `cwd`), a bare
 * name is searched in `pathVar`. Returns the absolute path, or an error with ENOENT / EACCES.
 */
export async function resolveProgram(program: string, pathVar: string | undefined, cwd: string): Promise<string | Error> {
  const candidates = program.includes("/")
    ? [resolvePath(cwd, program)]
    : (pathVar ?? "/usr/bin:/bin").split(":").map((dir) => resolvePath(cwd, dir || ".", program));
  let denied = false;
  for (const candidate of candidates) {
    try {
      if (!(await stat(candidate)).isFile()) {
        denied = true;
        continue;
      }
      await access(candidate, fsConstants.X_OK);
      return candidate;
    } catch (err) {
      if (errorCode(err) === "EACCES") denied = true;
    }
  }
  return Object.assign(new Error(denied ? "permission denied" : "not found"), { code: denied ? "EACCES" : "ENOENT" });
}

/**
 * Why a start failed, in words. The working directory is looked at only now, after the fact: a
 * check before every start would cost a round trip through the thread pool per run, and a bad
 * working directory fails the start anyway (the child's chdir, with an errno that would otherwise
 * be read as a missing program).
 */
export async function startProblem(program: string, cwd: string | undefined, err: unknown): Promise<string> {
  if (cwd !== undefined) {
    const problem = await directoryProblem(cwd);
    if (problem) return `cannot start '${program}': working directory '${cwd}' ${problem}`;
  }
  return startFailure(program, err);
}

async function directoryProblem(dir: string): Promise<string | null> {
  try {
    return (await stat(dir)).isDirectory() ? null : "is not a directory";
  } catch (err) {
    return errorCode(err) === "ENOENT" ? "does not exist" : `cannot be used (${errorText(err)})`;
  }
}

function startFailure(program: string, err: unknown): string {
  switch (errorCode(err)) {
    case "ENOENT":
      return program.includes("/")
        ? `cannot start '${program}': no such file (ENOENT); check the path`
        : `cannot start '${program}': not found on PATH (ENOENT); install it or give its full path`;
    case "EACCES":
      return `cannot start '${program}': permission denied, not an executable file (EACCES); check its mode`;
    default:
      return `cannot start '${program}': ${errorText(err)}`;
  }
}

export function errorCode(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "code" in err ? String(err.code) : undefined;
}

export function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
