import assert from "node:assert/strict";
import { appendFileSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, statSync, symlinkSync, utimesSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  DEFAULT_BUDGETS,
  currentCorpusMode,
  DEFAULT_CORPUS_MODE,
  FileProblem,
  IntegrityError,
  copyHashing,
  listCorpus,
  listRegularFiles,
  parseCorpusMode,
  publishFile,
  publishTempDir,
  setCorpusMode,
  verifyPublic,
} from "../../src/explore/state/corpus.ts";
import { CHUNK_BYTES, hashFile } from "../../src/explore/state/stable-read.ts";
import { scratchDirs, sha256 } from "../helpers/scratch.ts";
import { HEX64 } from "../../src/core/message-checks.ts";

const { freshDir } = scratchDirs("corpus");

/** Bytes that differ from chunk to chunk, so a digest over mixed or missing chunks cannot match. */
function patterned(size: number, salt = 0): Buffer {
  const buf = Buffer.alloc(size);
  for (let i = 0; i < size; i++) buf[i] = (i * 31 + (i >> 20) * 7 + salt) & 0xff;
  return buf;
}

function assertProblem(fn: () => unknown, problem: string): FileProblem {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof FileProblem, `expected FileProblem ${problem}, got ${String(caught)}`);
  assert.equal(caught.problem, problem);
  return caught;
}

describe("hashFile", () => {
  it("returns the SHA-256, the size and the identity of a multi-chunk file", () => {
    const dir = freshDir();
    const data = patterned(2 * CHUNK_BYTES + 17);
    writeFileSync(join(dir, "f"), data);
    const chunks: number[] = [];
    const got = hashFile(join(dir, "f"), DEFAULT_BUDGETS.maxInputBytes, { afterChunk: (n) => chunks.push(n) });
    assert.equal(got.hash, sha256(data));
    assert.equal(got.size, data.length);
    assert.equal(got.identity.size, data.length);
    assert.deepEqual(chunks, [CHUNK_BYTES, 2 * CHUNK_BYTES, 2 * CHUNK_BYTES + 17]);
  });

  it("refuses a symlink and a directory without reading anything", () => {
    const dir = freshDir();
    writeFileSync(join(dir, "target"), "content");
    symlinkSync(join(dir, "target"), join(dir, "link"));
    mkdirSync(join(dir, "sub"));
    let reads = 0;
    const hooks = { afterChunk: () => reads++ };
    assertProblem(() => hashFile(join(dir, "link"), 1024, hooks), "symlink");
    assertProblem(() => hashFile(join(dir, "sub"), 1024, hooks), "not-regular");
    assertProblem(() => hashFile(join(dir, "absent"), 1024, hooks), "missing");
    assert.equal(reads, 0);
  });

  it("refuses a file above the byte limit, naming the size and the limit, before reading", () => {
    const dir = freshDir();
    writeFileSync(join(dir, "big"), "0123456789A");
    let reads = 0;
    const err = assertProblem(() => hashFile(join(dir, "big"), 10, { afterChunk: () => reads++ }), "too-large");
    assert.equal(err.observed, 11);
    assert.equal(err.limit, 10);
    assert.equal(reads, 0);
    assert.equal(hashFile(join(dir, "big"), 11).size, 11);
  });

  it("reports a file appended to while it is read as changed", () => {
    const dir = freshDir();
    const path = join(dir, "f");
    writeFileSync(path, patterned(CHUNK_BYTES + 5));
    let once = false;
    assertProblem(
      () =>
        hashFile(path, DEFAULT_BUDGETS.maxInputBytes, {
          afterChunk: () => {
            if (!once) appendFileSync(path, "more");
            once = true;
          },
        }),
      "changed",
    );
  });

  it("reports bytes rewritten in place at the same size while the file is read as changed", () => {
    const dir = freshDir();
    const path = join(dir, "f");
    writeFileSync(path, patterned(CHUNK_BYTES + 5));
    assertProblem(
      () =>
        hashFile(path, DEFAULT_BUDGETS.maxInputBytes, {
          afterChunk: (n) => {
            if (n !== CHUNK_BYTES) return;
            const fd = openSync(path, "r+");
            writeSync(fd, Buffer.from("rewritten"), 0, 9, 0);
            closeSync(fd);
            // File timestamps tick coarsely; move mtime explicitly so the rewrite is visible.
            utimesSync(path, new Date(0), new Date(1_000_000));
          },
        }),
      "changed",
    );
  });

  it("reports a path replaced by another file while it is read as changed", () => {
    const dir = freshDir();
    const path = join(dir, "f");
    const data = patterned(CHUNK_BYTES + 5);
    writeFileSync(path, data);
    writeFileSync(join(dir, "other"), data);
    assertProblem(
      () =>
        hashFile(path, DEFAULT_BUDGETS.maxInputBytes, {
          afterChunk: (n) => {
            if (n === CHUNK_BYTES) renameSync(join(dir, "other"), path);
          },
        }),
      "changed",
    );
  });

  it("reports a path whose parent directory was swapped while it is read as changed", () => {
    // The opened inode itself is untouched here; only the path now leads elsewhere.
    const dir = freshDir();
    mkdirSync(join(dir, "sub"));
    const path = join(dir, "sub", "f");
    const data = patterned(CHUNK_BYTES + 5);
    writeFileSync(path, data);
    assertProblem(
      () =>
        hashFile(path, DEFAULT_BUDGETS.maxInputBytes, {
          afterChunk: (n) => {
            if (n !== CHUNK_BYTES) return;
            renameSync(join(dir, "sub"), join(dir, "sub-old"));
            mkdirSync(join(dir, "sub"));
            writeFileSync(path, data);
          },
        }),
      "changed",
    );
  });
});

describe("copyHashing", () => {
  it("copies the bytes and returns their digest; the destination must not exist", () => {
    const dir = freshDir();
    const data = patterned(CHUNK_BYTES + 100, 3);
    writeFileSync(join(dir, "src"), data);
    const got = copyHashing(join(dir, "src"), join(dir, "dest"), { maxBytes: DEFAULT_BUDGETS.maxInputBytes });
    assert.deepEqual(got, { hash: sha256(data), size: data.length });
    assert.deepEqual(readFileSync(join(dir, "dest")), data);
    assert.throws(() => copyHashing(join(dir, "src"), join(dir, "dest"), { maxBytes: DEFAULT_BUDGETS.maxInputBytes }), { code: "EEXIST" });
    assert.deepEqual(readFileSync(join(dir, "dest")), data, "an existing destination is left alone");
  });

  it("with reuse, rewrites an existing regular destination in full, but never follows a symlink there", () => {
    const dir = freshDir();
    const data = patterned(CHUNK_BYTES + 100, 5);
    writeFileSync(join(dir, "src"), data);
    writeFileSync(join(dir, "dest"), patterned(3 * CHUNK_BYTES, 9));
    const got = copyHashing(join(dir, "src"), join(dir, "dest"), { maxBytes: DEFAULT_BUDGETS.maxInputBytes, durable: false, reuse: true });
    assert.deepEqual(got, { hash: sha256(data), size: data.length });
    assert.deepEqual(readFileSync(join(dir, "dest")), data, "the longer old content is truncated away");
    writeFileSync(join(dir, "elsewhere"), "keep me");
    symlinkSync(join(dir, "elsewhere"), join(dir, "link"));
    assert.throws(() => copyHashing(join(dir, "src"), join(dir, "link"), { maxBytes: DEFAULT_BUDGETS.maxInputBytes, durable: false, reuse: true }), { code: "ELOOP" });
    assert.equal(readFileSync(join(dir, "elsewhere"), "utf8"), "keep me");
  });

  it("leaves no destination when the source changes mid-copy, is too large or is a symlink", () => {
    const dir = freshDir();
    const src = join(dir, "src");
    writeFileSync(src, patterned(CHUNK_BYTES + 1));
    assertProblem(() => copyHashing(src, join(dir, "d1"), { maxBytes: DEFAULT_BUDGETS.maxInputBytes, hooks: { afterChunk: () => appendFileSync(src, "x") } }), "changed");
    const tooLarge = assertProblem(() => copyHashing(src, join(dir, "d2"), { maxBytes: 1000 }), "too-large");
    assert.equal(tooLarge.limit, 1000);
    symlinkSync(src, join(dir, "link"));
    assertProblem(() => copyHashing(join(dir, "link"), join(dir, "d3"), { maxBytes: DEFAULT_BUDGETS.maxInputBytes }), "symlink");
    assert.deepEqual(readdirSync(dir).sort(), ["link", "src"]);
  });
});

/** The corpus directory's entries but the hidden state directory, where publication stages its temp files. */
const publicEntries = (corpus: string) => readdirSync(corpus).filter((n) => n !== ".fuzzfleet");
/** Temp files publication left behind in the hidden state directory. */
const tempsLeft = (corpus: string) => (existsSync(publishTempDir(corpus)) ? readdirSync(publishTempDir(corpus)) : []);

describe("publishFile", () => {
  it("publishes under the content digest and leaves no temporary file", () => {
    const corpus = freshDir();
    const inputs = freshDir();
    const data = patterned(CHUNK_BYTES * 2 + 3, 9);
    writeFileSync(join(inputs, "seed"), data);
    const got = publishFile(corpus, join(inputs, "seed"), { maxBytes: DEFAULT_BUDGETS.maxInputBytes });
    assert.deepEqual(got, { hash: sha256(data), size: data.length, created: true });
    assert.deepEqual(publicEntries(corpus), [sha256(data)]);
    assert.deepEqual(readFileSync(join(corpus, got.hash)), data);
    assert.deepEqual(tempsLeft(corpus), []);
  });

  it("never has a temporary file in the corpus directory, even while it copies", () => {
    const corpus = freshDir();
    const inputs = freshDir();
    writeFileSync(join(inputs, "seed"), patterned(CHUNK_BYTES * 3, 4));
    const seenDuringCopy: string[][] = [];
    const staged: string[][] = [];
    publishFile(corpus, join(inputs, "seed"), {
      maxBytes: DEFAULT_BUDGETS.maxInputBytes,
      hooks: {
        afterChunk: () => {
          seenDuringCopy.push(readdirSync(corpus));
          staged.push(tempsLeft(corpus));
        },
      },
    });
    assert.equal(seenDuringCopy.length, 3);
    for (const names of seenDuringCopy) assert.deepEqual(names, [".fuzzfleet"], "only the hidden state directory, never a .tmp-* file");
    for (const names of staged) assert.equal(names.filter((n) => n.startsWith(".tmp-")).length, 1, "the temp file is staged in the hidden state");
    assert.deepEqual(tempsLeft(corpus), []);
  });

  it("gives corpus files the corpus mode exactly, whatever the umask", () => {
    const corpus = freshDir();
    const inputs = freshDir();
    writeFileSync(join(inputs, "a"), "a");
    writeFileSync(join(inputs, "b"), "b");
    const before = process.umask(0o077);
    try {
      const a = publishFile(corpus, join(inputs, "a"), { maxBytes: 1024 });
      assert.equal(statSync(join(corpus, a.hash)).mode & 0o777, 0o600, "the default");
      setCorpusMode(0o644);
      const b = publishFile(corpus, join(inputs, "b"), { maxBytes: 1024 });
      assert.equal(statSync(join(corpus, b.hash)).mode & 0o777, 0o644, "readable by others despite umask 077");
      assert.equal(currentCorpusMode(), 0o644);
    } finally {
      setCorpusMode(DEFAULT_CORPUS_MODE);
      process.umask(before);
    }
  });

  it("refuses a temp directory replaced by a symlink instead of writing through it", () => {
    const corpus = freshDir();
    const elsewhere = freshDir();
    const inputs = freshDir();
    writeFileSync(join(inputs, "seed"), "seed");
    mkdirSync(join(corpus, ".fuzzfleet"));
    symlinkSync(elsewhere, publishTempDir(corpus));
    assertProblem(() => publishFile(corpus, join(inputs, "seed"), { maxBytes: 1024 }), "symlink");
    assert.deepEqual(readdirSync(elsewhere), []);
    assert.deepEqual(publicEntries(corpus), []);
  });

  it("reports created=false for content that is already public", () => {
    const corpus = freshDir();
    const inputs = freshDir();
    writeFileSync(join(inputs, "a"), "same bytes");
    writeFileSync(join(inputs, "b"), "same bytes");
    assert.equal(publishFile(corpus, join(inputs, "a"), { maxBytes: 1024 }).created, true);
    const again = publishFile(corpus, join(inputs, "b"), { maxBytes: 1024 });
    assert.deepEqual(again, { hash: sha256("same bytes"), size: 10, created: false });
    assert.deepEqual(publicEntries(corpus), [sha256("same bytes")]);
  });

  it("refuses an existing public object whose bytes are not its name and leaves it in place", () => {
    const corpus = freshDir();
    const inputs = freshDir();
    const hash = sha256("good");
    writeFileSync(join(corpus, hash), "evil");
    writeFileSync(join(inputs, "seed"), "good");
    assert.throws(() => publishFile(corpus, join(inputs, "seed"), { maxBytes: 1024 }), (err: unknown) => {
      assert.ok(err instanceof IntegrityError);
      assert.equal(err.message, `shared corpus digest mismatch: ${join(corpus, hash)} holds ${sha256("evil")}`);
      return true;
    });
    assert.deepEqual(publicEntries(corpus), [hash]);
    assert.equal(readFileSync(join(corpus, hash), "utf8"), "evil");
  });

  it("refuses a directory squatting on the digest name and leaves no temporary file", () => {
    const corpus = freshDir();
    const inputs = freshDir();
    mkdirSync(join(corpus, sha256("x")));
    writeFileSync(join(inputs, "seed"), "x");
    assertProblem(() => publishFile(corpus, join(inputs, "seed"), { maxBytes: 1024 }), "not-regular");
    assert.deepEqual(publicEntries(corpus), [sha256("x")]);
  });

  it("refuses symlinked, oversized and changing sources and leaves the corpus empty", () => {
    const corpus = freshDir();
    const inputs = freshDir();
    const seed = join(inputs, "seed");
    writeFileSync(seed, patterned(CHUNK_BYTES + 10));
    symlinkSync(seed, join(inputs, "link"));
    mkdirSync(join(inputs, "dir"));
    assertProblem(() => publishFile(corpus, join(inputs, "link"), { maxBytes: DEFAULT_BUDGETS.maxInputBytes }), "symlink");
    assertProblem(() => publishFile(corpus, join(inputs, "dir"), { maxBytes: DEFAULT_BUDGETS.maxInputBytes }), "not-regular");
    const big = assertProblem(() => publishFile(corpus, seed, { maxBytes: CHUNK_BYTES }), "too-large");
    assert.deepEqual([big.observed, big.limit], [CHUNK_BYTES + 10, CHUNK_BYTES]);
    writeFileSync(join(inputs, "replacement"), patterned(CHUNK_BYTES + 10, 1));
    assertProblem(
      () => publishFile(corpus, seed, { maxBytes: DEFAULT_BUDGETS.maxInputBytes, hooks: {
        afterChunk: (n) => {
          if (n === CHUNK_BYTES) renameSync(join(inputs, "replacement"), seed);
        },
      } }),
      "changed",
    );
    assert.deepEqual(publicEntries(corpus), []);
  });
});

describe("parseCorpusMode", () => {
  it("takes 0600, 0640, 0644 (with or without the leading 0) and refuses the rest with the reason", () => {
    assert.deepEqual(["0600", "640", "0644", "0604"].map(parseCorpusMode), [0o600, 0o640, 0o644, 0o604]);
    for (const [value, why] of [
      ["0666", /gives write or execute permission beyond the owner's/],
      ["0755", /gives write or execute permission/],
      ["0400", /does not let the owner read and write/],
      ["4644", /not an octal file mode such as 0600 or 0644/],
      ["rw-r--r--", /not an octal file mode/],
      ["0o644", /not an octal file mode/],
    ] as const) {
      const got = parseCorpusMode(value);
      assert.ok(typeof got !== "number", value);
      assert.match(got.error, why, value);
    }
  });
});

describe("verifyPublic", () => {
  it("accepts an object whose bytes hash to its name and rejects one that does not", () => {
    const corpus = freshDir();
    writeFileSync(join(corpus, sha256("ok")), "ok");
    verifyPublic(corpus, sha256("ok"), 1024);
    writeFileSync(join(corpus, sha256("promised")), "delivered");
    assert.throws(() => verifyPublic(corpus, sha256("promised"), 1024), IntegrityError);
    assertProblem(() => verifyPublic(corpus, sha256("absent"), 1024), "missing");
  });

  it("never accepts a symlink as a public object, even to the right bytes", () => {
    const corpus = freshDir();
    const elsewhere = freshDir();
    writeFileSync(join(elsewhere, "real"), "ok");
    symlinkSync(join(elsewhere, "real"), join(corpus, sha256("ok")));
    assertProblem(() => verifyPublic(corpus, sha256("ok"), 1024), "symlink");
  });
});

describe("listCorpus and listRegularFiles", () => {
  it("lists only regular files named by 64 lowercase hex digits", () => {
    const corpus = freshDir();
    const good = sha256("a");
    writeFileSync(join(corpus, good), "a");
    writeFileSync(join(corpus, "foo"), "foo");
    writeFileSync(join(corpus, sha256("b").toUpperCase()), "b");
    writeFileSync(join(corpus, `.tmp-${"0".repeat(32)}`), "tmp");
    symlinkSync(join(corpus, good), join(corpus, sha256("link")));
    mkdirSync(join(corpus, sha256("dir")));
    mkdirSync(join(corpus, ".fuzzfleet"));
    assert.deepEqual(listCorpus(corpus), [good]);
    assert.ok(HEX64.test(good));
  });

  it("lists regular files with their identity and skips symlinks and directories", () => {
    const dir = freshDir();
    writeFileSync(join(dir, "seed1"), "12345");
    writeFileSync(join(dir, ".hidden"), "1");
    symlinkSync(join(dir, "seed1"), join(dir, "link"));
    mkdirSync(join(dir, "sub"));
    const got = listRegularFiles(dir).sort((a, b) => a.name.localeCompare(b.name));
    assert.deepEqual(
      got.map((f) => [f.name, f.identity.size]),
      [
        [".hidden", 1],
        ["seed1", 5],
      ],
    );
    assert.deepEqual(got[1].identity, hashFile(join(dir, "seed1"), 10).identity);
  });
});
