// A generator that breaks its contract while looking successful, and seeds at the edge of what a
// number holds exactly, through the real CLI and the real store: a typo in the generator's script
// path books no seed; a lane that reaches the last exact seed ends the session cleanly as
// exhausted; a store holding a chunk range past 2^53 is repaired at the next start.
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { test } from "node:test";
import { assertBooksTrue, exitOwed } from "../helpers/books.ts";
import { Campaign, coverageViolations, PLANTED } from "../helpers/campaign.ts";

const LAST_SEED = Number.MAX_SAFE_INTEGER - 1;

interface LaneStatusJson {
  name: string;
  covered: number;
  cursor: number;
  exhausted: boolean;
}

function statusLanes(c: Campaign): LaneStatusJson[] {
  const r = c.cli(["status", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  return (JSON.parse(r.stdout) as { lanes: LaneStatusJson[] }).lanes;
}

test("a typo in the generator's script path books no seed: each chunk is aborted as broken with Node's error in one line, and the third disables the lane", () => {
  const c = new Campaign({
    generator: `[generator]
command = ["node", "plantd.mjs", "--from", "{seed_from}", "--count", "{count}", "--out", "{out}"]
identity = [${JSON.stringify(PLANTED)}]
`,
  });
  try {
    const r = c.cli(["run", "--for", "30s"]);
    assert.equal(r.code, 4, `every lane disabled and nothing found: exit 4\n${r.stdout}\n${r.stderr}`);
    assert.deepEqual(
      c.query<{ status: string }>("SELECT status FROM chunk ORDER BY id").map((ch) => ch.status),
      ["aborted:broken", "aborted:broken", "aborted:broken"],
    );
    const ranges = c.query<{ seed_from: number; seed_to: number }>("SELECT seed_from, seed_to FROM chunk ORDER BY id");
    assert.deepEqual(new Set(ranges.map((x) => `${x.seed_from}..${x.seed_to}`)).size, 1, "the same range was handed out again each time");
    const aborted = r.stdout.split("\n").filter((l) => /chunk \d+ aborted/.test(l));
    assert.equal(aborted.length, 3);
    for (const line of aborted) {
      assert.match(
        line,
        /aborted \(broken: the generator exited 1 \("finds"\) but wrote no failure entry; its last output: Error: Cannot find module '.*plantd\.mjs'\) after/,
      );
    }
    assert.match(r.stdout, /lane 'small' disabled for the rest of this session: 3 chunks in a row broke the generator contract/);
    assert.match(r.stdout, /all lanes disabled — stopping early/);
    assert.deepEqual(
      statusLanes(c).map((l) => [l.name, l.covered]),
      [["small", 0]],
      "status shows nothing covered",
    );
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure").n, 0);
    assert.match(r.stdout, /seeds swept: +0\b/);
  } finally {
    c.cleanup();
  }
});

test("seeds at 2^53 - 10 with a fast generator: the last chunk ends at the last exact seed, the lane is exhausted, the books audit clean and the next run starts", () => {
  const base = 2 ** 53 - 10;
  const c = new Campaign({ lanes: { small: `base_seed = ${base}\nargs = ["--size", "small"]` } });
  try {
    const r = c.cli(["run", "--for", "30s"]);
    const out = r.stdout + r.stderr;
    assert.equal(r.code, exitOwed(c, r.stdout), out);
    assert.doesNotMatch(out, /AssertionError|unexpected error/);
    assert.deepEqual(
      c.query<{ seed_from: number; seed_to: number; status: string }>("SELECT seed_from, seed_to, status FROM chunk"),
      [{ seed_from: base, seed_to: LAST_SEED, status: "complete" }],
    );
    assert.match(out, /lane 'small' is exhausted: every seed up to 9,007,199,254,740,990, the last one counted exactly, is covered/);
    assert.match(out, /every lane is exhausted — nothing left to sweep; the session ends/);
    assert.match(out, /ended early: every lane is exhausted/);
    assert.equal(c.one<{ status: string }>("SELECT status FROM session").status, "done");
    assertBooksTrue(c, "a lane swept to the last exact seed");
    assert.deepEqual(statusLanes(c), [
      { ...statusLanes(c)[0]!, name: "small", covered: 9, cursor: Number.MAX_SAFE_INTEGER, exhausted: true },
    ]);
    assert.match(c.cli(["status"]).stdout, /EXHAUSTED: every seed up to 9,007,199,254,740,990/);

    const next = c.cli(["run", "--for", "30s"]);
    assert.equal(next.code, 0, next.stdout + next.stderr);
    assert.match(next.stdout, /every lane is exhausted — nothing left to sweep/);
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk").n, 1, "an exhausted lane gets no chunk");
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM session WHERE status = 'done'").n, 2);
  } finally {
    c.cleanup();
  }
});

test("a generator that exits 0 at once, from seed 1, runs into the last exact seed and ends exhausted, not crashed", () => {
  const c = new Campaign({
    generator: `[generator]
command = ["sh", "-c", "exit 0", "generator", "{seed_from}", "{count}", "{out}"]
identity = [${JSON.stringify(PLANTED)}]
`,
  });
  try {
    const r = c.cli(["run", "--for", "60s"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /every lane is exhausted/);
    const lane = c.one<{ cursor: number; seeds_per_sec: number }>("SELECT cursor, seeds_per_sec FROM lane");
    assert.equal(lane.cursor, Number.MAX_SAFE_INTEGER);
    assert.deepEqual(coverageViolations(c), []);
    const chunks = c.query<{ seed_from: number; seed_to: number }>("SELECT seed_from, seed_to FROM chunk ORDER BY id");
    for (let i = 1; i < chunks.length; i++) {
      const n = (k: number) => chunks[k]!.seed_to - chunks[k]!.seed_from + 1;
      assert.ok(n(i) <= 3 * n(i - 1), `chunk ${i} holds ${n(i)} seeds after ${n(i - 1)}: at most three times as many`);
    }
    assert.ok(chunks.every((ch) => Number.isSafeInteger(ch.seed_from) && Number.isSafeInteger(ch.seed_to) && ch.seed_to <= LAST_SEED));
  } finally {
    c.cleanup();
  }
});

test("a store holding a chunk range past 2^53 (as an unbounded sweep left it) is repaired at start: the run starts, coverage below is kept", () => {
  const c = new Campaign();
  try {
    const first = c.cli(["run", "--for", "6s"]);
    assert.equal(first.code, exitOwed(c, first.stdout), first.stdout + first.stderr);
    const before = c.one<{ id: number; cursor: number }>("SELECT id, cursor FROM lane");
    assert.ok(before.cursor > 1);
    // Forge the row a sweep past 2^53 left behind: in flight when the engine's assertion killed it.
    const db = new Database(c.dbPath);
    const session = (db.prepare("SELECT MAX(id) AS id FROM session").get() as { id: number }).id;
    const forged = Number(
      db
        .prepare("INSERT INTO chunk (session_id, lane_id, seed_from, seed_to, started_at, status) VALUES (?, ?, ?, ?, '2026-01-01T00:00:00Z', 'running')")
        .run(session, before.id, before.cursor, 9007199254742040).lastInsertRowid,
    );
    db.close();

    const second = c.cli(["run", "--for", "6s"]);
    const out = second.stdout + second.stderr;
    assert.equal(second.code, exitOwed(c, second.stdout), out);
    assert.match(
      second.stderr,
      new RegExp(`repaired 1 chunk row\\(s\\) whose seed range went past the last exact seed 9,007,199,254,740,990: chunk ${forged} of lane 'small' \\(seeds [\\d,]+\\.\\.9,007,199,254,742,040, aborted:lost\\) is now aborted:invalid range`),
    );
    assert.deepEqual(c.one("SELECT seed_from, seed_to, status FROM chunk WHERE id = ?", forged), {
      seed_from: before.cursor,
      seed_to: LAST_SEED,
      status: "aborted:invalid range",
    });
    const after = c.one<{ cursor: number }>("SELECT cursor FROM lane");
    assert.ok(after.cursor > before.cursor, `the run swept on from the cursor (${before.cursor} -> ${after.cursor})`);
    assertBooksTrue(c, "after the repair");
    const third = c.cli(["run", "--for", "6s"]);
    assert.equal(third.code, exitOwed(c, third.stdout), third.stdout + third.stderr);
    assert.doesNotMatch(third.stderr, /repaired/, "the repair is done once");
  } finally {
    c.cleanup();
  }
});
