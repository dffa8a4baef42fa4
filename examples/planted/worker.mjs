// Worker-thread entry: runs one task per message and posts the result back.
// Message in:  { id, task: "sweep" | "check" | "shrink", args, settings }
// Message out: { id, result } or { id, error }

import { parentPort } from "node:worker_threads";
import { runTask } from "./pool.mjs";

parentPort.on("message", ({ id, task, args, settings }) => {
  try {
    parentPort.postMessage({ id, result: runTask(task, args, settings) });
  } catch (err) {
    parentPort.postMessage({ id, error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  }
});
