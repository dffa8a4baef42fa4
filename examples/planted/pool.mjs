// Spreads per-seed work over --jobs worker threads. The work is split into contiguous slices
// and the results are concatenated in slice order, so the output is the same for any job count.

import { Worker } from "node:worker_threads";
import { checkSeeds, shrinkSeeds, sweepRange } from "./seeds.mjs";

export function runTask(task, args, settings) {
  switch (task) {
    case "sweep":
      return sweepRange(args.from, args.count, settings);
    case "check":
      return checkSeeds(args.seeds, settings);
    case "shrink":
      return shrinkSeeds(args.seeds, settings);
    default:
      throw new Error(`unknown task '${task}'`);
  }
}

/** Splits n items into at most `parts` contiguous [start, end) slices of near-equal size. */
function slices(n, parts) {
  const out = [];
  for (let k = 0; k < parts; k++) {
    const start = Math.floor((n * k) / parts);
    const end = Math.floor((n * (k + 1)) / parts);
    if (end > start) out.push([start, end]);
  }
  return out;
}

/**
 * A set of worker threads, or none when jobs is 1 (then everything runs inline: no thread start-up
 * cost for the common single-job case).
 */
export class SeedPool {
  constructor(jobs, settings) {
    this.jobs = jobs;
    this.settings = settings;
    this.workers = [];
    this.nextId = 0;
  }

  /** Seeds from..from+count-1; resolves to the concatenated non-ok verdicts in seed order. */
  async sweep(from, count) {
    const parts = slices(count, this.jobs).map(([s, e]) => ({ from: from + s, count: e - s }));
    return (await this.#spread("sweep", parts)).flat();
  }

  async check(seeds) {
    const parts = slices(seeds.length, this.jobs).map(([s, e]) => ({ seeds: seeds.slice(s, e) }));
    return (await this.#spread("check", parts)).flat();
  }

  async shrink(seeds) {
    const parts = slices(seeds.length, this.jobs).map(([s, e]) => ({ seeds: seeds.slice(s, e) }));
    return (await this.#spread("shrink", parts)).flat();
  }

  async close() {
    await Promise.all(this.workers.map((w) => w.terminate()));
    this.workers = [];
  }

  async #spread(task, parts) {
    if (this.jobs === 1 || parts.length <= 1) return parts.map((args) => runTask(task, args, this.settings));
    while (this.workers.length < parts.length) this.workers.push(startWorker());
    return Promise.all(parts.map((args, k) => this.#send(this.workers[k], task, args)));
  }

  #send(worker, task, args) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const onMessage = (msg) => {
        if (msg.id !== id) return;
        cleanup();
        if (msg.error !== undefined) reject(new Error(`worker failed: ${msg.error}`));
        else resolve(msg.result);
      };
      const onError = (err) => {
        cleanup();
        reject(err);
      };
      const onExit = (code) => {
        cleanup();
        reject(new Error(`worker thread exited with code ${code} before answering`));
      };
      const cleanup = () => {
        worker.off("message", onMessage);
        worker.off("error", onError);
        worker.off("exit", onExit);
      };
      worker.on("message", onMessage);
      worker.on("error", onError);
      worker.on("exit", onExit);
      worker.postMessage({ id, task, args, settings: this.settings });
    });
  }
}

function startWorker() {
  const worker = new Worker(new URL("./worker.mjs", import.meta.url));
  // An error while a task is pending rejects that task; one between tasks must not crash the process.
  worker.on("error", () => {});
  return worker;
}
