// `fuzzfleet run` end to end: the compiled CLI, the bundled planted-bug generator as a real
// child process, and the real SQLite store.
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { loadConfig } from "../../src/config/load.ts";
import { laneIdentity } from "../../src/config/schema.ts";
import { insertChunk } from "../../src/store/chunks.ts";
import { openStore } from "../../src/store/db.ts";
import { insertGeneration } from "../../src/store/generations.ts";
import { insertLane } from "../../src/store/lanes.ts";
import { insertSession } from "../../src/store/sessions.ts";
import { generationHash } from "../../src/config/identity.ts";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, coverageViolations, exited, processesMentioning, waitFor } from "../helpers/campaign.ts";

interface ChunkRow {
  id: number;
  lane_id: number;
  seed_from: number;
  seed_to: number;
  status: string;
  finds: number;
  seconds: number | null;
}

describe("run on the bundled generator", () => {
  const c = new Campaign({
    lanes: {
      small: 'base_seed = 1\nweight = 2\nargs = ["--size", "small"]',
      large: 'base_seed = 5000000\nargs = ["--size", "large"]',
    },
    costMs: 0.2,
  });
  after(() => c.cleanup());

  test("an 8 s run completes chunks, keeps every cursor a true prefix and dedups failures", () => {
    // Chunks start for 5 s, until the deadline floor (3 s, the chunk length): two bootstrap chunks and rate-sized ones.
    const r = c.cli(["run", "--for", "8s"]);
    assert.equal(r.code, 1, `exit 1 = newly distinct failures were recorded\n${r.stdout}\n${r.stderr}`);
    const chunks = c.query<ChunkRow>("SELECT * FROM chunk");
    const complete = chunks.filter((ch) => ch.status === "complete");
    assert.ok(complete.length >= 3, `at least three complete chunks (got ${complete.length})`);
    // The session fills its budget: chunks start until 3 s are left, the last one sized to what remains.
    const used = /^  budget: +(\d+)s of 8s — ran until no chunk could start \(less than 3s left\)$/m.exec(r.stdout);
    assert.ok(used && Number(used[1]) >= 5, `the summary says the 8 s budget was used up to the deadline floor:\n${r.stdout}`);
    assert.deepEqual(coverageViolations(c), []);
    for (const lane of c.query<{ id: number; base_seed: number; cursor: number }>("SELECT * FROM lane WHERE retired = 0")) {
      const sum = complete.filter((ch) => ch.lane_id === lane.id).reduce((n, ch) => n + ch.seed_to - ch.seed_from + 1, 0);
      assert.equal(lane.cursor - lane.base_seed, sum, "cursor - base_seed = sum of complete chunk sizes");
      assert.ok(lane.cursor > lane.base_seed, "every lane made progress");
    }
    const finds = complete.reduce((n, ch) => n + ch.finds, 0);
    const distinct = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure").n;
    assert.ok(distinct > 0 && distinct < finds, `distinct failures (${distinct}) < finds (${finds})`);
    const hits = c.one<{ n: number }>("SELECT SUM(hits) AS n FROM failure").n;
    const pairs = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure_seed").n;
    assert.equal(hits, pairs, "hits = distinct (failure, seed) rows");
    assert.equal(finds, pairs, "every find is one (failure, seed) pair");
    const session = c.one<{ status: string; mode: string }>("SELECT * FROM session");
    assert.deepEqual(session, { ...session, status: "done", mode: "local" });
    for (const f of c.query<{ artifact_dir: string }>("SELECT artifact_dir FROM failure")) {
      assert.ok(existsSync(join(c.outDir, f.artifact_dir, "meta.json")), `artifacts copied to ${f.artifact_dir}`);
    }
    assert.match(r.stdout, /session 1 done/);
    assert.ok(existsSync(join(c.outDir, "sessions", "session-0001.txt")), "the summary is saved");
    assert.deepEqual(readdirSync(join(c.outDir, "tmp")), [], "no scratch directory or log is left behind");
  });

  test("a second run resumes at the cursor and does not count a seed twice", () => {
    const before = c.query<{ name: string; cursor: number }>("SELECT name, cursor FROM lane WHERE retired = 0");
    const firstNewChunk = c.one<{ n: number }>("SELECT MAX(id) AS n FROM chunk").n + 1;
    const r = c.cli(["run", "--for", "4s"]);
    assert.equal(r.code, exitOwed(c, r.stdout), r.stdout + r.stderr);
    let resumed = 0;
    for (const lane of before) {
      const row = c.one<{ id: number; cursor: number }>("SELECT id, cursor FROM lane WHERE retired = 0 AND name = ?", lane.name);
      const first = c.query<ChunkRow>("SELECT * FROM chunk WHERE lane_id = ? AND id >= ? ORDER BY id LIMIT 1", row.id, firstNewChunk)[0];
      if (first) {
        assert.equal(first.seed_from, lane.cursor, `lane ${lane.name} resumed at its cursor`);
        assert.ok(row.cursor > lane.cursor, `lane ${lane.name} moved on`);
        resumed++;
      } else {
        // A short session may give one lane no chunk at all; then its cursor must not move.
        assert.equal(row.cursor, lane.cursor, `lane ${lane.name} without a new chunk kept its cursor`);
      }
    }
    assert.ok(resumed > 0, "at least one lane resumed");
    assert.ok(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE id >= ?", firstNewChunk).n > 0, "the second run swept");
    assert.deepEqual(coverageViolations(c), []);
    const hits = c.one<{ n: number }>("SELECT SUM(hits) AS n FROM failure").n;
    assert.equal(hits, c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure_seed").n);
  });
});

describe("interruptions", () => {
  test("SIGINT mid-chunk leaves the cursor, marks the session interrupted and leaves no process behind", async () => {
    const c = new Campaign({ costMs: 50, defaults: { bootstrap_seeds: 400 } });
    try {
      const run = c.spawn(["run", "--for", "5m"]);
      const done = exited(run);
      const chunk = await waitFor("a running chunk", () =>
        c.query<ChunkRow>("SELECT * FROM chunk WHERE status = 'running'")[0],
      );
      await waitFor("the generator to start", () => (processesMentioning(join(c.outDir, "tmp", `chunk-${chunk.id}`)).length > 0 ? true : undefined));
      run.kill("SIGINT");
      const r = await done;
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(processesMentioning(c.dir), [], "no process of the chunk's group survives");
      assert.equal(c.one<ChunkRow>("SELECT * FROM chunk WHERE id = ?", chunk.id).status, "aborted:interrupted");
      assert.equal(c.one<{ cursor: number }>("SELECT cursor FROM lane").cursor, 1, "the cursor did not move");
      assert.equal(c.one<{ status: string }>("SELECT status FROM session").status, "interrupted");
      assert.match(r.stdout, /range will be re-swept/);
      assert.match(r.stdout, /^  budget: +\d+s of 5m00s — ended early: interrupted/m, "the summary says why the session ended before its budget");
      assert.ok(!existsSync(join(c.outDir, "fuzzfleet.lock")), "the lock is released");
    } finally {
      c.cleanup();
    }
  });

  test("after SIGKILL of run, the next run reclaims the dead lock and sweeps the lost range first", async () => {
    const c = new Campaign({ costMs: 30, defaults: { bootstrap_seeds: 300 } });
    try {
      const run = c.spawn(["run", "--for", "5m"]);
      const done = exited(run);
      const chunk = await waitFor("a running chunk", () => c.query<ChunkRow>("SELECT * FROM chunk WHERE status = 'running'")[0]);
      run.kill("SIGKILL");
      await done;
      // The generator runs in its own process group and outlives a SIGKILLed runner; stop it so
      // the test measures fuzzfleet, not the orphan.
      for (const pid of processesMentioning(join(c.outDir, "tmp", `chunk-${chunk.id}`))) process.kill(pid, "SIGKILL");
      assert.ok(existsSync(join(c.outDir, "fuzzfleet.lock")), "the dead run left its lock");
      c.writeConfig({ costMs: 0 });
      const r = c.cli(["run", "--for", "5s", "--yes"]);
      assert.equal(r.code, exitOwed(c, r.stdout), `reclaimed without --force-unlock\n${r.stdout}\n${r.stderr}`);
      assert.match(r.stdout, /left uncovered by an earlier session/);
      assert.match(r.stderr, /session\(s\) #1 ended without closing \(the process died\): marked crashed; 1 chunk\(s\) left in flight marked aborted:lost/);
      assert.deepEqual(c.one("SELECT status, ended_at FROM session WHERE id = 1"), { status: "crashed", ended_at: null });
      assert.equal(c.one<ChunkRow>("SELECT * FROM chunk WHERE id = ?", chunk.id).status, "aborted:lost");
      const lane = c.one<{ id: number; cursor: number }>("SELECT id, cursor FROM lane WHERE retired = 0");
      const next = c.query<ChunkRow>("SELECT * FROM chunk WHERE lane_id = ? AND id > ? ORDER BY id", lane.id, chunk.id)[0]!;
      assert.equal(next.seed_from, chunk.seed_from, "the lost range is swept first");
      assert.ok(lane.cursor > chunk.seed_to, "the cursor passed the lost range");
      assert.deepEqual(coverageViolations(c), []);
    } finally {
      c.cleanup();
    }
  });
});

describe("a store left behind by a process that died", () => {
  // Forged as a killed coordinator leaves it: session 1 'running', one chunk of each lane in flight.
  const c = new Campaign({
    lanes: {
      small: 'base_seed = 1\nargs = ["--size", "small"]',
      large: 'base_seed = 1000000\nargs = ["--size", "large"]',
    },
  });
  after(() => c.cleanup());
  const config = loadConfig(c.configPath);
  const db = openStore(c.dbPath);
  const gen = insertGeneration(db, generationHash(config), "initial");
  const session = insertSession(db, { generationId: gen, requestedSeconds: 600, appBuild: null, transport: "distributed", host: "h", port: 9 });
  const lost = config.lanes.map((l) => {
    const laneId = insertLane(db, gen, l.name, laneIdentity(l), l.baseSeed);
    const chunkId = insertChunk(db, { sessionId: session, laneId, seedFrom: l.baseSeed, seedTo: l.baseSeed + 99, appBuild: null, status: "leased", workerId: null });
    return { lane: l.name, chunkId, seedFrom: l.baseSeed };
  });
  db.close();

  test("run marks the dead session crashed and its chunks aborted:lost, and names uncovered seeds only of the lanes it sweeps", () => {
    const r = c.cli(["run", "--lane", "small", "--for", "4s"]);
    assert.equal(r.code, exitOwed(c, r.stdout), r.stdout + r.stderr);
    assert.match(r.stdout, /small: 100 seed\(s\) left uncovered by an earlier session/);
    assert.doesNotMatch(r.stdout, /large: .*left uncovered/, "lane large is not swept by this session");
    assert.deepEqual(c.one("SELECT status, ended_at FROM session WHERE id = ?", session), { status: "crashed", ended_at: null });
    assert.deepEqual(
      lost.map((l) => c.one<{ status: string }>("SELECT status FROM chunk WHERE id = ?", l.chunkId).status),
      ["aborted:lost", "aborted:lost"],
    );
    const first = c.one<ChunkRow>("SELECT * FROM chunk WHERE session_id = 2 ORDER BY id LIMIT 1");
    assert.deepEqual([first.seed_from, first.seed_to], [1, 100], "the lost range of the swept lane goes first");
    assert.deepEqual(coverageViolations(c), []);
  });

  test("status shows the crashed session and counts lost chunks as aborted", () => {
    const json = JSON.parse(c.cli(["status", "--json"]).stdout) as {
      sessions: { id: number; status: string }[];
      totals: { aborted: number };
    };
    assert.deepEqual(json.sessions.find((s) => s.id === session)?.status, "crashed");
    assert.equal(json.totals.aborted, c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE status LIKE 'aborted%'").n);
    assert.ok(json.totals.aborted >= 2);
    const text = c.cli(["status"]).stdout;
    assert.match(text, new RegExp(`#${session} crashed  \\S+ -> \\?  \\(the process died without closing the session\\)`));
  });

  test("the lane that was not swept still has its lost range queued for the next session that sweeps it", () => {
    const r = c.cli(["run", "--lane", "large", "--for", "4s"]);
    assert.equal(r.code, exitOwed(c, r.stdout), r.stdout + r.stderr);
    assert.match(r.stdout, /large: 100 seed\(s\) left uncovered by an earlier session/);
    const first = c.one<ChunkRow>("SELECT c.* FROM chunk c JOIN lane l ON l.id = c.lane_id WHERE l.name = 'large' AND c.session_id = 3 ORDER BY c.id LIMIT 1");
    assert.equal(first.seed_from, lost[1]!.seedFrom);
    assert.deepEqual(coverageViolations(c), []);
  });
});
