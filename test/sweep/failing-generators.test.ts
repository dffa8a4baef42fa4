// Generators that misbehave: a hang (hard timeout, rate halving, two strikes), an unexpected
// exit code or a fatal signal (chunk aborted, log kept, lane disabled). A run whose every lane
// got disabled exits 4 unless it found something new: an unattended job must notice.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Campaign, coverageViolations, PLANTED, processesMentioning } from "../helpers/campaign.ts";

interface ChunkRow {
  id: number;
  seed_from: number;
  seed_to: number;
  status: string;
  seconds: number;
}

test("a hanging generator: aborted:timeout, rate halved, and a second consecutive timeout disables the lane", () => {
  const c = new Campaign({ defaults: { chunk_minutes: 0.02, hard_timeout_floor: 1, bootstrap_seeds: 50 } });
  try {
    const r = c.cli(["run", "--for", "40s"], { env: { PLANTED_HANG_SEED: "10" } });
    assert.equal(r.code, 4, r.stderr);
    assert.match(r.stderr, /every lane was disabled .*; exiting 4/);
    const chunks = c.query<ChunkRow>("SELECT * FROM chunk ORDER BY id");
    assert.deepEqual(
      chunks.map((ch) => ch.status),
      ["aborted:timeout", "aborted:timeout"],
    );
    const [first, second] = chunks as [ChunkRow, ChunkRow];
    assert.deepEqual([first.seed_from, first.seed_to], [1, 50]);
    // First timeout: no estimate yet, so the rate is derived from the chunk and halved.
    const r1 = 50 / Math.max(first.seconds, 1) / 2;
    assert.deepEqual([second.seed_from, second.seed_to], [1, Math.max(10, Math.floor(r1 * 1))], "the retry is sized by the halved rate");
    const lane = c.one<{ cursor: number; seeds_per_sec: number }>("SELECT cursor, seeds_per_sec FROM lane");
    assert.ok(Math.abs(lane.seeds_per_sec - r1 / 2) < 1e-9, `rate halved twice: ${lane.seeds_per_sec} vs ${r1 / 2}`);
    assert.equal(lane.cursor, 1, "nothing was covered");
    assert.match(r.stdout, /two consecutive chunks timed out/);
    assert.match(r.stdout, /all lanes disabled — stopping early/);
    assert.ok(existsSync(join(c.outDir, "tmp", `chunk-${first.id}.log`)), "the log of a timed-out chunk is kept");
    assert.deepEqual(processesMentioning(c.dir), [], "the hung generator was killed with its whole group");
    assert.equal(c.one<{ status: string }>("SELECT status FROM session").status, "disabled", "a session that stopped because every lane got disabled says so");
  } finally {
    c.cleanup();
  }
});

test("an unexpected exit code aborts the chunk, keeps its log and disables the lane", () => {
  // A generator that says what went wrong on both streams, then exits 3.
  const c = new Campaign({
    generator: `[generator]
command = ["sh", "-c", "echo \\"generating seeds $1 to $(($1 + $2 - 1))\\"; echo \\"internal error at seed $1\\" >&2; exit 3", "generator", "{seed_from}", "{count}", "{out}"]
identity = [${JSON.stringify(PLANTED)}]
`,
    lanes: { a: 'base_seed = 1\nargs = ["--size", "small"]', b: 'base_seed = 100\nargs = ["--size", "large"]' },
  });
  try {
    const r = c.cli(["run", "--for", "30s"]);
    assert.equal(r.code, 4, "every lane disabled and nothing new found: exit 4");
    assert.match(r.stderr, /fuzzfleet: every lane was disabled \(timeouts or unexpected generator exits, see above\), so the session stopped early; exiting 4/);
    assert.match(r.stdout, /LANES DISABLED: every lane was disabled for this session/);
    const chunks = c.query<ChunkRow & { lane_id: number }>("SELECT * FROM chunk ORDER BY id");
    assert.deepEqual(
      chunks.map((ch) => ch.status),
      ["aborted:exit 3", "aborted:exit 3"],
      "one chunk per lane, then both lanes are disabled",
    );
    for (const chunk of chunks) {
      const log = join(c.outDir, "tmp", `chunk-${chunk.id}.log`);
      assert.ok(existsSync(log), "the log is kept for the post-mortem");
      assert.equal(
        readFileSync(log, "utf8"),
        `generating seeds ${chunk.seed_from} to ${chunk.seed_to}\ninternal error at seed ${chunk.seed_from}\n`,
        "the log holds what the generator wrote, stdout and stderr in order",
      );
      assert.match(r.stdout, new RegExp(`see ${log.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
    }
    assert.match(r.stdout, /chunk \d+ aborted \(exit 3\) after/);
    assert.match(r.stdout, /lane 'a' disabled for the rest of this session: the generator exited with 3; see /);
    assert.match(r.stdout, /lane 'b' disabled for the rest of this session: the generator exited with 3; see /);
    for (const lane of c.query<{ cursor: number; base_seed: number }>("SELECT * FROM lane")) assert.equal(lane.cursor, lane.base_seed);
    assert.deepEqual(coverageViolations(c), []);
  } finally {
    c.cleanup();
  }
});

test("a generator killed by a signal is reported by the signal's name, in the chunk table and on the console", () => {
  const c = new Campaign({
    generator: `[generator]
command = ["sh", "-c", "kill -USR1 $$", "generator", "{seed_from}", "{count}", "{out}"]
identity = [${JSON.stringify(PLANTED)}]
`,
  });
  try {
    const r = c.cli(["run", "--for", "30s"]);
    assert.equal(r.code, 4, r.stdout + r.stderr);
    assert.deepEqual(
      c.query<ChunkRow>("SELECT * FROM chunk").map((ch) => ch.status),
      ["aborted:signal SIGUSR1"],
    );
    assert.match(r.stdout, /chunk \d+ aborted \(killed by SIGUSR1\) after/);
    assert.match(r.stdout, /lane 'small' disabled for the rest of this session: the generator was killed by SIGUSR1; see /);
    assert.ok(!r.stdout.includes("exit null"));
    assert.equal(c.one<{ cursor: number }>("SELECT cursor FROM lane").cursor, 1);
  } finally {
    c.cleanup();
  }
});

test("a run whose lanes all get disabled still exits 1 when it found a newly distinct failure first", () => {
  const c = new Campaign({ defaults: { chunk_minutes: 0.02, hard_timeout_floor: 1, bootstrap_seeds: 2000 } });
  try {
    // The first chunk, seeds 1..2,000, holds finds; every later chunk starts at 2,001 and holds
    // the hang (a chunk has at least 10 seeds), so two consecutive timeouts disable the lane.
    const r = c.cli(["run", "--for", "40s"], { env: { PLANTED_HANG_SEED: "2005" } });
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /every lane was disabled .*; exiting 1 for the newly distinct \(or reopened\) failures it found/);
    assert.ok(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure").n > 0);
  } finally {
    c.cleanup();
  }
});
