// ExploreMaster never follows a symlink a worker or an input producer wrote: a result whose stage,
// executor directory or staged child is a link is refused and counted, an input that is a link is
// refused and counted, an input directory that now leads elsewhere is not read; and the link's
// target is left exactly as it was, with nothing of it promoted into the corpus.
import assert from "node:assert/strict";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { DEFAULT_BUDGETS } from "../../src/explore/state/corpus.ts";
import { canonicalManifest, LeaseTable } from "../../src/explore/state/lease-table.ts";
import { ExploreMaster } from "../../src/explore/master/master.ts";
import type { Task, TaskResult } from "../../src/explore/task.ts";
import { scratchDirs, sha256 } from "../helpers/scratch.ts";
import { writeSeed } from "../helpers/explore.ts";

/** The corpus directory's entries but the hidden state directory (the master keeps its ledger there). */
const publicNames = (dir: string) => readdirSync(dir).filter((n) => n !== ".fuzzfleet");
import { snapshot } from "../helpers/tree-snapshot.ts";
import { problem } from "../../src/core/problems.ts";

const { freshDir } = scratchDirs("master-links");
const STAGE = "a".repeat(32);

interface Setup {
  dir: string;
  master: ExploreMaster;
  inputDir: string;
  corpusDir: string;
  stagingRoot: string;
  leases: LeaseTable;
  log: string[];
}

function setup(seeds: Record<string, string> = { s: "seed\n" }): Setup {
  const dir = freshDir();
  const inputDir = join(dir, "in");
  const corpusDir = join(dir, "corpus");
  const stagingRoot = join(dir, "staging");
  mkdirSync(inputDir);
  mkdirSync(corpusDir);
  for (const [name, content] of Object.entries(seeds)) writeSeed(join(inputDir, name), content);
  const leases = new LeaseTable({ root: join(dir, "leases"), durability: "fence" });
  const log: string[] = [];
  const master = new ExploreMaster({
    corpusDir,
    inputDir,
    stagingRoot,
    leases,
    epoch: "e".repeat(64),
    rank: 0,
    build: "0123456789ab",
    ranks: [0],
    ownership: "rendezvous",
    budgets: DEFAULT_BUDGETS,
    timeoutSeconds: 5,
    leaseTtlMs: 60_000,
    wallNow: () => Date.now(),
    log: (line) => log.push(line),
  });
  return { dir, master, inputDir, corpusDir, stagingRoot, leases, log };
}

/** A result for `task` declaring `children` in stage STAGE. */
function result(task: Task, children: string[]): TaskResult {
  return {
    taskId: task.id,
    fence: task.fence,
    inputHash: task.hash,
    children: children.map((c) => sha256(c)),
    generated: children.length,
    stagedBytes: children.reduce((n, c) => n + Buffer.byteLength(c), 0),
    stagingId: STAGE,
    retcode: 0,
    seconds: 0.01,
    failure: null,
    budget: null,
    detail: null,
    finding: null,
  };
}

/** A directory outside the campaign that looks like a stage: files named by their SHA-256. */
function lookAlike(dir: string, contents: string[]): string {
  mkdirSync(dir, { recursive: true });
  for (const c of contents) writeFileSync(join(dir, sha256(c)), c);
  return dir;
}

describe("ExploreMaster and symlinked stages", () => {
  const children = ["theirs 1", "theirs 2"];

  it("refuses a result whose stage is a symlink: the target is neither promoted nor removed", () => {
    const s = setup();
    s.master.admitInputs();
    const task = s.master.nextTask("local-0")!;
    const victim = lookAlike(join(s.dir, "other-campaign", "stage"), children);
    const before = snapshot(victim, true);
    mkdirSync(join(s.stagingRoot, "local-0"));
    symlinkSync(victim, join(s.stagingRoot, "local-0", STAGE));
    assert.equal(s.master.consumeResult("local-0", result(task, children)), "refused");
    assert.equal(s.master.counters.invalidResults, 1);
    assert.match(s.master.quarantined.get("local-0") ?? "", /is a symbolic link to '.*other-campaign\/stage'; nothing is followed through a symlink/);
    assert.deepEqual(snapshot(victim, true), before);
    assert.deepEqual(publicNames(s.corpusDir).sort(), [sha256("seed\n")], "nothing of the link's target is public");
    assert.equal(s.master.pendingCount, 1, "the task goes back to the queue");
  });

  it("refuses a result whose executor directory is a symlink to a directory holding a real stage", () => {
    const s = setup();
    s.master.admitInputs();
    const task = s.master.nextTask("w1")!;
    const victim = join(s.dir, "other-campaign", "w1");
    lookAlike(join(victim, STAGE), children);
    const before = snapshot(victim, true);
    symlinkSync(victim, join(s.stagingRoot, "w1"));
    assert.equal(s.master.consumeResult("w1", result(task, children)), "refused");
    assert.match(s.master.problems.map((p) => p.message).join("\n"), /stage a{32}: .*staging\/w1 is a symbolic link/);
    assert.deepEqual(snapshot(victim, true), before, "the stage behind the link is still there, every file in place");
    assert.deepEqual(publicNames(s.corpusDir), [sha256("seed\n")]);
  });

  it("refuses a staged child that is a symlink, even to the right bytes", () => {
    const s = setup();
    s.master.admitInputs();
    const task = s.master.nextTask("local-0")!;
    const victim = lookAlike(join(s.dir, "elsewhere"), ["theirs 1"]);
    const before = snapshot(victim, true);
    mkdirSync(join(s.stagingRoot, "local-0", STAGE), { recursive: true });
    symlinkSync(join(victim, sha256("theirs 1")), join(s.stagingRoot, "local-0", STAGE, sha256("theirs 1")));
    assert.equal(s.master.consumeResult("local-0", result(task, ["theirs 1"])), "refused");
    assert.match(s.master.problems.map((p) => p.message).join("\n"), /symbolic link/);
    assert.deepEqual(snapshot(victim, true), before);
    assert.deepEqual(publicNames(s.corpusDir), [sha256("seed\n")]);
  });

  it("a staging root replaced after the master created it is not read", () => {
    const s = setup();
    s.master.admitInputs();
    const task = s.master.nextTask("local-0")!;
    const victim = join(s.dir, "other-campaign");
    lookAlike(join(victim, "local-0", STAGE), children);
    const before = snapshot(victim, true);
    rmSync(s.stagingRoot, { recursive: true });
    symlinkSync(victim, s.stagingRoot);
    assert.equal(s.master.consumeResult("local-0", result(task, children)), "refused");
    assert.deepEqual(snapshot(victim, true), before);
    assert.deepEqual(publicNames(s.corpusDir), [sha256("seed\n")]);
  });

  it("a commit replayed from the lease table never promotes from a symlinked stage", () => {
    const s = setup();
    s.master.admitInputs();
    const task = s.master.nextTask("local-0")!;
    const manifest = canonicalManifest({ worker: "local-0", staging_id: STAGE, hashes: children.map((c) => sha256(c)), num_generated: 2 });
    assert.ok(s.leases.beginCommit(task.hash, task.fence, manifest, Date.now()));
    const victim = lookAlike(join(s.dir, "other-campaign", "stage"), children);
    const before = snapshot(victim, true);
    mkdirSync(join(s.stagingRoot, "local-0"));
    symlinkSync(victim, join(s.stagingRoot, "local-0", STAGE));
    assert.throws(() => s.master.replayCommitting(), /neither staged in its stage \(gone\) nor public/);
    assert.deepEqual(snapshot(victim, true), before);
    assert.deepEqual(publicNames(s.corpusDir), [sha256("seed\n")]);
  });
});

describe("ExploreMaster and symlinked inputs", () => {
  it("refuses an input that is a symlink, counts and logs it once, and admits the regular ones", () => {
    const s = setup({ a: "regular\n" });
    const elsewhere = join(s.dir, "elsewhere");
    mkdirSync(elsewhere);
    writeFileSync(join(elsewhere, "secret"), "not an input\n");
    symlinkSync(join(elsewhere, "secret"), join(s.inputDir, "link"));
    assert.equal(s.master.admitInputs(), 1);
    assert.equal(s.master.admitInputs(), 0);
    assert.equal(s.master.counters.refusedInputs, 1);
    assert.deepEqual(
      s.log.filter((l) => l.includes("link")),
      [`input link is a symbolic link: refused, never followed; put the file itself into ${s.inputDir}`],
    );
    assert.deepEqual(publicNames(s.corpusDir), [sha256("regular\n")]);
    assert.equal(readFileSync(join(elsewhere, "secret"), "utf8"), "not an input\n");
  });

  it("reads nothing from an input directory replaced by a symlink, says so once, and resumes when it is back", () => {
    const s = setup({ a: "first\n" });
    assert.equal(s.master.admitInputs(), 1);
    const other = join(s.dir, "other-inputs");
    mkdirSync(other);
    writeFileSync(join(other, "x"), "not from this campaign\n");
    renameSync(s.inputDir, join(s.dir, "in-original"));
    symlinkSync(other, s.inputDir);
    assert.equal(s.master.admitInputs(), 0);
    assert.equal(s.master.admitInputs(), 0);
    assert.equal(s.master.countLateInputs(), 0);
    assert.deepEqual(s.master.problems, [
      problem("master", `the input directory ${s.inputDir} was replaced since the campaign started (it now leads to another directory); nothing is read from it until the original is back: restore it, or start a new campaign on the new directory`),
    ]);
    assert.equal(s.master.counters.refusedInputs, 1);
    assert.deepEqual(publicNames(s.corpusDir), [sha256("first\n")]);
    rmSync(s.inputDir);
    renameSync(join(s.dir, "in-original"), s.inputDir);
    writeSeed(join(s.inputDir, "b"), "second\n");
    assert.equal(s.master.admitInputs(), 1);
    assert.deepEqual(publicNames(s.corpusDir).sort(), [sha256("first\n"), sha256("second\n")].sort());
  });
});
