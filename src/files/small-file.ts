// Reading a small file at a path the user or the campaign named (a token file, a launch record):
// its directories are the caller's to trust, its last component is never followed through a
// symlink, a FIFO or device planted at the name is refused without blocking, and no more than
// `maxBytes` is read whatever the file claims its size is. One implementation for every such file;
// the caller words the refusal (each kind of file has its own fix) and checks the owner and mode.
import { closeSync, readSync, type Stats } from "node:fs";
import { basename, dirname } from "node:path";
import { FileProblem } from "./file-problem.ts";
import { PinnedDir } from "./pinned-dir.ts";

/**
 * The bytes of the regular file at `path`, or null when there is none. `accept(stats)` runs on the
 * opened file before anything is read, and may throw to refuse it (an owner, a mode). Throws
 * FileProblem: "symlink", "not-regular", "not-directory" (a parent that is none), "too-large"
 * (more than `maxBytes`), "unreadable".
 */
export function readSmallFile(path: string, maxBytes: number, accept?: (stats: Stats) => void): Buffer | null {
  let dir: PinnedDir;
  try {
    dir = PinnedDir.open(dirname(path));
  } catch (err) {
    if (err instanceof FileProblem && err.problem === "missing") return null;
    throw err;
  }
  try {
    let opened: { fd: number; stats: Stats };
    try {
      opened = dir.openFile(basename(path), Number.MAX_SAFE_INTEGER);
    } catch (err) {
      if (err instanceof FileProblem && err.problem === "missing") return null;
      throw err;
    }
    const { fd, stats } = opened;
    try {
      accept?.(stats);
      const buf = Buffer.alloc(maxBytes + 1);
      let n = 0;
      for (let got = -1; got !== 0 && n < buf.length; n += got) got = readSync(fd, buf, n, buf.length - n, n);
      if (n > maxBytes) {
        throw new FileProblem("too-large", path, `${path} is longer than ${maxBytes} bytes`, { limit: maxBytes, detail: `longer than ${maxBytes} bytes` });
      }
      return buf.subarray(0, n);
    } finally {
      closeSync(fd);
    }
  } finally {
    dir.close();
  }
}

/** The system error code behind a FileProblem ("EACCES"), else its words, for a refusal's parentheses. */
export function problemCode(p: FileProblem): string {
  return (p.cause as NodeJS.ErrnoException | undefined)?.code ?? p.detail;
}
