// Removal of directory entries off the event loop, in batches, on a thread of its own.
//
// A coordinator removes each booked chunk's scratch directory and log: a few thousand entries a
// second across a fleet. Done through libuv's pool, each removal is four round trips (open the
// parent, rmdir, unlink, close), each a promise and a wake-up of the loop; measured with 64 fake
// workers that was the largest item on the coordinator's loop, and booking without it ran 2.3×
// faster. Here the caller's requests of one turn of the loop go to the thread in one message; the
// thread makes the calls synchronously and answers the batch in one message.
//
// Nothing is followed through a symlink: the thread opens the parent with O_NOFOLLOW |
// O_DIRECTORY and reaches each name inside the very directory it opened, through the
// descriptor's /proc path; rmdir(2) and unlink(2) never follow the name itself. Without /proc
// nothing is tried, and every name is handed back for the caller's own no-follow walk.
import { constants, statSync } from "node:fs";
import { Worker } from "node:worker_threads";

/**
 * `directory`: removed only when empty (rmdir(2)); `file`: unlink(2); `files-dir`: a directory of
 * files, each unlinked (a symlink among them unlinked, never followed), then the directory itself
 * removed (left when anything else was in it).
 */
export interface RemovalEntry {
  name: string;
  kind: "directory" | "file" | "files-dir";
}

const VIA_PROC = (() => {
  try {
    return statSync("/proc/self/fd").isDirectory();
  } catch {
    return false;
  }
})();

// The thread's whole program: plain JavaScript, evaluated in the worker thread, so that it loads
// the same way from the compiled package and from the sources.
const REMOVER = `
const { parentPort, workerData } = require("node:worker_threads");
const { openSync, closeSync, readdirSync, rmdirSync, unlinkSync } = require("node:fs");
const emptyAndRemove = (path) => {
  const fd = openSync(path, workerData.dirFlags);
  try {
    for (const name of readdirSync("/proc/self/fd/" + fd)) {
      try {
        unlinkSync("/proc/self/fd/" + fd + "/" + name);
      } catch {
        // A subdirectory (or a name gone meanwhile): the rmdir below tells.
      }
    }
  } finally {
    closeSync(fd);
  }
  rmdirSync(path);
};
parentPort.on("message", (batch) => {
  const answers = [];
  for (const { id, dir, fd: pinned, entries } of batch) {
    let fd = pinned;
    if (fd === undefined) {
      try {
        fd = openSync(dir, workerData.dirFlags);
      } catch {
        answers.push({ id, left: entries.map((e) => e.name) });
        continue;
      }
    }
    const left = [];
    for (const e of entries) {
      const inside = "/proc/self/fd/" + fd + "/" + e.name;
      try {
        if (e.kind === "directory") rmdirSync(inside);
        else if (e.kind === "file") unlinkSync(inside);
        else emptyAndRemove(inside);
      } catch (err) {
        if (!err || err.code !== "ENOENT") left.push(e.name);
      }
    }
    if (pinned === undefined) closeSync(fd);
    answers.push({ id, left });
  }
  parentPort.postMessage(answers);
});
`;

interface Request {
  id: number;
  /** The directory by path (opened by the thread, its last component not followed) ... */
  dir?: string;
  /** ... or by a descriptor the caller holds open until the answer. */
  fd?: number;
  entries: RemovalEntry[];
}

/** The thread and what it has not answered yet; started on first use, holding the process only while it works. */
class Remover {
  private worker: Worker | null = null;
  private queued: Request[] = [];
  // Each request not yet answered, with its names: a thread that dies hands them all back.
  private readonly waiting = new Map<number, { names: string[]; resolve: (left: string[]) => void }>();
  private nextId = 1;

  remove(where: { dir: string } | { fd: number }, entries: RemovalEntry[]): Promise<string[]> {
    const id = this.nextId++;
    if (this.queued.length === 0) setImmediate(() => this.flush());
    this.queued.push({ id, ...where, entries });
    return new Promise((resolve) => this.waiting.set(id, { names: entries.map((e) => e.name), resolve }));
  }

  private flush(): void {
    const batch = this.queued;
    this.queued = [];
    const worker = this.thread();
    if (worker === null) {
      for (const r of batch) this.answer(r.id);
      return;
    }
    worker.ref();
    worker.postMessage(batch);
  }

  private thread(): Worker | null {
    if (this.worker !== null) return this.worker;
    let worker: Worker;
    try {
      worker = new Worker(REMOVER, {
        eval: true,
        workerData: { dirFlags: constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW },
        // A loop of syscalls: a small heap keeps the process's resident set small.
        resourceLimits: { maxYoungGenerationSizeMb: 1, maxOldGenerationSizeMb: 16 },
      });
    } catch {
      return null;
    }
    worker.on("message", (answers: { id: number; left: string[] }[]) => {
      for (const a of answers) this.answer(a.id, a.left);
    });
    // A thread that dies hands back every name it was given and did not answer; the next batch
    // starts a new one.
    const lost = (): void => {
      if (this.worker !== worker) return;
      this.worker = null;
      const queued = new Set(this.queued.map((r) => r.id));
      for (const id of [...this.waiting.keys()]) if (!queued.has(id)) this.answer(id);
    };
    worker.on("error", lost);
    worker.on("exit", lost);
    worker.unref();
    this.worker = worker;
    return worker;
  }

  /** Settles request `id` with the names left (all of its names when `left` is not given). */
  private answer(id: number, left?: string[]): void {
    const w = this.waiting.get(id);
    if (w === undefined) return;
    this.waiting.delete(id);
    w.resolve(left ?? w.names);
    if (this.waiting.size === 0) this.worker?.unref();
  }
}

let remover: Remover | null = null;

/**
 * Removes entries directly in a directory on the removal thread (RemovalEntry says how). The
 * directory is `{ dir }`, a path whose last component is not followed, or `{ fd }`, a descriptor
 * the caller keeps open until the promise settles. Absent is fine. Resolves with the names it did
 * not remove (a directory with something else left in it, a name of another kind, an error, `dir`
 * not a directory or a link, or no /proc, where nothing is tried), for a no-follow walk of the
 * caller's. Never rejects.
 */
export function removeEntriesOffLoop(where: { dir: string } | { fd: number }, entries: readonly RemovalEntry[]): Promise<string[]> {
  for (const e of entries) {
    if (e.name === "" || e.name === "." || e.name === ".." || e.name.includes("/") || e.name.includes("\0")) {
      throw new Error(`'${e.name}' is not a single directory entry name`);
    }
  }
  if (!VIA_PROC) return Promise.resolve(entries.map((e) => e.name));
  remover ??= new Remover();
  return remover.remove("fd" in where ? { fd: where.fd } : { dir: where.dir }, entries.map((e) => ({ name: e.name, kind: e.kind })));
}
