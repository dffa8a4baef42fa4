// Generators that misbehave: a hang (hard timeout, rate halving, two strikes) and an
// unexpected exit code (chunk aborted, log kept, lane disabled).
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Campaign, coverageViolations, processesMentioning } from "../helpers/campaign.ts";

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
    assert.equal(r.code, 0, r.stderr);
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
    assert.equal(c.one<{ status: string }>("SELECT status FROM session").status, "done");
  } finally {
    c.cleanup();
  }
});

test("an unexpected exit code aborts the chunk, keeps its log and disables the lane", () => {
  const c = new Campaign({
    lanes: { a: 'base_seed = 1\nargs = ["--size", "small"]', b: 'base_seed = 100\nargs = ["--size", "large"]' },
  });
  try {
    const r = c.cli(["run", "--for", "30s"], { env: { PLANTED_EXIT: "3" } });
    assert.equal(r.code, 0, r.stderr);
    const chunks = c.query<ChunkRow & { lane_id: number }>("SELECT * FROM chunk ORDER BY id");
    assert.deepEqual(
      chunks.map((ch) => ch.status),
      ["aborted:exit 3", "aborted:exit 3"],
      "one chunk per lane, then both lanes are disabled",
    );
    const log = join(c.outDir, "tmp", `chunk-${chunks[0]!.id}.log`);
    assert.ok(existsSync(log), "the log is kept for the post-mortem");
    assert.match(r.stdout, new RegExp(`see ${log.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
    assert.match(r.stdout, /lane 'a' disabled for the rest of this session: the generator exit 3/);
    assert.ok(readFileSync(log, "utf8").length >= 0);
    for (const lane of c.query<{ cursor: number; base_seed: number }>("SELECT * FROM lane")) assert.equal(lane.cursor, lane.base_seed);
    assert.deepEqual(coverageViolations(c), []);
  } finally {
    c.cleanup();
  }
});
