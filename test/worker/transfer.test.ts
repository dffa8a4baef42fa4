// The two ends of a unit's files travelling without a shared directory, joined without a socket:
// the worker's outbox and put frames (src/worker/transfer.ts) fed to the coordinator's landing
// (src/sweep/fleet/unit-landing.ts), on real files. What each end refuses, that a large artifact
// travels in bounded pieces and lands byte for byte, and that nothing half-sent is kept.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, test } from "node:test";
import { checkSentPath, UnitLanding, type LandingPlace } from "../../src/sweep/fleet/unit-landing.ts";
import type { PutFrame, TransferTermsT } from "../../src/net/messages.ts";
import { relocate } from "../../src/worker/sweep-runner.ts";
import { collectOutbox, putFrames } from "../../src/worker/transfer.ts";

const MIB = 1 << 20;
const terms: TransferTermsT = { results: "run", max_files: 100, max_bytes: 200 * MIB, max_file_bytes: 100 * MIB, piece_bytes: MIB };
const caps = { maxFiles: 100, maxBytes: 200 * MIB, maxFileBytes: 100 * MIB };
const dirs: string[] = [];

function scratch(): string {
  const d = mkdtempSync(join(tmpdir(), "fuzzfleet-transfer-"));
  dirs.push(d);
  return d;
}

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const sha = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

/** A worker's finished chunk: run/failures/7/{meta.json,input.min.txt,big.bin}, a quarantine sample, and entries that must not travel. */
function finishedChunk(bigBytes: number): { out: string; big: Buffer } {
  const out = join(scratch(), "chunk-3");
  mkdirSync(join(out, "run", "failures", "7"), { recursive: true });
  mkdirSync(join(out, "run", "quarantine"), { recursive: true });
  writeFileSync(join(out, "run", "failures", "7", "meta.json"), '{"seed":7,"bucket":"crash"}');
  writeFileSync(join(out, "run", "failures", "7", "input.min.txt"), "push 0\ndup\ndrop");
  const big = Buffer.alloc(bigBytes);
  for (let i = 0; i < big.length; i += 4096) big.writeUInt32LE(i, i);
  writeFileSync(join(out, "run", "failures", "7", "big.bin"), big);
  writeFileSync(join(out, "run", "quarantine", "8.txt"), "invalid");
  symlinkSync("/etc/passwd", join(out, "run", "failures", "7", "link"));
  writeFileSync(join(out, "run", "notes.txt"), "not a result");
  return { out, big };
}

async function collect(frames: AsyncIterable<PutFrame>): Promise<PutFrame[]> {
  const all: PutFrame[] = [];
  for await (const f of frames) all.push(f);
  return all;
}

describe("worker outbox -> coordinator landing", () => {
  test("a 50 MB artifact travels in pieces of at most piece_bytes and lands byte for byte beside the small files", async () => {
    const { out, big } = finishedChunk(50 * MIB);
    const found = collectOutbox(out, "run", ["failures", "quarantine"], terms);
    assert.ok("outbox" in found);
    assert.deepEqual(
      found.outbox.files.map((f) => [f.rel, f.size]),
      [
        ["run/failures/7/big.bin", 50 * MIB],
        ["run/failures/7/input.min.txt", 15],
        ["run/failures/7/meta.json", 27],
        ["run/quarantine/8.txt", 7],
      ],
    );
    assert.equal(found.outbox.skipped, 1, "the symlink is not sent");
    assert.equal(found.outbox.wrote, "results");

    const landingRoot = scratch();
    const place: LandingPlace = { dir: join(landingRoot, "tmp", "chunk-3"), prefixes: [["run", "failures"], ["run", "quarantine"]] };
    const landing = new UnitLanding(landingRoot, caps);
    let pieces = 0;
    let largest = 0;
    for await (const f of putFrames(3, found.outbox, terms.piece_bytes)) {
      const bytes = Buffer.from(f.data, "base64").length;
      largest = Math.max(largest, bytes);
      pieces++;
      assert.equal(landing.put(f, place), null, `${f.path} at ${f.offset}`);
    }
    assert.equal(largest, MIB, "no piece is larger than piece_bytes");
    assert.equal(pieces, 50 + 3);
    assert.equal(landing.settle(3, place, { count: 4, bytes: 50 * MIB + 15 + 27 + 7, wrote: "results" }), null);
    assert.equal(sha(readFileSync(join(place.dir, "run", "failures", "7", "big.bin"))), sha(big));
    assert.equal(readFileSync(join(place.dir, "run", "failures", "7", "meta.json"), "utf8"), '{"seed":7,"bucket":"crash"}');
    assert.ok(existsSync(join(place.dir, "run", "quarantine", "8.txt")));
    assert.ok(!existsSync(join(place.dir, "run", "failures", "7", "link")) && !existsSync(join(place.dir, "run", "notes.txt")));
  });

  test("over a cap, the worker refuses to send and says which key to raise", () => {
    const { out } = finishedChunk(3 * MIB);
    const one = collectOutbox(out, "run", ["failures", "quarantine"], { ...terms, max_file_bytes: 2 * MIB });
    assert.deepEqual(one, {
      over: "the unit's results cannot be sent: run/failures/7/big.bin holds 3,145,728 bytes, over 2,097,152 ([distributed] transfer_max_file_mib on the coordinator); raise the cap or make the generator keep less",
    });
    const count = collectOutbox(out, "run", ["failures", "quarantine"], { ...terms, max_files: 2 });
    assert.match("over" in count ? count.over : "", /more than 2 files \(\[distributed\] transfer_max_files on the coordinator\)/);
  });

  test("a run that wrote {out} but not the results directory is said so; one that wrote nothing sends nothing", () => {
    const out = join(scratch(), "chunk-4");
    assert.deepEqual(collectOutbox(out, "run", ["failures"], terms), { outbox: { files: [], bytes: 0, wrote: "nothing", skipped: 0 } });
    mkdirSync(out);
    assert.deepEqual(collectOutbox(out, "run", ["failures"], terms), { outbox: { files: [], bytes: 0, wrote: "out", skipped: 0 } });
  });

  test("the landing refuses what a worker must not send, and keeps nothing of a unit it refused", () => {
    const root = scratch();
    const place: LandingPlace = { dir: join(root, "tmp", "chunk-9"), prefixes: [["failures"], ["quarantine"]] };
    const put = (over: Partial<PutFrame>): PutFrame => ({ type: "put", unit: 9, path: "failures/1/meta.json", size: 2, offset: 0, data: Buffer.from("{}").toString("base64"), sha256: sha("{}"), ...over });
    assert.equal(checkSentPath("failures/../../etc/passwd", place.prefixes), "sent path 'failures/../../etc/passwd' has a component that is not a plain file name");
    assert.equal(checkSentPath("notes.txt", place.prefixes), "sent path 'notes.txt' is not below failures or quarantine");
    assert.equal(checkSentPath("failures", place.prefixes), "sent path 'failures' is not below failures or quarantine");
    const landing = new UnitLanding(root, { maxFiles: 2, maxBytes: 10, maxFileBytes: 6 });
    assert.equal(landing.put(put({ path: "/abs/meta.json" }), place), "sent path '/abs/meta.json' has a component that is not a plain file name");
    assert.equal(landing.put(put({ sha256: "0".repeat(64) }), place), "failures/1/meta.json arrived with SHA-256 44136fa355b3…, the worker declared 000000000000…");
    assert.ok(!existsSync(place.dir), "a refused unit's landing is removed");
    assert.equal(landing.put(put({ size: 7 }), place), "a file of 7 bytes, over 6 ([distributed] transfer_max_file_mib)");
    assert.equal(landing.put(put({ offset: 1 }), place), "put of failures/1/meta.json at offset 1 is out of order");
    assert.equal(landing.put(put({}), place), null);
    assert.equal(landing.put(put({}), place), "cannot land failures/1/meta.json (EEXIST): sent twice, or its name collides");
    assert.equal(landing.landed(9), null, "refusing it dropped what had landed");
  });

  test("a short account or a file in part is not kept: the unit's landing is removed", () => {
    const root = scratch();
    const place: LandingPlace = { dir: join(root, "tmp", "chunk-5"), prefixes: [["failures"]] };
    const landing = new UnitLanding(root, caps);
    const data = Buffer.from("0123456789");
    assert.equal(landing.put({ type: "put", unit: 5, path: "failures/2/a", size: 10, offset: 0, data: data.subarray(0, 4).toString("base64"), sha256: null }, place), null);
    assert.ok(existsSync(join(place.dir, "failures", "2", "a")));
    assert.equal(landing.settle(5, place, { count: 1, bytes: 10, wrote: "results" }), "failures/2/a arrived in part (4 of 10 bytes)");
    assert.ok(!existsSync(place.dir));
    assert.equal(landing.put({ type: "put", unit: 5, path: "failures/2/a", size: 10, offset: 0, data: data.toString("base64"), sha256: sha(data) }, place), null);
    assert.equal(landing.settle(5, place, { count: 2, bytes: 20, wrote: "results" }), "the worker sent 2 file(s) of 20 bytes, 1 of 10 bytes landed");
    assert.ok(!existsSync(place.dir));
    assert.equal(landing.settle(6, place, { count: 0, bytes: 0, wrote: "out" }), null, "nothing sent, nothing owed");
    assert.ok(existsSync(place.dir), "{out} without its results directory is mirrored, so ingest finds the generator's breach");
  });

  test("a unit's argv moves to the worker's own directories: {out} wherever it appears, paths in the campaign directory below the working directory", () => {
    assert.deepEqual(
      relocate(["python3", "/camp/gen.py", "--out", "/camp/out/tmp/chunk-4", "--log=/camp/out/tmp/chunk-4/log", "/usr/bin/cc", "/camp"], "/camp/out/tmp/chunk-4", "/tmp/w/chunk-4", "/camp", "/home/w"),
      ["python3", "/home/w/gen.py", "--out", "/tmp/w/chunk-4", "--log=/tmp/w/chunk-4/log", "/usr/bin/cc", "/home/w"],
    );
  });
});
