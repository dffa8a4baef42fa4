// An explore worker without the shared directory, from the task frame to the master's landing,
// on real files and a real target: an inline input is written straight into the run's input file
// (no private inbox file), a small result is read once into memory and sent from there (no private
// stage on disk), a large one still goes through a stage on disk, and what travels lands byte for
// byte in the master's ChildLanding (src/explore/fleet/child-landing.ts). Bytes that are not the
// task's hash are never executed.
import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ChildLanding } from "../../src/explore/fleet/child-landing.ts";
import { setupFrame } from "../../src/explore/fleet/task-frames.ts";
import { DEFAULT_BUDGETS, type Budgets } from "../../src/explore/state/corpus.ts";
import type { PutFrame, ResultFrame, TransferTermsT } from "../../src/net/messages.ts";
import { ExploreRunner, HELD_RESULT_BYTES } from "../../src/worker/explore-runner.ts";
import { scratchDirs, sha256 } from "../helpers/scratch.ts";

const { freshDir } = scratchDirs("explore-held");

const terms = (pieceBytes: number): TransferTermsT => ({ results: "", max_files: 64, max_bytes: 1 << 30, max_file_bytes: 1 << 30, piece_bytes: pieceBytes });

/**
 * A worker's own directory with a target that records what its worker's private inbox and stage
 * directories hold while it runs (they are siblings of the scratch root holding its input file),
 * then writes one child: its input followed by `grow` bytes of "x".
 */
function world(grow: number, o: { pieceBytes?: number; budgets?: Budgets } = {}) {
  const dir = freshDir();
  const work = join(dir, "work");
  mkdirSync(work);
  const target = join(work, "target.sh");
  writeFileSync(
    target,
    `#!/bin/sh
root=$(dirname "$(dirname "$(dirname "$SYMCC_INPUT_FILE")")")
ls -A "$root/inbox" > "${work}/inbox-during-run"
echo "$root" > "${work}/private-root"
echo ran >> "${work}/runs"
cp "$SYMCC_INPUT_FILE" "$SYMCC_OUTPUT_DIR/child"
head -c ${grow} /dev/zero | tr '\\0' x >> "$SYMCC_OUTPUT_DIR/child"
`,
  );
  chmodSync(target, 0o755);
  const budgets = o.budgets ?? DEFAULT_BUDGETS;
  const setup = setupFrame({ corpusDir: join(dir, "not-here"), stageRoot: join(dir, "not-here-either"), target: [target, "@@"], targetCwd: work, targetBuild: "b", targetFiles: [], simulate: false, budgets });
  const lines: string[] = [];
  const runner = new ExploreRunner(setup, (l) => lines.push(l), { workDir: work, terms: terms(o.pieceBytes ?? 1 << 20) });
  const executorRoot = join(dir, "master-staging", "w1");
  mkdirSync(executorRoot, { recursive: true });
  return { work, runner, landing: new ChildLanding(executorRoot, budgets), executorRoot, lines };
}

const noFetch = () => Promise.reject(new Error("nothing is fetched for an inline input"));
const taskItem = (id: number, hash: string, data: Buffer) => ({ task_id: id, hash, fence: "f", timeout: 10, input: { size: data.length, data: data.toString("base64") } });
const taskOf = (id: number, hash: string) => ({ id, hash, fence: "f", timeoutSeconds: 10 });

async function framesOf(it: AsyncIterable<PutFrame> | null): Promise<PutFrame[]> {
  const out: PutFrame[] = [];
  if (it !== null) for await (const f of it) out.push(f);
  return out;
}

/** What the runner's private stage directory holds (its root as the target saw it). */
function privateStages(work: string): string[] {
  const root = readFileSync(join(work, "private-root"), "utf8").trim();
  return readdirSync(join(root, "stages"));
}

describe("explore worker without the shared directory: inline input and held result", () => {
  it("an inline input is written straight into the run's input file: the private inbox stays empty during the run, and the child is sent from memory and lands whole", async () => {
    const w = world(1);
    const input = Buffer.from("seed bytes");
    const hash = sha256(input);
    try {
      await w.runner.prepare({ type: "task", tasks: [taskItem(7, hash, input)] }, noFetch);
      const result = (await w.runner.run(taskOf(7, hash), new AbortController().signal)) as ResultFrame;
      assert.equal(readFileSync(join(w.work, "inbox-during-run"), "utf8"), "", "no inbox file was made for the inline input");
      assert.equal(result.protocol_error, "");
      assert.equal(result.input_hash, hash);
      const child = Buffer.concat([input, Buffer.from("x")]);
      assert.deepEqual(result.new_hashes, [sha256(child)]);
      assert.equal(result.staged_bytes, child.length);
      assert.deepEqual(privateStages(w.work), [], "no private stage on disk");
      const frames = await framesOf(w.runner.outbox(7));
      assert.deepEqual(
        frames.map((f) => [f.path, f.offset, f.size, Buffer.from(f.data, "base64").toString(), f.sha256]),
        [[`${result.staging_id}/${sha256(child)}`, 0, child.length, child.toString(), sha256(child)]],
      );
      for (const f of frames) assert.equal(await w.landing.put(f), null);
      assert.equal(w.landing.settle(7, result.staging_id, result.new_hashes), null);
      assert.deepEqual(readFileSync(join(w.executorRoot, result.staging_id, sha256(child))), child);
      w.runner.finished(taskOf(7, hash), result, "committed");
    } finally {
      w.runner.dispose();
    }
  });

  it("a held child larger than a piece travels in several pieces, the digest with the last one only", async () => {
    const w = world(10, { pieceBytes: 4 });
    const input = Buffer.from("ab");
    const hash = sha256(input);
    try {
      await w.runner.prepare({ type: "task", tasks: [taskItem(3, hash, input)] }, noFetch);
      const result = (await w.runner.run(taskOf(3, hash), new AbortController().signal)) as ResultFrame;
      const child = Buffer.concat([input, Buffer.alloc(10, "x")]);
      const frames = await framesOf(w.runner.outbox(3));
      assert.deepEqual(
        frames.map((f) => [f.offset, Buffer.from(f.data, "base64").length, f.sha256]),
        [
          [0, 4, null],
          [4, 4, null],
          [8, 4, sha256(child)],
        ],
      );
      for (const f of frames) assert.equal(await w.landing.put(f), null);
      assert.equal(w.landing.settle(3, result.staging_id, result.new_hashes), null);
      assert.deepEqual(readFileSync(join(w.executorRoot, result.staging_id, sha256(child))), child);
    } finally {
      w.runner.dispose();
    }
  });

  it("a result over the held size is staged on disk and sent from there, then removed once reported", async () => {
    const w = world(HELD_RESULT_BYTES + 1);
    const input = Buffer.from("big");
    const hash = sha256(input);
    try {
      await w.runner.prepare({ type: "task", tasks: [taskItem(4, hash, input)] }, noFetch);
      const result = (await w.runner.run(taskOf(4, hash), new AbortController().signal)) as ResultFrame;
      const child = Buffer.concat([input, Buffer.alloc(HELD_RESULT_BYTES + 1, "x")]);
      assert.deepEqual(result.new_hashes, [sha256(child)]);
      assert.deepEqual(privateStages(w.work), [result.staging_id]);
      const frames = await framesOf(w.runner.outbox(4));
      assert.equal(frames.length, 1);
      for (const f of frames) assert.equal(await w.landing.put(f), null);
      assert.equal(w.landing.settle(4, result.staging_id, result.new_hashes), null);
      assert.deepEqual(readFileSync(join(w.executorRoot, result.staging_id, sha256(child))), child);
      w.runner.finished(taskOf(4, hash), result, "committed");
      assert.deepEqual(privateStages(w.work), [], "removed once reported");
    } finally {
      w.runner.dispose();
    }
  });

  it("inline bytes that are not the task's hash are reported with their own hash and never executed", async () => {
    const w = world(1);
    const claimed = sha256("what the task names");
    const sent = Buffer.from("other bytes");
    try {
      await w.runner.prepare({ type: "task", tasks: [taskItem(5, claimed, sent)] }, noFetch);
      const result = (await w.runner.run(taskOf(5, claimed), new AbortController().signal)) as ResultFrame;
      assert.equal(result.protocol_error, "input-copy-error");
      assert.equal(result.input_hash, sha256(sent));
      assert.equal(result.detail, "the input sent with the task does not match its name");
      assert.equal(existsSync(join(w.work, "runs")), false, "the target never ran");
      assert.equal(w.runner.outbox(5), null);
    } finally {
      w.runner.dispose();
    }
  });

  it("an inline input over the per-object budget fails its run as over the input budget, unexecuted", async () => {
    const w = world(1, { budgets: { ...DEFAULT_BUDGETS, maxInputBytes: 4 } });
    const input = Buffer.from("five!");
    const hash = sha256(input);
    try {
      await w.runner.prepare({ type: "task", tasks: [taskItem(6, hash, input)] }, noFetch);
      const result = (await w.runner.run(taskOf(6, hash), new AbortController().signal)) as ResultFrame;
      assert.equal(result.protocol_error, "input-budget-exceeded");
      assert.deepEqual(result.budget, { resource: "input-bytes", observed: 5, limit: 4 });
      assert.equal(existsSync(join(w.work, "runs")), false, "the target never ran");
    } finally {
      w.runner.dispose();
    }
  });

  it("a held result over the per-object budget is refused like a staged one", async () => {
    const w = world(8, { budgets: { ...DEFAULT_BUDGETS, maxInputBytes: 8 } });
    const input = Buffer.from("in");
    const hash = sha256(input);
    try {
      await w.runner.prepare({ type: "task", tasks: [taskItem(8, hash, input)] }, noFetch);
      const result = (await w.runner.run(taskOf(8, hash), new AbortController().signal)) as ResultFrame;
      assert.equal(result.protocol_error, "result-budget-exceeded");
      assert.deepEqual(result.budget, { resource: "input-bytes", observed: 10, limit: 8 });
      assert.equal(w.runner.outbox(8), null);
    } finally {
      w.runner.dispose();
    }
  });
});
