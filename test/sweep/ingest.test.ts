// ingestChunk against forged generator output and a real store.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, beforeEach, describe, test } from "node:test";
import { openStore, type Db } from "../../src/store/db.ts";
import { sqliteSweepStore } from "../../src/store/sqlite/index.ts";
import { insertGeneration } from "../../src/store/generations.ts";
import { insertLane } from "../../src/store/lanes.ts";
import { insertSession } from "../../src/store/sessions.ts";
import { insertChunk } from "../../src/store/chunks.ts";
import { markFailureFixed } from "../../src/store/failures.ts";
import { ingestChunk, QUARANTINE_SAMPLES, type IngestTarget } from "../../src/sweep/generator/ingest.ts";

const key = (bucket: string, min: string) => createHash("sha256").update(`${bucket}\n`).update(min).digest("hex");

function writeFailure(results: string, seed: number, meta: Record<string, unknown>, files: Record<string, string>): void {
  const dir = join(results, "failures", String(seed));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "meta.json"), JSON.stringify(meta));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
}

describe("ingestChunk", () => {
  const root = mkdtempSync(join(tmpdir(), "fuzzfleet-ingest-"));
  after(() => rmSync(root, { recursive: true, force: true }));
  let db: Db;
  let out: string;
  let target: (results: string, seedFrom: number, seedTo: number) => IngestTarget;
  let n = 0;

  beforeEach(() => {
    const dir = join(root, String(n++));
    mkdirSync(dir);
    out = join(dir, "out");
    db = openStore(join(dir, "fuzzfleet.db"));
    const gen = insertGeneration(db, "ab".repeat(32), "initial");
    const lane = insertLane(db, gen, "small", "{}", 1);
    const session = insertSession(db, { generationId: gen, requestedSeconds: 60, appBuild: null, transport: "local", host: "h", port: null });
    target = (results, seedFrom, seedTo) => ({
      generationId: gen,
      genHash: "ab".repeat(32),
      laneId: lane,
      chunkId: insertChunk(db, { sessionId: session, laneId: lane, seedFrom, seedTo, appBuild: null, status: "running", workerId: null }),
      seedFrom,
      seedTo,
      resultsDir: results,
      outDir: out,
      appBuild: "app1",
    });
  });

  test("dedups by bucket + minimized input; hits count distinct (failure, seed) pairs; re-ingest changes nothing", () => {
    const results = join(out, "tmp", "r1");
    writeFailure(results, 5, { seed: 5, bucket: "crash", shrunk: true, msg: "m5" }, { "input.txt": "full5", "input.min.txt": "A" });
    writeFailure(results, 6, { seed: 6, bucket: "crash", msg: "m6" }, { "input.txt": "full6", "input.min.txt": "A" });
    writeFailure(results, 7, { seed: 7, bucket: "crash", shrunk: false }, { "input.txt": "B" });
    writeFailure(results, 8, { seed: 8, bucket: "wrong-result", key_file: "custom.bin" }, { "custom.bin": "A", "input.min.txt": "zzz" });
    const r = ingestChunk(sqliteSweepStore(db), target(results, 1, 10));
    assert.deepEqual({ finds: r.finds, newFailures: r.newFailures, unshrunk: r.unshrunk, malformed: r.malformed }, { finds: 4, newFailures: 3, unshrunk: 1, malformed: [] });
    const rows = db.prepare("SELECT dedup_key, bucket, first_seed, hits, shrunk, artifact_dir FROM failure ORDER BY id").all() as {
      dedup_key: string;
      bucket: string;
      first_seed: number;
      hits: number;
      shrunk: number;
      artifact_dir: string;
    }[];
    assert.deepEqual(
      rows.map((x) => [x.dedup_key, x.bucket, x.first_seed, x.hits, x.shrunk]),
      [
        [key("crash", "A"), "crash", 5, 2, 1],
        [key("crash", "B"), "crash", 7, 1, 0],
        [key("wrong-result", "A"), "wrong-result", 8, 1, 1],
      ],
    );
    assert.equal(readFileSync(join(out, rows[0]!.artifact_dir, "input.txt"), "utf8"), "full5", "the first seed's artifacts are kept");
    const again = ingestChunk(sqliteSweepStore(db), target(results, 1, 10));
    assert.equal(again.newFailures, 0);
    assert.deepEqual(
      (db.prepare("SELECT hits FROM failure ORDER BY id").all() as { hits: number }[]).map((x) => x.hits),
      [2, 1, 1],
      "re-sweeping the same seeds does not inflate hits",
    );
    assert.equal((db.prepare("SELECT COUNT(*) AS n FROM failure_seed").get() as { n: number }).n, 4);
  });

  test("never overwrites another failure's artifact directory", () => {
    const k = key("crash", "A");
    const taken = join(out, "failures", k.slice(0, 12));
    mkdirSync(taken, { recursive: true });
    writeFileSync(join(taken, "marker"), "an earlier generation's failure");
    const results = join(out, "tmp", "r2");
    writeFailure(results, 3, { seed: 3, bucket: "crash" }, { "input.min.txt": "A" });
    ingestChunk(sqliteSweepStore(db), target(results, 1, 10));
    assert.equal(readFileSync(join(taken, "marker"), "utf8"), "an earlier generation's failure");
    const dir = (db.prepare("SELECT artifact_dir FROM failure").get() as { artifact_dir: string }).artifact_dir;
    assert.notEqual(join(out, dir), taken);
    assert.ok(existsSync(join(out, dir, "meta.json")));
  });

  test("entries that break the contract are kept under malformed/ and reported, never trusted", () => {
    const results = join(out, "tmp", "r3");
    writeFailure(results, 2, { seed: 2 }, { "input.min.txt": "x" });
    writeFailure(results, 50, { seed: 50, bucket: "crash" }, { "input.min.txt": "x" });
    writeFailure(results, 4, { seed: 4, bucket: "../../etc" }, {});
    writeFailure(results, 5, { seed: 5, bucket: "crash", key_file: "../../secret" }, {});
    writeFailure(results, 6, { seed: 6, bucket: "crash", key_file: "link" }, {});
    writeFileSync(join(root, "outside"), "not yours");
    symlinkSync(join(root, "outside"), join(results, "failures", "6", "link"));
    mkdirSync(join(results, "failures", "7"));
    writeFileSync(join(results, "failures", "7", "meta.json"), "{not json");
    const r = ingestChunk(sqliteSweepStore(db), target(results, 1, 10));
    assert.equal(r.finds, 0);
    assert.deepEqual(
      r.malformed.map((m) => m.reason.replace(/:.*/, "")).sort(),
      ["link", "meta.json", "meta.json", "meta.json", "meta.json", "meta.json"],
    );
    assert.equal(r.malformed.find((m) => m.entry.endsWith("/6"))!.reason, `link: a symbolic link to '${join(root, "outside")}'; nothing is followed through a symlink`);
    assert.match(r.malformed.find((m) => m.entry.endsWith("/50"))!.reason, /seed 50 is outside the chunk's range 1\.\.10/);
    for (const m of r.malformed) assert.ok(existsSync(m.keptAt), `kept at ${m.keptAt}`);
    assert.equal((db.prepare("SELECT COUNT(*) AS n FROM failure").get() as { n: number }).n, 0);
  });

  test("an implicit key file that is a symlink, and an entry with no minimized input at all, are malformed", () => {
    const results = join(out, "tmp", "r4");
    writeFailure(results, 2, { seed: 2, bucket: "crash" }, { "input.txt": "full" });
    writeFileSync(join(root, "outside-min"), "not yours");
    symlinkSync(join(root, "outside-min"), join(results, "failures", "2", "input.min.txt"));
    writeFailure(results, 3, { seed: 3, bucket: "crash" }, { "report.txt": "only a report" });
    writeFailure(results, 4, { seed: 4, bucket: "crash" }, { "input.min.c": "A" });
    const r = ingestChunk(sqliteSweepStore(db), target(results, 1, 10));
    assert.deepEqual(
      r.malformed.map((m) => [m.entry.split("/").pop(), m.reason]),
      [
        ["2", `input.min.txt: a symbolic link to '${join(root, "outside-min")}'; nothing is followed through a symlink`],
        ["3", "no minimized input: set key_file or write input.min.* / input.*"],
      ],
    );
    assert.equal(r.finds, 1);
    assert.deepEqual(
      (db.prepare("SELECT first_seed, dedup_key FROM failure").all() as { first_seed: number; dedup_key: string }[]).map((f) => [f.first_seed, f.dedup_key]),
      [[4, key("crash", "A")]],
    );
  });

  test("a fixed failure that is hit again is reopened and counted apart from new ones", () => {
    const first = join(out, "tmp", "re1");
    writeFailure(first, 2, { seed: 2, bucket: "crash" }, { "input.min.txt": "A" });
    ingestChunk(sqliteSweepStore(db), target(first, 1, 10));
    const id = (db.prepare("SELECT id FROM failure").get() as { id: number }).id;
    markFailureFixed(db, id, "app1");
    const again = join(out, "tmp", "re2");
    writeFailure(again, 12, { seed: 12, bucket: "crash" }, { "input.min.txt": "A" });
    writeFailure(again, 13, { seed: 13, bucket: "crash" }, { "input.min.txt": "A" });
    writeFailure(again, 14, { seed: 14, bucket: "crash" }, { "input.min.txt": "B" });
    const r = ingestChunk(sqliteSweepStore(db), target(again, 11, 20));
    assert.deepEqual(
      { finds: r.finds, newFailures: r.newFailures, reopened: r.reopened, reopenedIds: r.reopenedIds },
      { finds: 3, newFailures: 1, reopened: 1, reopenedIds: [id] },
    );
    assert.deepEqual(db.prepare("SELECT state, resolved_at, resolved_app_build, hits FROM failure WHERE id = ?").get(id), {
      state: "open",
      resolved_at: null,
      resolved_app_build: null,
      hits: 3,
    });
    const open = ingestChunk(sqliteSweepStore(db), target(again, 11, 20));
    assert.equal(open.reopened, 0, "an open failure hit again is just a hit");
  });

  test(`quarantine is counted in full and sampled up to ${QUARANTINE_SAMPLES} per generation`, () => {
    const a = join(out, "tmp", "q1");
    mkdirSync(join(a, "quarantine"), { recursive: true });
    for (let s = 1; s <= 30; s++) writeFileSync(join(a, "quarantine", `${s}.txt`), `bad ${s}`);
    assert.equal(ingestChunk(sqliteSweepStore(db), target(a, 1, 30)).quarantine, 30);
    const b = join(out, "tmp", "q2");
    mkdirSync(join(b, "quarantine"), { recursive: true });
    for (let s = 31; s <= 60; s++) writeFileSync(join(b, "quarantine", `${s}.txt`), `bad ${s}`);
    assert.equal(ingestChunk(sqliteSweepStore(db), target(b, 31, 60)).quarantine, 30);
    assert.equal(readdirSync(join(out, "quarantine", "ab".repeat(6))).length, QUARANTINE_SAMPLES);
  });

  test("a chunk without failures/ or quarantine/ ingests as clean", () => {
    const r = ingestChunk(sqliteSweepStore(db), target(join(out, "tmp", "nothing-here"), 1, 10));
    assert.deepEqual(r, { finds: 0, newFailures: 0, newDistinct: 0, newSignatures: 0, newFailureIds: [], reopened: 0, reopenedIds: [], unshrunk: 0, quarantine: 0, quarantineReasons: [], malformed: [], refused: null });
  });
});
