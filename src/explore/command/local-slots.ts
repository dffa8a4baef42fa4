// The master's own executors: N local slots, each running one task at a time in-process
// (executor/execute.ts, exactly as a remote worker runs it) and handing the result to the master
// like any executor. Slot i is the executor `local-<i>`, with its stages under the master's
// staging root and its scratch under this master's scratch directory.
//
//   free     --fill (a task under a current fence, slot not quarantined)--> running
//   running  --the target finished--> free, refilled at once; then the result is consumed, so
//            the commit's file work overlaps the next run
//   running  --abort--> the result says "interrupted" and the master requeues the task
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { Budgets } from "../defaults.ts";
import { disposeScratch, executeTask, type ExecuteSetup } from "../executor/execute.ts";
import type { ExploreMaster } from "../master/master.ts";
import { problem } from "../../core/problems.ts";
import type { Task } from "../task.ts";

export interface LocalSlotsOptions {
  slots: number;
  master: ExploreMaster;
  corpusDir: string;
  target: readonly string[];
  targetCwd: string;
  simulate: boolean;
  budgets: Budgets;
  /** This master's private scratch space (one directory per local slot below it). */
  scratchDir: string;
  /** Whether a new run may start now (the master loop's dispatch window). */
  dispatchOpen: () => boolean;
  /** A run ended (its result consumed, or its failure recorded). */
  onSettled: () => void;
}

export class LocalSlots {
  private readonly controllers: AbortController[] = [];
  private readonly running = new Set<Promise<void>>();
  /** What every run of slot i needs, built with its first task. */
  private readonly setups: ExecuteSetup[] = [];

  constructor(private readonly o: LocalSlotsOptions) {}

  get count(): number {
    return this.o.slots;
  }

  /** Starts a task on every free slot that is not quarantined, while the master has tasks. */
  fill(): void {
    for (let i = 0; i < this.o.slots; i++) {
      const key = `local-${i}`;
      if (this.controllers[i] || this.o.master.quarantined.has(key)) continue;
      const task = this.o.master.nextTask(key);
      if (!task) return;
      this.start(i, key, task);
    }
  }

  /** Interrupts every running task; its result ("interrupted") requeues it. */
  abort(): void {
    for (const c of this.controllers) c?.abort();
  }

  /** Resolves once every started run has ended and its result was consumed. */
  async settled(): Promise<void> {
    await Promise.all(this.running);
  }

  /** Removes the slots' scratch directories (after settled()). */
  dispose(): void {
    for (let i = 0; i < this.o.slots; i++) disposeScratch(join(this.o.scratchDir, `local-${i}`));
    rmSync(this.o.scratchDir, { recursive: true, force: true });
  }

  private start(i: number, key: string, task: Task): void {
    const { master } = this.o;
    const controller = new AbortController();
    this.controllers[i] = controller;
    this.setups[i] ??= {
      corpusDir: this.o.corpusDir,
      stageRoot: master.stageRoot(key),
      target: this.o.target,
      targetCwd: this.o.targetCwd,
      simulate: this.o.simulate,
      budgets: this.o.budgets,
      scratchRoot: join(this.o.scratchDir, key),
    };
    const run = executeTask(task, this.setups[i], controller.signal)
      .then(
        (result) => {
          // The slot is free once its target has finished: the next run starts before this
          // result is committed, so the commit's file work overlaps the next target's run.
          if (this.controllers[i] === controller) delete this.controllers[i];
          if (this.o.dispatchOpen()) this.fill();
          try {
            master.consumeResult(key, result);
          } catch (err) {
            // The slot may hold its next task already, so nothing is released here; the task of
            // this result stays with its lease (committing or leased) for --resume or takeover.
            master.problems.push(problem("executor", `local slot ${i}: the result of task ${task.id} could not be committed: ${(err as Error).message}`));
          }
        },
        (err) => {
          master.problems.push(problem("executor", `local slot ${i} failed: ${(err as Error).message}`));
          master.release(key);
        },
      )
      .finally(() => {
        if (this.controllers[i] === controller) delete this.controllers[i];
        this.running.delete(run);
        this.o.onSettled();
      });
    this.running.add(run);
  }
}
