// A single-host session's budget holds: a chunk still running at the session's end is killed no
// later than the drain grace after it, and booked as cut by the session's end — its range swept
// again, the cursor left at the prefix below it, no strike against the generator.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { assertBooksTrue, exitOwed } from "../helpers/books.ts";
import { Campaign, finished, start } from "../helpers/campaign.ts";

interface ChunkRow {
  seed_from: number;
  seed_to: number;
  status: string;
}

/** Where the planted generator blocks for good (PLANTED_HANG_SEED): inside the fourth chunk (1..100, 101..400, 401..1,300, 1,301..). */
const HANG_SEED = 2000;

describe("run's budget with a chunk that would run past it", () => {
  const c = new Campaign({
    // A chunk's own hard timeout is 180 s (the floor): only the session's end can stop the hang sooner.
    defaults: { hard_timeout_floor: 180 },
    extra: "[distributed]\ndrain_grace_minutes = 0.05\n",
  });
  after(() => c.cleanup());

  test("ends within budget + drain grace, the cut chunk aborted as 'session ended' and the prefix below it intact", async () => {
    const t0 = Date.now();
    const r = start(c, ["run", "--for", "8s"], { PLANTED_HANG_SEED: String(HANG_SEED) });
    const end = await finished(r, 60_000, "a run of 8 s with a 3 s drain grace");
    const seconds = (Date.now() - t0) / 1000;
    const out = r.output();
    assert.equal(end.code, exitOwed(c, out), out);
    // 8 s of budget, 3 s of grace; the rest is the CLI's start and the store's close (the chunk's own timeout is 180 s).
    assert.ok(seconds < 8 + 3 + 8, `the session ended ${seconds.toFixed(1)} s after it started:\n${out}`);

    const chunks = c.query<ChunkRow>("SELECT seed_from, seed_to, status FROM chunk ORDER BY seed_from");
    const cut = chunks.find((ch) => ch.seed_from <= HANG_SEED && HANG_SEED <= ch.seed_to);
    assert.ok(cut, `a chunk held seed ${HANG_SEED}: ${JSON.stringify(chunks)}`);
    assert.equal(cut.status, "aborted:session ended", JSON.stringify(chunks));
    assert.ok(
      chunks.filter((ch) => ch.seed_from < cut.seed_from).every((ch) => ch.status === "complete"),
      `every chunk below the cut one is complete: ${JSON.stringify(chunks)}`,
    );
    const lane = c.one<{ cursor: number }>("SELECT cursor FROM lane WHERE retired = 0");
    assert.equal(lane.cursor, cut.seed_from, "coverage is the prefix below the cut chunk");
    assertBooksTrue(c, "after a chunk cut by the session's end");
    assert.match(out, /aborted \(session ended\) after \d+s — range will be re-swept/);
    assert.doesNotMatch(out, /disabled for the rest of this session/);
  });
});
