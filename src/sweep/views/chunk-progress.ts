// Finds of a chunk still running: the entries that have appeared so far in its results'
// failures/ directory (the generator writes one directory per failing seed). Read below <out>
// by descriptor, never through a symlink; anything odd on the way (missing yet, a link, a file)
// counts as "not known", never as an error of the sweep.
import { relative, sep } from "node:path";
import { FileProblem } from "../../files/file-problem.ts";
import { PinnedDir } from "../../files/pinned-dir.ts";

/** How many failure entries `<resultsDir>/failures` holds now; null when it cannot be read safely. */
export function findsSoFar(outDir: string, resultsDir: string): number | null {
  const rel = relative(outDir, resultsDir);
  if (rel === "" || rel.startsWith("..") || rel.startsWith(sep)) return null;
  let root: PinnedDir | null = null;
  let results: PinnedDir | null = null;
  let failures: PinnedDir | null = null;
  try {
    root = PinnedDir.open(outDir);
    results = root.walk(rel.split(sep));
    failures = results.openDirIfPresent("failures");
    if (failures === null) return 0;
    return failures.list().filter((e) => e.kind === "directory").length;
  } catch (err) {
    if (err instanceof FileProblem) return err.problem === "missing" ? 0 : null;
    return null;
  } finally {
    failures?.close();
    results?.close();
    root?.close();
  }
}
