// ingestChunk never follows a symlink a generator or a worker wrote: a symlink on the way to a
// chunk's results refuses the whole chunk; one in failures/ or quarantine/ makes that entry
// malformed. Either way the link's target is left exactly as it was, and nothing of it reaches
// the campaign.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, beforeEach, describe, test } from "node:test";
import { ingestChunk, type IngestResult } from "../../src/sweep/generator/ingest.ts";
import { GEN_HASH, ingestBench, snapshot, writeFailure, type IngestBench } from "./ingest-fixture.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-ingest-links-"));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

/** A directory outside the campaign laid out like a chunk's results, with a failure and a quarantined test. */
function victimResults(dir: string): string {
  writeFailure(dir, 5, { seed: 5, bucket: "crash" }, { "input.min.txt": "victim's", "report.txt": "victim's report" });
  mkdirSync(join(dir, "quarantine"));
  writeFileSync(join(dir, "quarantine", "v.c"), "victim's test");
  return dir;
}

function failureCount(b: IngestBench): number {
  return (b.db.prepare("SELECT COUNT(*) AS n FROM failure").get() as { n: number }).n;
}

function refusedLike(r: IngestResult, results: string, reason: RegExp): void {
  assert.match(r.refused ?? "(not refused)", reason);
  assert.equal(r.malformed.length, 1);
  assert.equal(r.malformed[0]!.entry, results);
  assert.equal(r.malformed[0]!.reason, r.refused);
  assert.ok(r.malformed[0]!.keptAt.endsWith(".txt"));
  assert.match(readFileSync(r.malformed[0]!.keptAt, "utf8"), /was refused: /);
  assert.deepEqual([r.finds, r.quarantine, r.newFailures], [0, 0, 0]);
}

describe("ingestChunk and symlinks", () => {
  let b: IngestBench;
  let victim: string;
  let before: Record<string, string>;

  beforeEach(() => {
    const dir = join(root, String(n++));
    b = ingestBench(dir);
    victim = victimResults(join(dir, "victim"));
    before = snapshot(victim, true);
  });

  /** The victim is exactly as it was, and nothing of it reached the campaign's failures or samples. */
  function untouched(): void {
    assert.deepEqual(snapshot(victim, true), before, "the symlink's target is unchanged");
    assert.deepEqual(readdirSync(join(b.out, "failures")), [], "no artifact directory");
    assert.ok(!existsSync(join(b.out, "quarantine")), "no quarantine sample");
    assert.equal(failureCount(b), 0);
  }

  test("a chunk scratch directory replaced by a symlink refuses the chunk", () => {
    const t = b.chunk(1, 10);
    symlinkSync(victim, t.scratch);
    const r = ingestChunk(b.store, t);
    refusedLike(r, t.resultsDir, new RegExp(`^${t.scratch} is a symbolic link to '${victim}'; nothing is followed through a symlink; the chunk's results are read only from real directories$`));
    untouched();
  });

  test("a symlinked results subdirectory, or <out>/tmp itself, refuses the chunk", () => {
    const t = b.chunk(1, 10, "run-000000");
    mkdirSync(t.scratch);
    symlinkSync(victim, t.resultsDir);
    refusedLike(ingestChunk(b.store, t), t.resultsDir, /run-000000 is a symbolic link/);
    untouched();

    const u = b.chunk(1, 10);
    renameSync(join(b.out, "tmp"), join(b.out, "tmp-real"));
    mkdirSync(join(victim, "..", "tmp-elsewhere", `chunk-${u.chunkId}`), { recursive: true });
    renameSync(join(victim, "failures"), join(victim, "..", "tmp-elsewhere", `chunk-${u.chunkId}`, "failures"));
    symlinkSync(join(victim, "..", "tmp-elsewhere"), join(b.out, "tmp"));
    const elsewhere = snapshot(join(victim, "..", "tmp-elsewhere"), true);
    refusedLike(ingestChunk(b.store, u), u.resultsDir, new RegExp(`^${join(b.out, "tmp")} is a symbolic link`));
    assert.deepEqual(snapshot(join(victim, "..", "tmp-elsewhere"), true), elsewhere);
    assert.equal(failureCount(b), 0);
  });

  test("failures/ or quarantine/ that is a symlink refuses the chunk", () => {
    const t = b.chunk(1, 10);
    mkdirSync(t.scratch);
    symlinkSync(join(victim, "failures"), join(t.scratch, "failures"));
    refusedLike(ingestChunk(b.store, t), t.resultsDir, /failures is a symbolic link/);
    const u = b.chunk(1, 10);
    mkdirSync(u.scratch);
    symlinkSync(join(victim, "quarantine"), join(u.scratch, "quarantine"));
    refusedLike(ingestChunk(b.store, u), u.resultsDir, /quarantine is a symbolic link/);
    untouched();
  });

  test("a failure entry that is a symlink is malformed, kept as a note; the chunk's real entries are recorded", () => {
    const t = b.chunk(1, 10);
    writeFailure(t.scratch, 3, { seed: 3, bucket: "crash" }, { "input.min.txt": "mine" });
    symlinkSync(join(victim, "failures", "5"), join(t.scratch, "failures", "5"));
    const r = ingestChunk(b.store, t);
    assert.equal(r.refused, null);
    assert.deepEqual([r.finds, r.newFailures], [1, 1]);
    assert.deepEqual(
      r.malformed.map((m) => [m.entry, m.reason]),
      [[join(t.scratch, "failures", "5"), `a symbolic link to '${join(victim, "failures", "5")}'; nothing is followed through a symlink`]],
    );
    assert.equal(r.malformed[0]!.keptAt, join(b.out, "malformed", `chunk-${t.chunkId}-5.txt`));
    assert.match(readFileSync(r.malformed[0]!.keptAt, "utf8"), /failures\/5: a symbolic link to /);
    assert.deepEqual(snapshot(victim, true), before);
    const dir = (b.db.prepare("SELECT artifact_dir FROM failure").get() as { artifact_dir: string }).artifact_dir;
    assert.equal(readFileSync(join(b.out, dir, "input.min.txt"), "utf8"), "mine");
  });

  test("a symlink or a FIFO inside a failure entry makes it malformed; its regular files are kept, the link is not", () => {
    const t = b.chunk(1, 10);
    writeFailure(t.scratch, 3, { seed: 3, bucket: "crash" }, { "input.min.txt": "A", "logs/run.txt": "log" });
    symlinkSync(join(victim, "failures", "5", "report.txt"), join(t.scratch, "failures", "3", "report.txt"));
    writeFailure(t.scratch, 4, { seed: 4, bucket: "crash" }, { "input.min.txt": "B" });
    symlinkSync(join(victim, "failures"), join(t.scratch, "failures", "4", "escape"));
    writeFailure(t.scratch, 6, { seed: 6, bucket: "crash" }, { "input.min.txt": "C" });
    assert.equal(spawnSync("mkfifo", [join(t.scratch, "failures", "6", "pipe")]).status, 0);
    const r = ingestChunk(b.store, t);
    assert.deepEqual(
      r.malformed.map((m) => [m.entry.split("/").pop(), m.reason]),
      [
        ["3", `report.txt: a symbolic link to '${join(victim, "failures", "5", "report.txt")}'; nothing is followed through a symlink`],
        ["4", `escape: a symbolic link to '${join(victim, "failures")}'; nothing is followed through a symlink`],
        ["6", "pipe: a FIFO; only regular files and directories are accepted"],
      ],
    );
    const kept = join(b.out, "malformed", `chunk-${t.chunkId}-3`);
    assert.deepEqual(r.malformed[0]!.keptAt, kept);
    assert.deepEqual(snapshot(kept), { "input.min.txt": "644 A", logs: "dir", "logs/run.txt": "644 log", "meta.json": '644 {"seed":3,"bucket":"crash"}' });
    assert.equal(r.finds, 0);
    untouched();
  });

  test("quarantined tests that are symlinks are malformed, not counted and not sampled", () => {
    const t = b.chunk(1, 10);
    mkdirSync(join(t.scratch, "quarantine"), { recursive: true });
    writeFileSync(join(t.scratch, "quarantine", "a.c"), "bad a");
    symlinkSync(join(victim, "quarantine", "v.c"), join(t.scratch, "quarantine", "b.c"));
    symlinkSync(join(victim, "quarantine"), join(t.scratch, "quarantine", "c"));
    const r = ingestChunk(b.store, t);
    assert.equal(r.refused, null);
    assert.equal(r.quarantine, 1);
    assert.deepEqual(
      r.malformed.map((m) => [m.entry.split("/").slice(-2).join("/"), m.reason]),
      [
        ["quarantine/b.c", `a symbolic link to '${join(victim, "quarantine", "v.c")}'; nothing is followed through a symlink`],
        ["quarantine/c", `a symbolic link to '${join(victim, "quarantine")}'; nothing is followed through a symlink`],
      ],
    );
    assert.equal(r.malformed[0]!.keptAt, r.malformed[1]!.keptAt, "one note for the chunk's refused samples");
    assert.deepEqual(readdirSync(join(b.out, "quarantine", GEN_HASH.slice(0, 12))), ["a.c"]);
    assert.deepEqual(snapshot(victim, true), before);
  });

  test("a campaign directory replaced by a symlink refuses the chunk and nothing is written through it", () => {
    const t = b.chunk(1, 10);
    writeFailure(t.scratch, 3, { seed: 3, bucket: "crash" }, { "input.min.txt": "A" });
    const sink = join(victim, "..", "sink");
    mkdirSync(sink);
    rmSync(join(b.out, "failures"), { recursive: true });
    symlinkSync(sink, join(b.out, "failures"));
    const r = ingestChunk(b.store, t);
    assert.match(r.refused ?? "", new RegExp(`^the campaign directory ${join(b.out, "failures")} is a symbolic link to '${sink}'; nothing is followed through a symlink; restore it as a real directory$`));
    assert.deepEqual(readdirSync(sink), []);
    assert.equal(failureCount(b), 0);
    assert.ok(existsSync(join(t.scratch, "failures", "3", "meta.json")), "the scratch directory keeps the entry");
  });
});
