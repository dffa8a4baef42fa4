// The input directories of an explore campaign (`-i`, once or several times: e.g. the queue/ of
// every AFL++ -M/-S instance): each must be a directory; none may be another one again (the same
// directory by two paths), lie inside another, be the corpus, or lie inside or around the corpus.
// Each is compared by its real path and by its identity (device and inode), so a second path to
// the same directory (a symlink, a bind mount) is refused like the same path twice.
import { lstatSync, realpathSync, statSync } from "node:fs";
import { basename, dirname, relative, resolve, isAbsolute, sep } from "node:path";
import { UsageError } from "../../errors.ts";

interface Dir {
  given: string;
  resolved: string;
  real: string;
  dev: number;
  ino: number;
}

/** The resolved input directories, in the order given; refuses what the header says, naming both paths. */
export function checkInputDirs(given: readonly string[], corpusDir: string): string[] {
  if (given.length === 0) throw new UsageError("no input directory: give at least one -i DIR");
  const dirs = given.map((g) => inspect(g));
  for (let i = 0; i < dirs.length; i++) {
    for (let j = i + 1; j < dirs.length; j++) {
      const [a, b] = [dirs[i]!, dirs[j]!];
      if (a.dev === b.dev && a.ino === b.ino) {
        throw new UsageError(`-i ${a.given} and -i ${b.given} are the same directory: give each input directory once`);
      }
      const inner = within(a.real, b.real) ? [b, a] : within(b.real, a.real) ? [a, b] : null;
      if (inner) {
        throw new UsageError(
          `-i ${inner[0]!.given} lies inside -i ${inner[1]!.given}: input directories are read one level deep, so give directories side by side (e.g. each AFL++ instance's queue/), not one inside another`,
        );
      }
    }
  }
  const corpus = realOrParent(resolve(corpusDir));
  for (const d of dirs) {
    if (d.real === corpus) throw new UsageError(`-o ${corpusDir} is the input directory -i ${d.given}: the corpus holds every child too; give a directory of its own to -o`);
    if (within(corpus, d.real)) throw new UsageError(`-i ${d.given} lies inside the corpus -o ${corpusDir}: corpus files are never inputs; give an input directory outside the corpus`);
    if (within(d.real, corpus)) throw new UsageError(`-o ${corpusDir} lies inside the input directory -i ${d.given}: give the corpus a directory outside every input directory`);
  }
  return dirs.map((d) => d.resolved);
}

function inspect(given: string): Dir {
  const resolved = resolve(given);
  let st;
  try {
    st = statSync(resolved);
  } catch {
    throw new UsageError(`-i ${given} does not exist: give an existing directory of input files`);
  }
  if (!st.isDirectory()) throw new UsageError(`-i ${given} is not a directory: give the directory that holds the input files`);
  return { given, resolved, real: realpathSync(resolved), dev: st.dev, ino: st.ino };
}

/** The real path of `path`, or (not created yet) its parent's real path with its name. */
function realOrParent(path: string): string {
  try {
    lstatSync(path);
    return realpathSync(path);
  } catch {
    try {
      return resolve(realpathSync(dirname(path)), basename(path));
    } catch {
      return path;
    }
  }
}

/** `inner` lies strictly inside `outer`. */
function within(outer: string, inner: string): boolean {
  const rel = relative(outer, inner);
  return rel !== "" && !rel.startsWith(".." + sep) && rel !== ".." && !isAbsolute(rel);
}
