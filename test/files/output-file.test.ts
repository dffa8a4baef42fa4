// output-file: what a file written for the user does at each kind of destination, on the real
// file system (the CLI tests in test/report/output-paths.test.ts cover the commands).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, linkSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import { UsageError } from "../../src/errors.ts";
import { checkOutputFile, openOutputDir, writeOutputEntry, writeOutputFile } from "../../src/files/output-file.ts";

const rules = { flag: "-o", what: "the export" };

describe("writeOutputFile", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "fuzzfleet-output-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("creates the file, replaces a regular one keeping its permissions, and leaves no temporary file", () => {
    const out = join(dir, "bundle.txt");
    assert.equal(writeOutputFile(out, "one\n", rules), out);
    assert.equal(readFileSync(out, "utf8"), "one\n");
    chmodSync(out, 0o600);
    writeOutputFile(out, "two\n", rules);
    assert.equal(readFileSync(out, "utf8"), "two\n");
    assert.equal(statSync(out).mode & 0o777, 0o600);
    assert.deepEqual(readdirSync(dir), ["bundle.txt"]);
  });

  it("replaces a symlink or a hard link at the destination; what they led to is unchanged", () => {
    writeFileSync(join(dir, "victim"), "victim\n");
    symlinkSync(join(dir, "victim"), join(dir, "via-symlink"));
    linkSync(join(dir, "victim"), join(dir, "via-hardlink"));
    writeOutputFile(join(dir, "via-symlink"), "new\n", rules);
    writeOutputFile(join(dir, "via-hardlink"), "new\n", rules);
    assert.equal(readFileSync(join(dir, "victim"), "utf8"), "victim\n");
    assert.equal(lstatSync(join(dir, "victim")).nlink, 1);
    for (const n of ["via-symlink", "via-hardlink"]) {
      assert.ok(lstatSync(join(dir, n)).isFile(), n);
      assert.equal(readFileSync(join(dir, n), "utf8"), "new\n");
    }
  });

  it("refuses a FIFO, a directory and a device at the destination without opening it", () => {
    assert.equal(spawnSync("mkfifo", [join(dir, "fifo")]).status, 0);
    mkdirSync(join(dir, "sub"));
    assert.throws(() => writeOutputFile(join(dir, "fifo"), "x", rules), (e: unknown) => e instanceof UsageError && /^-o .*\/fifo is a FIFO; the export is written as a regular file: choose a file path \(nothing was opened\)$/.test(e.message));
    assert.throws(() => checkOutputFile(join(dir, "fifo"), rules), /is a FIFO/);
    assert.throws(() => writeOutputFile(join(dir, "sub"), "x", rules), (e: unknown) => e instanceof UsageError && /\/sub is a directory;/.test(e.message));
    assert.throws(() => writeOutputFile("/dev/null", "x", rules), (e: unknown) => e instanceof UsageError && /\/dev\/null is a device file;/.test(e.message));
    assert.deepEqual(readdirSync(dir).sort(), ["fifo", "sub"]);
  });

  it("refuses a missing directory, a dangling symlink and a file as the directory, naming it", () => {
    symlinkSync(join(dir, "nowhere"), join(dir, "dangling"));
    writeFileSync(join(dir, "file"), "");
    const cases: [string, RegExp][] = [
      [join(dir, "missing", "x"), /^-o .*\/missing\/x: .*\/missing does not exist; create the directory first or choose another path for -o$/],
      [join(dir, "dangling", "x"), /^-o .*\/dangling\/x: .*\/dangling is a symbolic link to '.*\/nowhere' that leads to no directory; /],
      [join(dir, "file", "x"), /^-o .*\/file\/x: .*\/file is a regular file, not a directory; /],
    ];
    for (const [path, why] of cases) assert.throws(() => writeOutputFile(path, "x", rules), (e: unknown) => e instanceof UsageError && why.test(e.message), path);
  });

  it("refuses a path in a directory kept out, also one reached by a symlink or not created yet", () => {
    const corpus = join(dir, "corpus");
    mkdirSync(corpus);
    symlinkSync(corpus, join(dir, "corpus-link"));
    const keep = { ...rules, keepOut: [{ dir: corpus, what: "the corpus" }, { dir: join(corpus, ".state"), what: "the state" }] };
    for (const path of [join(corpus, "x"), join(dir, "corpus-link", "x"), join(corpus, ".state", "x")]) {
      assert.throws(() => writeOutputFile(path, "x", keep), (e: unknown) => e instanceof UsageError && / lies in the corpus .*corpus, which fuzzfleet never writes the export into; choose a path outside it$/.test(e.message), path);
    }
    // A link at the destination that points into the corpus is replaced, not followed: allowed.
    symlinkSync(join(corpus, "object"), join(dir, "into-corpus"));
    writeOutputFile(join(dir, "into-corpus"), "x", keep);
    assert.deepEqual(readdirSync(corpus), []);
  });
});

describe("openOutputDir", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "fuzzfleet-output-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("creates a missing directory, follows the user's link to one, and writes entries as new files", () => {
    const made = openOutputDir(join(dir, "report"), rules);
    try {
      writeOutputEntry(made, "index.html", "<p>", rules);
    } finally {
      made.close();
    }
    assert.equal(readFileSync(join(dir, "report", "index.html"), "utf8"), "<p>");
    symlinkSync(join(dir, "report"), join(dir, "report-link"));
    const linked = openOutputDir(join(dir, "report-link"), rules);
    try {
      writeOutputEntry(linked, "index.html", "<p>again", rules);
    } finally {
      linked.close();
    }
    assert.equal(readFileSync(join(dir, "report", "index.html"), "utf8"), "<p>again");
  });

  it("refuses a dangling symlink, a regular file and a missing parent", () => {
    symlinkSync(join(dir, "nowhere"), join(dir, "dangling"));
    writeFileSync(join(dir, "file"), "");
    assert.throws(() => openOutputDir(join(dir, "dangling"), rules), (e: unknown) => e instanceof UsageError && /dangling is a symbolic link to '.*nowhere' that leads to no directory/.test(e.message));
    assert.throws(() => openOutputDir(join(dir, "file"), rules), (e: unknown) => e instanceof UsageError && /file is a regular file, not a directory; choose a directory for -o$/.test(e.message));
    assert.throws(() => openOutputDir(join(dir, "a", "b"), rules), (e: unknown) => e instanceof UsageError && /\/a does not exist/.test(e.message));
    assert.deepEqual(readdirSync(dir).sort(), ["dangling", "file"]);
  });
});
