// The tasks one master holds and hands out. A task is a corpus hash claimed under a fence:
//
//   held (hash -> fence)   every lease this master holds; only a held fence is dispatched
//   pending                held tasks waiting for an executor, in order (requeued ones in front)
//   active (task id)       handed to one executor and not yet answered
//
//   claim -> hold --next--> active --take (its result)--> (the master commits or requeues it)
//                           active --release (executor gone)--> pending front, same fence
//   a fence lost (heartbeat) or dropped --> nothing of it is dispatched any more
//
// Task ids are this master's own, never reused within a campaign. No I/O: the lease table and the
// counters are the master's.
import type { Task } from "../task.ts";

export interface ActiveTask {
  taskId: number;
  hash: string;
  fence: string;
  executor: string;
}

export class Dispatch {
  private readonly held = new Map<string, string>();
  private pending: { hash: string; fence: string }[] = [];
  private readonly active = new Map<number, ActiveTask>();
  private nextTaskId = 1;

  /** `timeoutSeconds`: the per-run timeout every task carries. */
  constructor(private readonly timeoutSeconds: number) {}

  get pendingCount(): number {
    return this.pending.length;
  }

  get activeCount(): number {
    return this.active.size;
  }

  /** Every held lease, hash -> fence (what a heartbeat renews). */
  get fences(): ReadonlyMap<string, string> {
    return this.held;
  }

  holds(hash: string): boolean {
    return this.held.has(hash);
  }

  /** A fresh claim: held, and queued behind the tasks already pending. */
  hold(hash: string, fence: string): void {
    this.held.set(hash, fence);
    this.pending.push({ hash, fence });
  }

  /** The next pending task under a current fence, now active on `executor`. */
  next(executor: string): Task | null {
    while (this.pending.length > 0) {
      const p = this.pending.shift()!;
      if (this.held.get(p.hash) !== p.fence) continue;
      const taskId = this.nextTaskId++;
      this.active.set(taskId, { taskId, hash: p.hash, fence: p.fence, executor });
      return { id: taskId, hash: p.hash, fence: p.fence, timeoutSeconds: this.timeoutSeconds };
    }
    return null;
  }

  /** The ids of the tasks `executor` holds. */
  activeOn(executor: string): number[] {
    const ids: number[] = [];
    for (const t of this.active.values()) if (t.executor === executor) ids.push(t.taskId);
    return ids;
  }

  /** The active task `taskId` if `executor` holds it, no longer active; null otherwise (nothing changes). */
  take(taskId: number, executor: string): ActiveTask | null {
    const task = this.active.get(taskId);
    if (!task || task.executor !== executor) return null;
    this.active.delete(taskId);
    return task;
  }

  /** Every active task of `executor`, no longer active, in the order they were handed out. */
  takeAll(executor: string): ActiveTask[] {
    const taken: ActiveTask[] = [];
    for (const [id, t] of this.active) {
      if (t.executor !== executor) continue;
      this.active.delete(id);
      taken.push(t);
    }
    return taken;
  }

  /** Back to the front of the queue under the same fence; false (nothing queued) if the fence is no longer held. */
  requeueFront(t: { hash: string; fence: string }): boolean {
    if (this.held.get(t.hash) !== t.fence) return false;
    this.pending.unshift({ hash: t.hash, fence: t.fence });
    return true;
  }

  /** The lease of `hash` is finished with (committed, stale or deferred): its fence is no longer held. */
  forget(hash: string): void {
    this.held.delete(hash);
  }

  /** The fence of `hash` is given up: nothing of it is dispatched any more. */
  drop(hash: string): void {
    this.held.delete(hash);
    this.pending = this.pending.filter((p) => p.hash !== hash);
  }

  /** Leases a heartbeat found lost: their fences are no longer held, their pending tasks leave the queue. */
  dropLost(hashes: readonly string[]): void {
    for (const h of hashes) this.held.delete(h);
    if (hashes.length) this.pending = this.pending.filter((p) => this.held.get(p.hash) === p.fence);
  }
}
