// The FileProblem a pinned walk throws when an entry is not what it must be (missing, a symlink,
// another kind of file, unreadable, replaced), worded for the user: the path they know, what was
// found (a symlink's target, the kind of file) and why it is refused. pinned-dir.ts decides when.
import { lstatSync, readlinkSync, type Stats } from "node:fs";
import { FileProblem } from "./file-problem.ts";

export function codeOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

export function missing(shown: string, cause?: unknown): FileProblem {
  return new FileProblem("missing", shown, `${shown} does not exist`, { cause, detail: "missing" });
}

export function unreadable(shown: string, verb: string, err: unknown): FileProblem {
  const detail = `unreadable (${codeOf(err) ?? (err as Error).message})`;
  return new FileProblem("unreadable", shown, `cannot ${verb} ${shown}: ${(err as Error).message}`, { cause: err, detail });
}

/** What a name that is not a usable directory is, for a refusal message. */
export function describeNonDirectory(path: string, shown: string, err: unknown): FileProblem {
  const code = codeOf(err);
  if (code === "ENOENT") return missing(shown, err);
  if (code === "ENOTDIR" || code === "ELOOP") {
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (st === undefined) return missing(shown, err);
    if (st.isSymbolicLink()) return symlinkProblem(path, shown);
    if (!st.isDirectory()) {
      const detail = `${kindPhrase(st)}, not a directory`;
      return new FileProblem("not-directory", shown, `${shown} is ${detail}`, { detail });
    }
    return new FileProblem("changed", shown, `${shown} was replaced while it was opened`, { detail: "replaced while it was opened" });
  }
  return unreadable(shown, "open", err);
}

export function symlinkProblem(path: string, shown: string): FileProblem {
  let target = "";
  try {
    const t = readlinkSync(path);
    target = ` to '${t.length > 200 ? `${t.slice(0, 200)}…` : t}'`;
  } catch {
    // Gone again: the refusal stands without the target.
  }
  const detail = `a symbolic link${target}; nothing is followed through a symlink`;
  return new FileProblem("symlink", shown, `${shown} is ${detail}`, { detail });
}

export function kindPhrase(st: Stats): string {
  if (st.isFile()) return "a regular file";
  if (st.isDirectory()) return "a directory";
  if (st.isSymbolicLink()) return "a symbolic link";
  if (st.isFIFO()) return "a FIFO";
  if (st.isSocket()) return "a socket";
  return "a device file";
}
