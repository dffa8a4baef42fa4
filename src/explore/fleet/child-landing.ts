// Where the children of a worker without the shared directory land on the master: it sends each
// staged child in `put` frames (path "<staging id>/<child hash>", pieces in order, the SHA-256 with
// the last piece) before the task's `result`, and they are written, piece by piece, into the very
// stage directory a shared worker would have written (<staging>/<executor key>/<staging id>/), so
// that the result is then verified and promoted by the same code as a shared worker's
// (master.consumeResult: inventory, every digest, byte total, then the fence).
//
// Nothing the worker sends is trusted: a path that is not a staging id and a hash, a piece out of
// order, a digest that is not the file's name or not its bytes, and more files or bytes than the
// campaign's budgets (--max-children, --max-result-bytes) are refused at once, with the reason,
// and what landed of that task is removed. One piece is in memory at a time, whatever a child weighs.
//
// The checks are made on the loop, the file system calls (make the stage, create, write, close)
// in libuv's pool: on a busy disk a directory or a file made here waits a millisecond or more for
// the journal or the parent directory, and on the loop that wait would hold up every other
// worker's frames. A put is answered once its piece is written; a connection's frames are handled
// one after another, so no two calls for one task ever overlap.
//
// Per task: (nothing) --first put--> landing a file --last piece, digest right--> between files
//           --result naming exactly the files landed--> settled (the stage is the master's now)
//           any refusal, the task taken back, the worker gone --> dropped (the stage removed)
import { createHash, type Hash } from "node:crypto";
import { close, closeSync, constants, mkdir, open, rmSync, write } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { formatInt } from "../../config/format.ts";
import { printable } from "../../core/log-lines.ts";
import type { PutFrame } from "../../net/messages.ts";
import type { Budgets } from "../state/corpus.ts";

const PUT_PATH = /^([0-9a-f]{32})\/([0-9a-f]{64})$/;

const mkdirAsync = promisify(mkdir);
const openAsync = promisify(open);
const writeAsync = promisify(write);
const closeAsync = promisify(close);

async function writeAll(fd: number, bytes: Buffer, position: number): Promise<void> {
  for (let off = 0; off < bytes.length; ) off += (await writeAsync(fd, bytes, off, bytes.length - off, position + off)).bytesWritten;
}

interface LandingFile {
  hash: string;
  size: number;
  received: number;
  fd: number;
  digest: Hash;
}

interface LandingTask {
  stageId: string;
  dir: string;
  done: Set<string>;
  bytes: number;
  current: LandingFile | null;
}

export class ChildLanding {
  private readonly tasks = new Map<number, LandingTask>();

  /** The piece being landed, if any: a connection's pieces come one after another. */
  private inFlight: Promise<string | null> | null = null;

  /** `executorRoot`: this worker's staging directory (the master created it, and nobody else writes it). */
  constructor(
    private readonly executorRoot: string,
    private readonly budgets: Budgets,
  ) {}

  /** Lands one piece; resolves with why it is refused (the task's landing is then dropped), or null. */
  async put(f: PutFrame): Promise<string | null> {
    const run = this.land(f);
    this.inFlight = run;
    let problem: string | null;
    try {
      problem = await run;
    } finally {
      if (this.inFlight === run) this.inFlight = null;
    }
    if (problem !== null) this.dropNow(f.unit);
    return problem;
  }

  private async land(f: PutFrame): Promise<string | null> {
    const m = PUT_PATH.exec(f.path);
    if (!m) return `path '${printable(f.path, { max: 120 })}' is not '<staging id>/<child hash>' (32 and 64 lowercase hex)`;
    const [, stageId, hash] = m as unknown as [string, string, string];
    let task = this.tasks.get(f.unit);
    if (task === undefined) {
      const dir = join(this.executorRoot, stageId);
      try {
        await mkdirAsync(dir, { mode: 0o700 });
      } catch (err) {
        return `stage ${stageId} cannot be made (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); a stage id is used once`;
      }
      task = { stageId, dir, done: new Set(), bytes: 0, current: null };
      this.tasks.set(f.unit, task);
    } else if (task.stageId !== stageId) {
      return `task ${f.unit}'s children go to stage ${task.stageId}, not ${stageId}`;
    }
    let file = task.current;
    if (file === null) {
      if (f.offset !== 0) return `${hash} starts at offset ${formatInt(f.offset)}, not 0`;
      if (task.done.has(hash)) return `${hash} was sent twice`;
      if (task.done.size + 1 > this.budgets.maxChildren) return `more than ${formatInt(this.budgets.maxChildren)} children (--max-children)`;
      if (task.bytes + f.size > this.budgets.maxResultBytes) return `more than ${formatInt(this.budgets.maxResultBytes)} bytes of children (--max-result-bytes)`;
      let fd: number;
      try {
        fd = await openAsync(join(task.dir, hash), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
      } catch (err) {
        return `${hash} cannot be written here (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
      }
      file = { hash, size: f.size, received: 0, fd, digest: createHash("sha256") };
      task.current = file;
      task.bytes += f.size;
    } else if (file.hash !== hash || file.size !== f.size || file.received !== f.offset) {
      return `a piece of ${hash} at ${formatInt(f.offset)} of ${formatInt(f.size)} bytes while ${file.hash} has ${formatInt(file.received)} of ${formatInt(file.size)}: pieces come in order, one file after another`;
    }
    const bytes = Buffer.from(f.data, "base64");
    if (bytes.toString("base64") !== f.data) return `a piece of ${hash} is not canonical base64`;
    if (file.received + bytes.length > file.size) return `${hash} is longer than its declared ${formatInt(file.size)} bytes`;
    if (bytes.length === 0 && file.size > 0) return `an empty piece of ${hash} before its end`;
    file.digest.update(bytes);
    const last = file.received + bytes.length === file.size;
    if (!last && f.sha256 !== null) return `${hash} names its SHA-256 before its last piece`;
    const actual = last ? file.digest.digest("hex") : "";
    // The digest is checked before a byte is written: a wrong last piece costs no write.
    if (last && f.sha256 !== hash) return `${hash} came with SHA-256 ${f.sha256 ?? "(none)"}: a child's digest is its name`;
    if (last && actual !== hash) return `the bytes sent as ${hash} hash to ${actual}`;
    await writeAll(file.fd, bytes, file.received);
    file.received += bytes.length;
    if (!last) return null;
    task.current = null;
    await closeAsync(file.fd);
    task.done.add(hash);
    return null;
  }

  /**
   * The result of task `taskId` arrived: what landed must be exactly what it names (every declared
   * child landed whole, nothing else). Returns why not (the landing is then dropped), or null: the
   * stage is then the master's, verified and committed or removed by consumeResult.
   */
  settle(taskId: number, stagingId: string, children: readonly string[]): string | null {
    const task = this.tasks.get(taskId);
    const problem = settleProblem(task, stagingId, new Set(children));
    if (problem !== null) this.drop(taskId);
    else this.tasks.delete(taskId);
    return problem;
  }

  /**
   * Removes what landed of `taskId` (refused, taken back, or its worker gone): at once, or once a
   * piece under way in the pool is written (its descriptor must not be closed under it, nor its
   * stage made again after the removal).
   */
  drop(taskId: number): void {
    this.whenIdle(() => this.dropNow(taskId));
  }

  /** The worker is gone: nothing it was sending is kept (its tasks run again, their children are sent again). */
  dropAll(): void {
    this.whenIdle(() => {
      for (const id of [...this.tasks.keys()]) this.dropNow(id);
    });
  }

  private whenIdle(fn: () => void): void {
    if (this.inFlight === null) fn();
    else {
      const again = () => this.whenIdle(fn);
      void this.inFlight.then(again, again);
    }
  }

  private dropNow(taskId: number): void {
    const task = this.tasks.get(taskId);
    if (task === undefined) return;
    this.tasks.delete(taskId);
    if (task.current) closeSync(task.current.fd);
    // The master made this directory and only it writes there (the worker has no file access here).
    rmSync(task.dir, { recursive: true, force: true });
  }

  /** Tasks with files landed or landing, for tests. */
  get landing(): number {
    return this.tasks.size;
  }
}

function settleProblem(task: LandingTask | undefined, stagingId: string, declared: Set<string>): string | null {
  if (stagingId === "") return task === undefined ? null : `children were sent to stage ${task.stageId}, but the result names none`;
  if (task === undefined) return declared.size === 0 ? null : `the result names stage ${stagingId}, but none of its children arrived`;
  if (task.stageId !== stagingId) return `the result names stage ${stagingId}, but the children were sent to ${task.stageId}`;
  if (task.current !== null) return `${task.current.hash} arrived only in part (${formatInt(task.current.received)} of ${formatInt(task.current.size)} bytes)`;
  for (const h of declared) if (!task.done.has(h)) return `declared child ${h} did not arrive`;
  for (const h of task.done) if (!declared.has(h)) return `child ${h} arrived but the result does not declare it`;
  return null;
}
