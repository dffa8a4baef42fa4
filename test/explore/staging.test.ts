import assert from "node:assert/strict";
import { appendFileSync, mkdirSync, readFileSync, readdirSync, renameSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { DEFAULT_BUDGETS, FileProblem, IntegrityError, STAGE_ID_RE, type Budgets } from "../../src/explore/state/corpus.ts";
import { promoteChildren } from "../../src/explore/state/promotion.ts";
import { BudgetError, collectOutputs, StagingArea, stageOutputs, verifyStage } from "../../src/explore/state/staging.ts";
import { PinnedDir } from "../../src/files/pinned-dir.ts";
import { scratchDirs, sha256 } from "../helpers/scratch.ts";
import { snapshot } from "../helpers/tree-snapshot.ts";

const { freshDir } = scratchDirs("staging");

function budgets(over: Partial<Budgets>): Budgets {
  return { ...DEFAULT_BUDGETS, ...over };
}

function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
}

function catchError(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  assert.fail("expected an error");
}

/** A stage directory written by hand, named by content. */
function handStage(contents: string[]): { dir: string; hashes: string[]; bytes: number } {
  const dir = freshDir();
  const hashes = contents.map((c) => sha256(c));
  contents.forEach((c, i) => writeFileSync(join(dir, hashes[i]), c));
  return { dir, hashes, bytes: contents.reduce((n, c) => n + Buffer.byteLength(c), 0) };
}

describe("collectOutputs", () => {
  it("collects every output except .hints files, sorted, with the byte total", () => {
    const out = freshDir();
    writeFiles(out, { "id-2": "bb", "id-1": "a", "id-1.hints": "hint bytes", "id-3": "" });
    const got = collectOutputs(out, DEFAULT_BUDGETS);
    assert.deepEqual(got, {
      files: [
        { path: join(out, "id-1"), size: 1 },
        { path: join(out, "id-2"), size: 2 },
        { path: join(out, "id-3"), size: 0 },
      ],
      totalBytes: 3,
    });
  });

  it("enforces the child-count budget without counting .hints files", () => {
    const out = freshDir();
    writeFiles(out, { a: "1", b: "2", "a.hints": "", "b.hints": "" });
    assert.equal(collectOutputs(out, budgets({ maxChildren: 2 })).files.length, 2);
    writeFileSync(join(out, "c"), "3");
    const err = catchError(() => collectOutputs(out, budgets({ maxChildren: 2 })));
    assert.ok(err instanceof BudgetError);
    assert.deepEqual([err.resource, err.observed, err.limit], ["objects", 3, 2]);
  });

  it("enforces the result byte budget", () => {
    const out = freshDir();
    writeFiles(out, { a: "12345", b: "67890" });
    assert.equal(collectOutputs(out, budgets({ maxResultBytes: 10 })).totalBytes, 10);
    const err = catchError(() => collectOutputs(out, budgets({ maxResultBytes: 9 })));
    assert.ok(err instanceof BudgetError);
    assert.deepEqual([err.resource, err.observed, err.limit], ["bytes", 10, 9]);
  });

  it("rejects a symlinked or non-regular output as not a regular file", () => {
    const out = freshDir();
    const elsewhere = freshDir();
    writeFileSync(join(elsewhere, "secret"), "s");
    symlinkSync(join(elsewhere, "secret"), join(out, "a"));
    const err = catchError(() => collectOutputs(out, DEFAULT_BUDGETS));
    assert.ok(err instanceof FileProblem);
    assert.equal(err.problem, "symlink");
    assert.match(err.message, /not a regular file/);
    unlinkSync(join(out, "a"));
    mkdirSync(join(out, "sub"));
    const dirErr = catchError(() => collectOutputs(out, DEFAULT_BUDGETS));
    assert.ok(dirErr instanceof FileProblem);
    assert.equal(dirErr.problem, "not-regular");
    assert.match(dirErr.message, /not a regular file/);
  });
});

describe("stageOutputs", () => {
  it("stages two identical outputs as two hashes, one file, bytes counted twice", () => {
    const out = freshDir();
    const root = freshDir();
    writeFiles(out, { a: "twin", b: "twin", c: "other" });
    const staged = stageOutputs(root, collectOutputs(out, DEFAULT_BUDGETS), DEFAULT_BUDGETS);
    assert.match(staged.stageId, STAGE_ID_RE);
    assert.deepEqual(staged.hashes, [sha256("twin"), sha256("twin"), sha256("other")]);
    assert.equal(staged.stagedBytes, 13);
    const stageDir = join(root, staged.stageId);
    assert.deepEqual(readdirSync(stageDir).sort(), [sha256("other"), sha256("twin")].sort());
    assert.equal(readFileSync(join(stageDir, sha256("twin")), "utf8"), "twin");
    assert.deepEqual(verifyStage(stageDir, staged.hashes, staged.stagedBytes, DEFAULT_BUDGETS.maxInputBytes), { ok: true });
    assert.equal(verifyStage(stageDir, staged.hashes, 9, DEFAULT_BUDGETS.maxInputBytes).ok, false, "bytes counted once do not match");
  });

  it("stages an empty output set as an empty stage directory", () => {
    const root = freshDir();
    const staged = stageOutputs(root, { files: [], totalBytes: 0 }, DEFAULT_BUDGETS);
    assert.deepEqual(staged.hashes, []);
    assert.deepEqual(readdirSync(join(root, staged.stageId)), []);
  });

  it("refuses an output set over budget before creating a stage", () => {
    const out = freshDir();
    const root = freshDir();
    writeFiles(out, { a: "1", b: "2", c: "3" });
    const outputs = collectOutputs(out, DEFAULT_BUDGETS);
    const err = catchError(() => stageOutputs(root, outputs, budgets({ maxChildren: 2 })));
    assert.ok(err instanceof BudgetError);
    assert.equal(err.resource, "objects");
    assert.equal(err.stageId, undefined);
    assert.deepEqual(readdirSync(root), []);
  });

  it("reports an output that grew past the byte budget with the stage id and leaves no stage", () => {
    const out = freshDir();
    const root = freshDir();
    writeFiles(out, { a: "12345", b: "67890" });
    const limits = budgets({ maxResultBytes: 12 });
    const outputs = collectOutputs(out, limits);
    appendFileSync(join(out, "b"), "abcdef");
    const err = catchError(() => stageOutputs(root, outputs, limits));
    assert.ok(err instanceof BudgetError);
    assert.deepEqual([err.resource, err.observed, err.limit], ["bytes", 16, 12]);
    assert.match(err.stageId ?? "", STAGE_ID_RE);
    assert.deepEqual(readdirSync(root), []);
  });

  it("reports an output above the per-object budget as an input-bytes budget error", () => {
    const out = freshDir();
    const root = freshDir();
    writeFiles(out, { a: "123456" });
    const err = catchError(() => stageOutputs(root, collectOutputs(out, DEFAULT_BUDGETS), budgets({ maxInputBytes: 5 })));
    assert.ok(err instanceof BudgetError);
    assert.deepEqual([err.resource, err.observed, err.limit], ["input-bytes", 6, 5]);
    assert.match(err.stageId ?? "", STAGE_ID_RE);
    assert.deepEqual(readdirSync(root), []);
  });

  it("refuses an output replaced by a symlink after collection and leaves no stage", () => {
    const out = freshDir();
    const root = freshDir();
    writeFiles(out, { a: "first", b: "second" });
    const outputs = collectOutputs(out, DEFAULT_BUDGETS);
    unlinkSync(join(out, "b"));
    symlinkSync(join(out, "a"), join(out, "b"));
    const err = catchError(() => stageOutputs(root, outputs, DEFAULT_BUDGETS));
    assert.ok(err instanceof FileProblem);
    assert.equal(err.problem, "symlink");
    assert.deepEqual(readdirSync(root), []);
  });
});

describe("verifyStage", () => {
  const max = DEFAULT_BUDGETS.maxInputBytes;

  it("accepts an exact stage, duplicates counted per declaration", () => {
    const s = handStage(["one", "two"]);
    assert.deepEqual(verifyStage(s.dir, [s.hashes[0], s.hashes[1], s.hashes[0]], s.bytes + 3, max), { ok: true });
  });

  it("rejects an extra file", () => {
    const s = handStage(["one", "two"]);
    const v = verifyStage(s.dir, [s.hashes[0]], 3, max);
    assert.equal(v.ok, false);
    assert.match((v as { reason: string }).reason, new RegExp(`undeclared child ${s.hashes[1]}`));
  });

  it("rejects a missing file", () => {
    const s = handStage(["one"]);
    const v = verifyStage(s.dir, [s.hashes[0], sha256("two")], 6, max);
    assert.equal(v.ok, false);
    assert.match((v as { reason: string }).reason, /missing/);
  });

  it("rejects a wrong byte total", () => {
    const s = handStage(["one", "two"]);
    const v = verifyStage(s.dir, s.hashes, s.bytes + 1, max);
    assert.equal(v.ok, false);
    assert.match((v as { reason: string }).reason, /hold 6 bytes, the result declared 7/);
  });

  it("rejects a digest mismatch", () => {
    const s = handStage(["one"]);
    writeFileSync(join(s.dir, s.hashes[0]), "ONE");
    const v = verifyStage(s.dir, s.hashes, 3, max);
    assert.equal(v.ok, false);
    assert.match((v as { reason: string }).reason, new RegExp(`holds ${sha256("ONE")}`));
  });

  it("never lets a symlink satisfy a declared child, even to the right bytes", () => {
    const s = handStage(["one"]);
    const elsewhere = freshDir();
    writeFileSync(join(elsewhere, "copy"), "one");
    unlinkSync(join(s.dir, s.hashes[0]));
    symlinkSync(join(elsewhere, "copy"), join(s.dir, s.hashes[0]));
    const v = verifyStage(s.dir, s.hashes, 3, max);
    assert.equal(v.ok, false);
    assert.match((v as { reason: string }).reason, /symbolic link/);
  });

  it("rejects a stage directory that is a symlink or absent", () => {
    const s = handStage(["one"]);
    const link = join(freshDir(), "stage");
    symlinkSync(s.dir, link);
    assert.equal(verifyStage(link, s.hashes, 3, max).ok, false);
    assert.equal(verifyStage(join(s.dir, "absent"), [], 0, max).ok, false);
  });

  it("rejects invalid names, in the stage or in the declaration", () => {
    const s = handStage(["one"]);
    writeFileSync(join(s.dir, ".part-0"), "leftover");
    const v = verifyStage(s.dir, s.hashes, 3, max);
    assert.equal(v.ok, false);
    assert.match((v as { reason: string }).reason, /invalid name '\.part-0'/);
    assert.equal(verifyStage(handStage([]).dir, ["ABC"], 0, max).ok, false);
  });

  it("finds the unexpected name before reading any declared content", () => {
    // Every declared file holds the wrong bytes; if contents were read while listing, some
    // mismatch would almost surely be met before the one undeclared name.
    const contents = Array.from({ length: 16 }, (_, i) => `child ${i}`);
    const s = handStage(contents);
    for (const h of s.hashes) writeFileSync(join(s.dir, h), "tampered");
    const stranger = sha256("stranger");
    writeFileSync(join(s.dir, stranger), "stranger");
    const v = verifyStage(s.dir, s.hashes, s.bytes, max);
    assert.deepEqual(v, { ok: false, reason: `stage holds undeclared child ${stranger}` });
  });
});

describe("promoteChildren", () => {
  const max = DEFAULT_BUDGETS.maxInputBytes;

  it("moves staged children into the corpus", () => {
    const s = handStage(["one", "two"]);
    const corpus = freshDir();
    promoteChildren(s.dir, corpus, [s.hashes[1], s.hashes[0], s.hashes[1]], { maxBytes: max });
    assert.deepEqual(readdirSync(corpus).sort(), [...s.hashes].sort());
    assert.deepEqual(readdirSync(s.dir), []);
    assert.equal(readFileSync(join(corpus, s.hashes[0]), "utf8"), "one");
  });

  it("is replayable after a partial promotion and harmless when run twice", () => {
    const s = handStage(["one", "two"]);
    const corpus = freshDir();
    renameSync(join(s.dir, s.hashes[0]), join(corpus, s.hashes[0]));
    promoteChildren(s.dir, corpus, s.hashes, { maxBytes: max });
    promoteChildren(s.dir, corpus, s.hashes, { maxBytes: max });
    assert.deepEqual(readdirSync(corpus).sort(), [...s.hashes].sort());
    assert.deepEqual(readdirSync(s.dir), []);
    assert.equal(readFileSync(join(corpus, s.hashes[1]), "utf8"), "two");
  });

  it("keeps the staged copy when the same content is already public", () => {
    const s = handStage(["one"]);
    const corpus = freshDir();
    writeFileSync(join(corpus, s.hashes[0]), "one");
    promoteChildren(s.dir, corpus, s.hashes, { maxBytes: max });
    assert.deepEqual(readdirSync(s.dir), s.hashes);
  });

  it("throws for a child found neither in the stage nor in the corpus", () => {
    const s = handStage(["one"]);
    const corpus = freshDir();
    assert.throws(() => promoteChildren(s.dir, corpus, [s.hashes[0], sha256("ghost")], { maxBytes: max }), /neither staged/);
  });

  it("refuses when a public object with the child's name holds other bytes, touching nothing", () => {
    const s = handStage(["one"]);
    const corpus = freshDir();
    writeFileSync(join(corpus, s.hashes[0]), "forged");
    assert.throws(() => promoteChildren(s.dir, corpus, s.hashes, { maxBytes: max }), IntegrityError);
    assert.equal(readFileSync(join(corpus, s.hashes[0]), "utf8"), "forged");
    assert.deepEqual(readdirSync(s.dir), s.hashes);
  });

  it("refuses a public symlink and a staged symlink", () => {
    const elsewhere = freshDir();
    writeFileSync(join(elsewhere, "copy"), "one");
    const s = handStage(["one"]);
    const corpus = freshDir();
    symlinkSync(join(elsewhere, "copy"), join(corpus, s.hashes[0]));
    const pub = catchError(() => promoteChildren(s.dir, corpus, s.hashes, { maxBytes: max }));
    assert.ok(pub instanceof FileProblem && pub.problem === "symlink");

    const s2 = handStage([]);
    symlinkSync(join(elsewhere, "copy"), join(s2.dir, sha256("one")));
    const corpus2 = freshDir();
    const staged = catchError(() => promoteChildren(s2.dir, corpus2, [sha256("one")], { maxBytes: max }));
    assert.ok(staged instanceof FileProblem && staged.problem === "symlink");
    assert.deepEqual(readdirSync(corpus2), []);
  });
});

describe("pinned outputs and stages", () => {
  const max = DEFAULT_BUDGETS.maxInputBytes;

  it("collects from the pinned output directory, not from what its path was replaced with", () => {
    const dir = freshDir();
    const victim = freshDir();
    writeFiles(victim, { precious: "not an output" });
    mkdirSync(join(dir, "out"));
    writeFiles(join(dir, "out"), { child: "real child" });
    const pin = PinnedDir.openNoFollow(join(dir, "out"));
    try {
      renameSync(join(dir, "out"), join(dir, "moved"));
      symlinkSync(victim, join(dir, "out"));
      const got = collectOutputs(pin, DEFAULT_BUDGETS);
      assert.deepEqual(got.files.map((f) => f.size), [10]);
      assert.equal(readFileSync(got.files[0]!.path, "utf8"), "real child");
    } finally {
      pin.close();
    }
    assert.deepEqual(snapshot(victim), { precious: "644 not an output" });
  });

  it("refuses a stage root that is a symlink and writes nothing through it", () => {
    const out = freshDir();
    const victim = freshDir();
    writeFiles(out, { a: "child" });
    const root = join(freshDir(), "local-0");
    symlinkSync(victim, root);
    const err = catchError(() => stageOutputs(root, collectOutputs(out, DEFAULT_BUDGETS), DEFAULT_BUDGETS));
    assert.ok(err instanceof FileProblem && err.problem === "symlink", String(err));
    assert.deepEqual(readdirSync(victim), []);
  });

  it("StagingArea refuses a symlinked executor directory or stage, and a replaced root, and removes through none of them", () => {
    const base = freshDir();
    const area = new StagingArea(join(base, "staging"));
    const id = "0".repeat(32);
    // Another campaign's stage, laid out like this one's: a worker could point at it.
    const victim = freshDir();
    mkdirSync(join(victim, id));
    writeFileSync(join(victim, id, sha256("theirs")), "theirs");
    const before = snapshot(victim);

    symlinkSync(victim, join(base, "staging", "w1"));
    const viaExecutor = catchError(() => area.open("w1", id));
    assert.ok(viaExecutor instanceof FileProblem && viaExecutor.problem === "symlink");
    assert.match(viaExecutor.message, /staging\/w1 is a symbolic link to /);
    area.remove("w1", id);

    mkdirSync(join(base, "staging", "w2"));
    symlinkSync(join(victim, id), join(base, "staging", "w2", id));
    const viaStage = catchError(() => area.open("w2", id));
    assert.ok(viaStage instanceof FileProblem && viaStage.problem === "symlink");
    area.remove("w2", id);
    assert.deepEqual(readdirSync(join(base, "staging", "w2")), [], "the link itself is removed, its target is not");

    renameSync(join(base, "staging"), join(base, "staging-old"));
    symlinkSync(join(base, "staging-old"), join(base, "staging"));
    const replaced = catchError(() => area.open("w2", id));
    assert.ok(replaced instanceof FileProblem && replaced.problem === "symlink");
    assert.ok(catchError(() => area.open("../x", id)) instanceof FileProblem, "a name that is not an executor key");
    assert.deepEqual(snapshot(victim), before);
  });

  it("verifies and promotes a pinned stage whose path was swapped for another stage meanwhile", () => {
    const base = freshDir();
    const area = new StagingArea(join(base, "staging"));
    const id = "1".repeat(32);
    mkdirSync(join(base, "staging", "local-0", id), { recursive: true });
    writeFileSync(join(base, "staging", "local-0", id, sha256("mine")), "mine");
    const victim = freshDir();
    writeFileSync(join(victim, sha256("mine")), "mine");
    const stage = area.open("local-0", id);
    const corpus = freshDir();
    try {
      renameSync(join(base, "staging", "local-0", id), join(base, "staging", "local-0", "elsewhere"));
      symlinkSync(victim, join(base, "staging", "local-0", id));
      assert.deepEqual(verifyStage(stage.dir, [sha256("mine")], 4, max), { ok: true });
      promoteChildren(stage.dir, corpus, [sha256("mine")], { maxBytes: max });
      stage.remove();
      assert.deepEqual(readdirSync(join(base, "staging", "local-0")), ["elsewhere"], "removing unlinks the link, never what it points to");
    } finally {
      stage.close();
    }
    assert.deepEqual(readdirSync(join(base, "staging", "local-0", "elsewhere")), [], "the pinned stage's child was promoted");
    assert.deepEqual(snapshot(victim), { [sha256("mine")]: "644 mine" }, "the look-alike behind the link was left alone");
    assert.equal(readFileSync(join(corpus, sha256("mine")), "utf8"), "mine");
  });
});

describe("promoteChildren by two masters at once", () => {
  // Children of different parents may share content, so two masters promote the same child at the
  // same moment. A rename over the other's object made the other's read of it fail ("replaced while
  // it was being read") or, when it hit the identity check, removed a good object from the corpus.
  const racer = fileURLToPath(new URL("../fixtures/explore/promote-racer.ts", import.meta.url));
  for (const moved of [false, true]) {
    it(`neither fails and the object stays public (${moved ? "group commit" : "one commit"})`, async () => {
      const corpus = freshDir();
      const rounds = 80;
      const contents = Array.from({ length: rounds }, (_, i) => `shared child ${i} ${"x".repeat(512 * 1024)}`);
      const hashes = contents.map((c) => sha256(c));
      // Both start a second from now, so that both processes are loaded by then.
      const startAt = Date.now() + 1_500;
      const contender = (skewUs: number) => {
        const stages = contents.map((c, i) => {
          const dir = freshDir();
          writeFileSync(join(dir, hashes[i]!), c);
          return dir;
        });
        const spec = join(freshDir(), "spec.json");
        writeFileSync(spec, JSON.stringify({ corpus, stages, hashes, startAt, stepMs: 25, skewUs, moved }));
        const child = spawn(process.execPath, ["--import", "tsx", racer, spec], { stdio: ["ignore", "pipe", "inherit"] });
        return new Promise<string[]>((resolve, reject) => {
          let out = "";
          child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
          child.once("exit", (code) => (code === 0 ? resolve(JSON.parse(out) as string[]) : reject(new Error(`racer exited ${code}: ${out}`))));
        });
      };
      const [a, b] = await Promise.all([contender(0), contender(150)]);
      assert.deepEqual([...a, ...b], [], "no promotion failed");
      for (const [i, h] of hashes.entries()) assert.equal(readFileSync(join(corpus, h), "utf8"), contents[i], `child ${i} is public`);
    });
  }
});
