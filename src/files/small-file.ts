// Reading a small file at a path the user or the campaign named (a token file, a launch record):
// its directories are the caller's to trust (followed, as any path the user types); its last
// component is never followed through a symlink; a FIFO or device planted at the name is refused
// without blocking; and no more than `maxBytes` is read, whatever size the file claims. One
// implementation for every such file; the caller words the refusal (each kind of file has its own
// fix) and checks the owner and mode.
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from "node:fs";
import { FileProblem } from "./file-problem.ts";
import { codeOf, kindPhrase, symlinkProblem, unreadable } from "./refusals.ts";

/**
 * The bytes of the regular file at `path`, or null when there is none. `accept(stats)` runs on the
 * opened file before anything is read, and may throw to refuse it (an owner, a mode). Throws
 * FileProblem: "symlink", "not-regular", "not-directory" (a parent that is none), "too-large"
 * (more than `maxBytes`), "unreadable".
 */
export function readSmallFile(path: string, maxBytes: number, accept?: (stats: Stats) => void): Buffer | null {
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO planted at the name must not hang the open; it is refused below.
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = codeOf(err);
    if (code === "ENOENT") return null;
    if (code === "ELOOP") throw symlinkProblem(path, path);
    if (code === "ENOTDIR") throw new FileProblem("not-directory", path, `a directory on the way to ${path} is none`, { cause: err, detail: "not-directory (ENOTDIR)" });
    throw unreadable(path, "open", err);
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) {
      const detail = `${kindPhrase(stats)}, not a regular file`;
      throw new FileProblem("not-regular", path, `${path} is ${detail}`, { detail });
    }
    accept?.(stats);
    const buf = Buffer.alloc(maxBytes + 1);
    let n = 0;
    try {
      for (let got = -1; got !== 0 && n < buf.length; n += got) got = readSync(fd, buf, n, buf.length - n, n);
    } catch (err) {
      throw unreadable(path, "read", err);
    }
    if (n > maxBytes) {
      throw new FileProblem("too-large", path, `${path} is longer than ${maxBytes} bytes`, { limit: maxBytes, detail: `longer than ${maxBytes} bytes` });
    }
    return buf.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

/** The system error code behind a FileProblem ("EACCES"), else its words, for a refusal's parentheses. */
export function problemCode(p: FileProblem): string {
  return (p.cause as NodeJS.ErrnoException | undefined)?.code ?? p.detail;
}
