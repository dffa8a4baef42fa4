// ingestChunk is replayable: run inside a transaction that rolls back (as a commit that fails with
// SQLITE_BUSY, a full disk or EIO does), then again inside one that commits, it leaves exactly
// the books and the artifact directories of one clean run, and the chunk's scratch directory is
// never changed.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { after, describe, test } from "node:test";
import type { Db } from "../../src/store/db.ts";
import { sqliteSweepStore } from "../../src/store/sqlite/index.ts";
import { markFailureFixed } from "../../src/store/failures.ts";
import { ingestChunk, type IngestResult, type IngestTarget } from "../../src/sweep/generator/ingest.ts";
import { books, ingestBench, snapshot, writeFailure, type IngestBench } from "./ingest-fixture.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-ingest-replay-"));
after(() => rmSync(root, { recursive: true, force: true }));
const key = (bucket: string, min: string) => createHash("sha256").update(`${bucket}\n`).update(min).digest("hex");

/** A relative symlink, so that two campaigns built alike hold byte-identical links. */
function link(target: string, path: string): void {
  symlinkSync(relative(dirname(path), target), path);
}

/** A campaign whose earlier chunk found a failure that was then fixed, and whose next chunk holds a bit of everything. */
function campaign(name: string): { bench: IngestBench; target: IngestTarget & { scratch: string }; outside: string } {
  const bench = ingestBench(join(root, name));
  const outside = join(root, name, "elsewhere");
  mkdirSync(outside);
  writeFileSync(join(outside, "secret"), "not the generator's");
  const first = bench.chunk(1, 10);
  writeFailure(first.scratch, 2, { seed: 2, bucket: "crash" }, { "input.min.txt": "F" });
  ingestChunk(bench.store, first);
  markFailureFixed(bench.db, 1, "app1");

  const t = bench.chunk(11, 30);
  const s = t.scratch;
  writeFailure(s, 11, { seed: 11, bucket: "crash", msg: "first" }, { "input.min.txt": "A", "input.txt": "full 11", "report.txt": "r", "more/trace.txt": "t" });
  writeFailure(s, 12, { seed: 12, bucket: "crash" }, { "input.min.txt": "A" }); // the same failure again
  writeFailure(s, 13, { seed: 13, bucket: "wrong-result", shrunk: false }, { "input.txt": "B" });
  writeFailure(s, 14, { seed: 14, bucket: "crash" }, { "input.min.txt": "F" }); // the fixed one: reopened
  writeFailure(s, 15, { seed: 99, bucket: "crash" }, { "input.min.txt": "C" }); // malformed: seed out of range
  writeFailure(s, 16, { seed: 16, bucket: "crash" }, { "input.min.txt": "D" });
  link(join(outside, "secret"), join(s, "failures", "16", "report.txt")); // malformed: a link inside
  link(outside, join(s, "failures", "17")); // malformed: the entry is a link
  mkdirSync(join(s, "quarantine"));
  for (const q of ["q1.c", "q2.c"]) writeFileSync(join(s, "quarantine", q), `bad ${q}`);
  link(join(outside, "secret"), join(s, "quarantine", "q3.c"));
  return { bench, target: t, outside };
}

/** A result or a snapshot with the campaign's own path taken out, to compare two campaigns. */
function portable(x: IngestResult | Record<string, string>, out: string): unknown {
  return JSON.parse(JSON.stringify(x).replaceAll(out, "<out>"));
}

function rollBack(db: Db, t: IngestTarget): void {
  assert.throws(
    () =>
      db.transaction(() => {
        ingestChunk(sqliteSweepStore(db), t);
        throw new Error("SQLITE_BUSY: database is locked");
      })(),
    /SQLITE_BUSY/,
  );
}

describe("ingestChunk replayed after a rollback", () => {
  const clean = campaign("clean");
  const cleanScratch = snapshot(clean.target.scratch, true);
  const cleanResult = clean.bench.db.transaction(() => ingestChunk(clean.bench.store, clean.target))();

  test("the single clean run books what the chunk holds", () => {
    assert.deepEqual(
      {
        finds: cleanResult.finds,
        newFailures: cleanResult.newFailures,
        reopened: cleanResult.reopened,
        unshrunk: cleanResult.unshrunk,
        quarantine: cleanResult.quarantine,
        refused: cleanResult.refused,
      },
      { finds: 4, newFailures: 2, reopened: 1, unshrunk: 1, quarantine: 2, refused: null },
    );
    assert.deepEqual(
      cleanResult.malformed.map((m) => m.entry.slice(clean.target.scratch.length + 1)),
      ["failures/15", "failures/16", "failures/17", "quarantine/q3.c"],
    );
    assert.deepEqual(snapshot(clean.target.scratch, true), cleanScratch, "ingest leaves the scratch directory as it was");
  });

  for (const rollbacks of [1, 3]) {
    test(`after ${rollbacks} rolled-back attempt(s), the books, artifacts, kept entries and samples equal the clean run's`, () => {
      const c = campaign(`replay-${rollbacks}`);
      const scratchBefore = snapshot(c.target.scratch, true);
      const outsideBefore = snapshot(c.outside, true);
      const booksBefore = books(c.bench.db);
      for (let i = 0; i < rollbacks; i++) {
        rollBack(c.bench.db, c.target);
        assert.deepEqual(books(c.bench.db), booksBefore, "a rollback leaves the books as they were");
        assert.deepEqual(snapshot(c.target.scratch, true), scratchBefore, "and the scratch directory untouched");
      }
      const r = c.bench.db.transaction(() => ingestChunk(c.bench.store, c.target))();

      assert.deepEqual(portable(r, c.bench.out), portable(cleanResult, clean.bench.out));
      assert.deepEqual(books(c.bench.db), books(clean.bench.db));
      for (const dir of ["failures", "malformed", "quarantine"]) {
        const got = portable(snapshot(join(c.bench.out, dir)), c.bench.out);
        assert.deepEqual(got, portable(snapshot(join(clean.bench.out, dir)), clean.bench.out), `${dir}/ as after one clean run`);
      }
      assert.deepEqual(snapshot(c.target.scratch, true), scratchBefore, "the scratch directory is untouched");
      assert.deepEqual(snapshot(c.outside, true), outsideBefore, "nothing outside the campaign was touched");
      const dirs = (c.bench.db.prepare("SELECT artifact_dir FROM failure ORDER BY id").all() as { artifact_dir: string }[]).map((f) => f.artifact_dir);
      assert.deepEqual(dirs, [`failures/${key("crash", "F").slice(0, 12)}`, `failures/${key("crash", "A").slice(0, 12)}`, `failures/${key("wrong-result", "B").slice(0, 12)}`]);
    });
  }

  test("a replay reuses only its own leftovers: an artifact directory that is someone else's is never touched", () => {
    const c = campaign("foreign");
    rollBack(c.bench.db, c.target);
    // After the rollback, another party's files appear in the leftover of failure A.
    const leftover = join(c.bench.out, "failures", key("crash", "A").slice(0, 12));
    writeFileSync(join(leftover, "notes.txt"), "someone else's");
    const r = c.bench.db.transaction(() => ingestChunk(c.bench.store, c.target))();
    assert.equal(r.newFailures, 2);
    const a = c.bench.db.prepare("SELECT artifact_dir FROM failure WHERE dedup_key = ?").get(key("crash", "A")) as { artifact_dir: string };
    assert.equal(a.artifact_dir, `failures/${key("crash", "A").slice(0, 12)}-g1`);
    assert.equal(readFileSync(join(leftover, "notes.txt"), "utf8"), "someone else's");
  });
});
