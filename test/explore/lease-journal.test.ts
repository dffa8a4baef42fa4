// The lease journal of a table one process owns alone, and the group commit of a lone master:
// what a torn or corrupt journal means, who absorbs a journal and when, how many fdatasyncs a
// batch costs, a batch whose results stage the same content twice (for a lone master and for one
// that shares its table), and that no child is public before its fence is durable: at close, and
// when the journal's fdatasync fails.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs, { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { join } from "node:path";
import { describe, it } from "node:test";
import { canonicalManifest, LeaseTable } from "../../src/explore/state/lease-table.ts";
import { CorruptJournalError, JOURNAL_FILE, parseJournal } from "../../src/explore/state/lease-journal.ts";
import { owner } from "../../src/core/rendezvous.ts";
import { ROOT } from "../helpers/campaign.ts";
import { loneMaster, writeSeed } from "../helpers/explore.ts";
import { scratchDirs, sha256 } from "../helpers/scratch.ts";

const { freshDir } = scratchDirs("lease-journal");
const id = (n: number) => sha256(`content ${n}`);
const now = 1_000_000;
const journals = (root: string) => readdirSync(root).filter((n) => JOURNAL_FILE.test(n));

describe("lease journal", () => {
  it("an exclusive table writes no record file, one journal line per transition, and one fdatasync per batch", () => {
    const root = join(freshDir(), "leases");
    const table = new LeaseTable({ root, durability: "fence" });
    table.takeExclusive();
    const fences = [0, 1, 2].map((n) => table.claim(id(n), { hash: id(n), origin: "initial" }, "m:0", { now, ttlMs: 60_000 })!);
    assert.ok(fences.every((f) => f !== null));
    const manifest = (n: number) => canonicalManifest({ worker: "w1", staging_id: "a".repeat(32), hashes: [id(100 + n)], num_generated: 1 });
    table.batch(() => {
      for (const n of [0, 1, 2]) assert.equal(table.beginCommit(id(n), fences[n], manifest(n), now + 1), true);
    });
    assert.deepEqual(table.journalStats, { lines: 6, syncs: 1, bytes: table.journalStats!.bytes }, "three fences, one fdatasync");
    assert.deepEqual(readdirSync(root).filter((n) => !JOURNAL_FILE.test(n)), [], "no shard directory, no record file");
    assert.equal(table.replayCommit(id(0), fences[0], () => {}, now + 2), "completed");
    assert.equal(table.journalStats!.syncs, 1, "the fence was durable already: completing it needs no sync under --sync fence");
    assert.equal(table.record(id(0))!.status, "done");
    assert.equal(table.counts(now + 3, 60_000).committing, 2);
  });

  it("a journal whose writer is gone is absorbed by the next opener into durable record files; a live one is left alone", () => {
    const root = join(freshDir(), "leases");
    // A writer in another process that is SIGKILLed after its transitions (its flock dies with it).
    const script = `
      import { LeaseTable, canonicalManifest } from ${JSON.stringify(join(ROOT, "src/explore/state/lease-table.ts"))};
      const t = new LeaseTable({ root: ${JSON.stringify(root)} });
      t.takeExclusive();
      const f = t.claim("${id(1)}", { hash: "${id(1)}", origin: "initial" }, "m:0", { now: ${now}, ttlMs: 60000 });
      t.beginCommit("${id(1)}", f, canonicalManifest({ worker: "w1", staging_id: "${"b".repeat(32)}", hashes: ["${id(9)}"], num_generated: 1 }), ${now + 1});
      t.claim("${id(2)}", { hash: "${id(2)}", origin: "generated" }, "m:0", { now: ${now}, ttlMs: 60000 });
      process.kill(process.pid, "SIGKILL");`;
    const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8" });
    assert.equal(r.signal, "SIGKILL", r.stderr);
    assert.equal(journals(root).length, 1, "the killed writer left its journal");
    const live = new LeaseTable({ root });
    live.takeExclusive();
    assert.equal(journals(root).length, 1, "absorbed on open; only the new writer's own journal is left");
    const rec = live.record(id(1))!;
    assert.equal(rec.status, "committing", "the commit fence survived the kill");
    assert.deepEqual(rec.commit!.hashes, [id(9)]);
    assert.equal(live.record(id(2))!.status, "leased");
    const files = readdirSync(root).filter((n) => /^[0-9]{3}$/.test(n)).flatMap((d) => readdirSync(join(root, d)));
    assert.ok(files.includes(`${id(1)}.json`) && files.includes(`${id(2)}.json`), "the records are files again");
    // Another opener while that writer lives: its journal is not absorbed.
    new LeaseTable({ root });
    assert.equal(journals(root).length, 1, "a live writer's journal is never absorbed");
  });

  it("a journal well past its records is compacted into the next generation, which holds them all", () => {
    const root = join(freshDir(), "leases");
    const table = new LeaseTable({ root, journalCompactBytes: 20_000 });
    table.takeExclusive();
    const fence = table.claim(id(1), { hash: id(1), origin: "initial" }, "m:0", { now, ttlMs: 60_000 })!;
    for (let i = 1; i <= 200; i++) table.heartbeatMany(new Map([[id(1), fence]]), now + i);
    const names = journals(root);
    assert.equal(names.length, 1, "the older generation was removed");
    assert.ok(Number(JOURNAL_FILE.exec(names[0])![1]) >= 1, `compacted at least once (${names[0]})`);
    assert.ok(readFileSync(join(root, names[0]), "utf8").length < 20_000);
    assert.equal(table.record(id(1))!.updated, now + 200);
    const lines = readFileSync(join(root, names[0]), "utf8").trim().split("\n");
    assert.equal(JSON.parse(lines[0]).put.id, id(1), "a generation opens with the live records");
  });

  it("without the option a journal is never compacted below 64 MiB", () => {
    const root = join(freshDir(), "leases");
    const table = new LeaseTable({ root });
    table.takeExclusive();
    const fence = table.claim(id(1), { hash: id(1), origin: "initial" }, "m:0", { now, ttlMs: 60_000 })!;
    for (let i = 1; i <= 200; i++) table.heartbeatMany(new Map([[id(1), fence]]), now + i);
    const names = journals(root);
    assert.equal(names.length, 1);
    assert.equal(Number(JOURNAL_FILE.exec(names[0])![1]), 0, `still the first generation (${names[0]})`);
    assert.equal(readFileSync(join(root, names[0]), "utf8").trim().split("\n").length, 201, "a claim and 200 heartbeats, one line each");
  });

  it("a torn last line is dropped; a bad line before it is corruption, named, never skipped", () => {
    const path = "/j";
    const rec = (n: number) => JSON.stringify({ put: { attempts: 1, id: id(n), owner: "m:0", payload: { hash: id(n), origin: "initial" }, previous_owner: "", schema: 1, status: "leased", steals: 0, token: "f", updated: now, worker: 0 } });
    assert.deepEqual([...parseJournal(path, `${rec(1)}\n${rec(2).slice(0, 40)}`).keys()], [id(1)], "a tail without its newline");
    assert.deepEqual([...parseJournal(path, `${rec(1)}\n\0\0\0\n`).keys()], [id(1)], "zeros a machine crash left at the end");
    assert.deepEqual([...parseJournal(path, `${rec(1)}\n${JSON.stringify({ del: id(1) })}\n`).entries()], [[id(1), null]]);
    assert.throws(() => parseJournal(path, `${rec(1)}\nnot json\n${rec(2)}\n`), (e: unknown) => e instanceof CorruptJournalError && /\/j is corrupt at line 2 \(not JSON\)/.test(e.message));
    assert.throws(() => parseJournal(path, `{"put":{"id":"${id(1)}"}}\n${rec(2)}\n`), CorruptJournalError);
  });

  it("a corrupt journal left behind makes the table refuse to open, naming the file", () => {
    const root = join(freshDir(), "leases");
    mkdirSync(root, { recursive: true });
    writeFileSync(join(root, "journal-1-0123456789ab-0.log"), "garbage\n");
    appendFileSync(join(root, "journal-1-0123456789ab-0.log"), `${JSON.stringify({ del: id(1) })}\n`);
    assert.throws(() => new LeaseTable({ root }), /journal-1-0123456789ab-0\.log is corrupt at line 1/);
  });
});

// A table the master shares with other masters (ranks 0 and 1) keeps its record files and
// their locks, and its results are committed a batch at a time all the same.
for (const ranks of [[0], [0, 1]]) {
  describe(`group commit of ${ranks.length === 1 ? "a lone master" : "a master that shares its table"}`, () => {
    it("two results of one batch that staged the same content: both commit, the content is promoted once", async () => {
      const dir = freshDir();
      const corpusDir = join(dir, "corpus");
      const inputDir = join(dir, "in");
      mkdirSync(corpusDir);
      mkdirSync(inputDir);
      // Contents rank 0 owns, so that it claims them (with two ranks, half of all contents).
      const mine = (base: string) => {
        for (let n = 0; ; n++) if (owner(sha256(`${base} ${n}\n`), ranks) === 0) return Buffer.from(`${base} ${n}\n`);
      };
      writeSeed(join(inputDir, "a"), mine("seed a").toString());
      writeSeed(join(inputDir, "b"), mine("seed b").toString());
      const leases = new LeaseTable({ root: join(dir, "leases"), durability: "fence" });
      const master = loneMaster({ dir, corpusDir, inputDir }, { leases, ranks });
      assert.equal(leases.exclusive, ranks.length === 1, "only a lone master owns its table");
      master.admitInputs();
      const child = mine("same child");
      const notes = [];
      const tasks = [];
      for (const executor of ["w1", "w2"]) {
        const t = master.nextTask(executor)!;
        tasks.push(t);
        const stageId = sha256(executor).slice(0, 32);
        const stage = join(master.stageRoot(executor), stageId);
        mkdirSync(stage, { recursive: true });
        writeFileSync(join(stage, sha256(child)), child);
        const input = readFileSync(join(corpusDir, t.hash));
        notes.push(
          master.consumeResult(executor, {
            taskId: t.id, fence: t.fence, inputHash: sha256(input), children: [sha256(child)], generated: 1, stagedBytes: child.length,
            stagingId: stageId, retcode: 0, seconds: 0.01, failure: null, budget: null, detail: null, finding: null,
          }),
        );
      }
      assert.deepEqual(notes, ["committed", "committed"]);
      assert.equal(master.idle, false, "not idle while the batch is in flight");
      assert.deepEqual(tasks.map((t) => leases.record(t.hash)?.status), ["leased", "leased"], "queued for the batch, not committed one by one");
      await new Promise((r) => setTimeout(r, 200));
      assert.deepEqual(master.problems, []);
      assert.deepEqual(tasks.map((t) => leases.record(t.hash)?.status), ["done", "done"]);
      assert.equal(master.counters.observations, 2);
      assert.equal(readFileSync(join(corpusDir, sha256(child)), "utf8"), child.toString());
      assert.equal(master.pendingCount, 1, "the child is claimed once");
      master.close();
    });
  });
}

/** A lone master with one seed whose task w1 ran and staged `child`; `submit()` sends its result. */
function oneStagedResult(child: Buffer) {
  const dir = freshDir();
  const corpusDir = join(dir, "corpus");
  const inputDir = join(dir, "in");
  mkdirSync(corpusDir);
  mkdirSync(inputDir);
  writeSeed(join(inputDir, "a"), "seed a\n");
  const leases = new LeaseTable({ root: join(dir, "leases"), durability: "fence" });
  const master = loneMaster({ dir, corpusDir, inputDir }, { leases });
  master.admitInputs();
  const t = master.nextTask("w1")!;
  const stageId = "d".repeat(32);
  const stage = join(master.stageRoot("w1"), stageId);
  mkdirSync(stage, { recursive: true });
  writeFileSync(join(stage, sha256(child)), child);
  const submit = () =>
    master.consumeResult("w1", {
      taskId: t.id, fence: t.fence, inputHash: sha256(readFileSync(join(corpusDir, t.hash))), children: [sha256(child)], generated: 1,
      stagedBytes: child.length, stagingId: stageId, retcode: 0, seconds: 0.01, failure: null, budget: null, detail: null, finding: null,
    });
  return { master, leases, corpusDir, task: t, submit, published: () => existsSync(join(corpusDir, sha256(child))) };
}

describe("group commit when the journal cannot be made durable", () => {
  it("an fdatasync that fails in the pool and again on the loop: no child of the batch becomes public; its record stays committing", async () => {
    const r = oneStagedResult(Buffer.from("an unpublished child\n"));
    const eio = () => Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO", errno: -5 });
    const { fdatasync, fdatasyncSync } = fs;
    fs.fdatasync = ((_fd: number, cb: (err: Error | null) => void) => process.nextTick(cb, eio())) as typeof fs.fdatasync;
    fs.fdatasyncSync = () => {
      throw eio();
    };
    syncBuiltinESMExports();
    try {
      assert.equal(r.submit(), "committed", "queued for the batch");
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(r.published(), false, "a child whose fence may not be on disk stays unpublished");
      assert.equal(r.leases.record(r.task.hash)?.status, "committing", "replayed later from its manifest");
    } finally {
      Object.assign(fs, { fdatasync, fdatasyncSync });
      syncBuiltinESMExports();
    }
  });
});

describe("group commit at close", () => {
  it("a batch still queued when the master closes: its fence is fdatasynced before its child is linked into the corpus", () => {
    const r = oneStagedResult(Buffer.from("a child\n"));
    assert.equal(r.submit(), "committed", "queued for the batch");
    // The order of the two system calls that matter, seen at the fs module (close() is synchronous).
    const order: string[] = [];
    const { fdatasyncSync, linkSync } = fs;
    fs.fdatasyncSync = (fd) => {
      order.push("fdatasync");
      fdatasyncSync(fd);
    };
    fs.linkSync = (from, to) => {
      if (String(to).startsWith(r.corpusDir)) order.push("link into the corpus");
      linkSync(from, to);
    };
    syncBuiltinESMExports();
    try {
      r.master.close();
    } finally {
      Object.assign(fs, { fdatasyncSync, linkSync });
      syncBuiltinESMExports();
    }
    assert.equal(r.published(), true);
    assert.ok(order.includes("link into the corpus"), order.join(", "));
    assert.equal(order[0], "fdatasync", `the fence first: ${order.join(", ")}`);
  });
});
