// The target's identity (explore/state/target-identity.ts) and what keys on it: the explored
// ledger's carry-over rule (state/ledger.ts, through the master) and a finding's builds
// (state/findings.ts). Real files, real directories; the campaigns themselves are in
// rebuilt-target.test.ts.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it, test } from "node:test";
import { UsageError } from "../../src/errors.ts";
import { FindingsStore, buildNote } from "../../src/explore/state/findings.ts";
import { resolveExecutable, targetIdentity, type TargetSpec } from "../../src/explore/state/target-identity.ts";
import { loneMaster, writeSeed } from "../helpers/explore.ts";
import { scratchDirs, sha256 } from "../helpers/scratch.ts";

const { freshDir } = scratchDirs("target-identity");

function script(path: string, body: string): string {
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

function spec(dir: string, over: Partial<TargetSpec> = {}): TargetSpec {
  return { argv: ["./t.sh", "@@"], cwd: dir, files: [], path: "/usr/bin:/bin", simulate: false, ...over };
}

describe("targetIdentity", () => {
  it("changes with the executable's bytes, the argv template and every --target-file, and with nothing else", () => {
    const dir = freshDir();
    script(join(dir, "t.sh"), "exit 0");
    writeFileSync(join(dir, "runtime.so"), "runtime v1");
    const a = targetIdentity(spec(dir));
    assert.match(a.build, /^[0-9a-f]{12}$/);
    assert.equal(a.build, a.digest.slice(0, 12));
    assert.deepEqual(a.executable, { path: join(dir, "t.sh"), sha256: sha256("#!/bin/sh\nexit 0\n") });
    assert.equal(targetIdentity(spec(dir)).build, a.build, "the same target is the same build");
    assert.notEqual(targetIdentity(spec(dir, { argv: ["./t.sh", "-x", "@@"] })).build, a.build, "another argv");
    const withFile = targetIdentity(spec(dir, { files: ["runtime.so"] }));
    assert.notEqual(withFile.build, a.build, "a named file is part of it");
    assert.deepEqual(withFile.files, [{ path: join(dir, "runtime.so"), sha256: sha256("runtime v1") }]);
    writeFileSync(join(dir, "runtime.so"), "runtime v2");
    assert.notEqual(targetIdentity(spec(dir, { files: ["runtime.so"] })).build, withFile.build, "a rebuilt runtime");
    script(join(dir, "t.sh"), "exit 1");
    assert.notEqual(targetIdentity(spec(dir)).build, a.build, "a rebuilt executable");
  });

  it("finds a bare name in PATH as the executor starts it, follows symlinks to the file the kernel runs, and skips what is not executable", () => {
    const dir = freshDir();
    const bin1 = join(dir, "bin1");
    const bin2 = join(dir, "bin2");
    mkdirSync(bin1);
    mkdirSync(bin2);
    writeFileSync(join(bin1, "tgt"), "not executable");
    const real = script(join(dir, "real-target"), "exit 0");
    symlinkSync(real, join(bin2, "tgt"));
    assert.equal(resolveExecutable("tgt", dir, `${bin1}:${bin2}`), real);
    assert.equal(targetIdentity(spec(dir, { argv: ["tgt"], path: `${bin1}:${bin2}` })).executable?.path, real);
    // An empty PATH entry is the working directory, as execvpe has it.
    assert.equal(resolveExecutable("real-target", dir, `${bin1}:`), real);
  });

  it("refuses a target that cannot be found, and a FIFO or a directory named as a target file, in one line naming it", () => {
    const dir = freshDir();
    script(join(dir, "t.sh"), "exit 0");
    assert.throws(() => targetIdentity(spec(dir, { argv: ["no-such-target-xyz"] })), (e: Error) => e instanceof UsageError && /^target 'no-such-target-xyz': no executable file in PATH; build the target first/.test(e.message));
    assert.throws(() => targetIdentity(spec(dir, { argv: ["./missing"] })), (e: Error) => e instanceof UsageError && e.message.includes(`at ${join(dir, "missing")}`));
    execFileSync("mkfifo", [join(dir, "fifo")]);
    assert.throws(() => targetIdentity(spec(dir, { files: ["fifo"] })), (e: Error) => e instanceof UsageError && /^--target-file fifo: .*fifo is not a regular file/.test(e.message));
    mkdirSync(join(dir, "sub"));
    assert.throws(() => targetIdentity(spec(dir, { files: ["sub"] })), (e: Error) => e instanceof UsageError && /^--target-file sub: /.test(e.message));
  });

  it("is the argv alone for a simulated campaign, whose target never runs", () => {
    const dir = freshDir();
    const sim = targetIdentity(spec(dir, { argv: ["./never-built", "@@"], simulate: true }));
    assert.equal(sim.executable, null);
    assert.equal(targetIdentity(spec(dir, { argv: ["./never-built", "@@"], simulate: true })).build, sim.build);
  });
});

test("the explored ledger skips content explored under the same build only: another build's, or a line without one, runs again and is said", () => {
  const dir = freshDir();
  const inputDir = join(dir, "in");
  const corpusDir = join(dir, "corpus");
  mkdirSync(inputDir);
  const explored = join(corpusDir, ".fuzzfleet", "explored");
  mkdirSync(explored, { recursive: true });
  for (const name of ["same", "other", "old", "new"]) writeSeed(join(inputDir, name), `${name}\n`);
  // An older campaign (a ledger without builds), then the last one, under build aaaaaaaaaaaa.
  writeFileSync(join(explored, `${"1".repeat(64)}-r0.log`), `${sha256("old\n")}\n`);
  utimesSync(join(explored, `${"1".repeat(64)}-r0.log`), new Date(1000), new Date(1000));
  writeFileSync(join(explored, `${"2".repeat(64)}-r0.log`), `${sha256("same\n")} bbbbbbbbbbbb\n${sha256("other\n")} aaaaaaaaaaaa\n`);
  const m = loneMaster({ dir, corpusDir, inputDir }, { build: "bbbbbbbbbbbb" });
  m.admitInputs();
  assert.equal(m.explored.skippedCount, 1, "only 'same' was explored under this build");
  assert.equal(m.pendingCount, 3, "'other', 'old' and 'new' run");
  assert.equal(m.explored.rerunCount, 2);
  assert.deepEqual(m.explored.targetChange, { from: "aaaaaaaaaaaa", to: "bbbbbbbbbbbb", inputs: 2 });

  // The same build as the last campaign: nothing left from another build, nothing said.
  const dir2 = freshDir();
  const explored2 = join(dir2, "corpus", ".fuzzfleet", "explored");
  mkdirSync(explored2, { recursive: true });
  writeFileSync(join(explored2, `${"3".repeat(64)}-r0.log`), `${sha256("same\n")} bbbbbbbbbbbb\n`);
  const same = loneMaster({ dir: dir2, corpusDir: join(dir2, "corpus"), inputDir }, { build: "bbbbbbbbbbbb" });
  same.admitInputs();
  assert.equal(same.explored.targetChange, null);
  assert.equal(same.explored.skippedCount, 1);

  // Only a ledger older than builds: every line names no build, which matches none.
  const dir3 = freshDir();
  const explored3 = join(dir3, "corpus", ".fuzzfleet", "explored");
  mkdirSync(explored3, { recursive: true });
  writeFileSync(join(explored3, `${"4".repeat(64)}-r0.log`), `${sha256("same\n")}\n${sha256("other\n")}\n`);
  const old = loneMaster({ dir: dir3, corpusDir: join(dir3, "corpus"), inputDir }, { build: "bbbbbbbbbbbb" });
  old.admitInputs();
  assert.equal(old.explored.skippedCount, 0);
  assert.deepEqual(old.explored.targetChange, { from: "unknown", to: "bbbbbbbbbbbb", inputs: 2 });
});

describe("FindingsStore builds", () => {
  const crash = { kind: "crash" as const, signal: 6, exit_code: null, stderr_tail: "boom" };

  it("records the first and last build; a later build that runs the input without a crash marks it not reproduced, until one reproduces it again", () => {
    const store = new FindingsStore(join(freshDir(), "findings"));
    const h = sha256("crashing input");
    store.record(h, "fence-1", crash, new Date(1000), "aaaaaaaaaaaa");
    assert.equal(store.notReproduced(h, "aaaaaaaaaaaa"), false, "the build that found it missing it once is not a fix");
    assert.equal(store.notReproduced(h, "bbbbbbbbbbbb"), true);
    assert.equal(store.notReproduced(h, "bbbbbbbbbbbb"), false, "said once per build");
    let [r] = store.list();
    assert.deepEqual([r.first_build, r.last_build, r.not_reproduced_by, r.times_seen], ["aaaaaaaaaaaa", "aaaaaaaaaaaa", "bbbbbbbbbbbb", 1]);
    assert.equal(buildNote(r), "build aaaaaaaaaaaa, not reproduced by build bbbbbbbbbbbb");
    store.record(h, "fence-2", crash, new Date(2000), "cccccccccccc");
    [r] = store.list();
    assert.deepEqual([r.first_build, r.last_build, r.not_reproduced_by, r.times_seen], ["aaaaaaaaaaaa", "cccccccccccc", null, 2]);
    assert.equal(buildNote(r), "builds aaaaaaaaaaaa → cccccccccccc");
  });

  it("reads a record older than builds as naming none", () => {
    const dir = join(freshDir(), "findings");
    const store = new FindingsStore(dir);
    const h = sha256("old");
    mkdirSync(dir, { recursive: true });
    const old = { schema: "fuzzfleet-finding-v1", input_hash: h, ...crash, signature: "signal 6 | boom", first_seen: "t", last_seen: "t", times_seen: 1, fences: ["f"] };
    writeFileSync(join(dir, `${h}.json`), JSON.stringify(old));
    const [r] = store.list();
    assert.deepEqual([r.first_build, r.last_build, r.not_reproduced_by], [null, null, null]);
    assert.equal(buildNote(r), "");
    assert.equal(store.notReproduced(h, "bbbbbbbbbbbb"), true, "any build that runs it without a crash says so");
  });
});
