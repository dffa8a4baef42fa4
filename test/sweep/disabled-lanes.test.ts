// One rule for a sweep that stopped sweeping because every lane broke, whatever runs its chunks:
// the session ends early, is recorded 'disabled', says so in its summary and on stderr, and exits
// 4 (unless it found something new). `run`'s case is in failing-generators.test.ts; this is
// `coordinate`'s, with a real worker on 127.0.0.1 whose every chunk exits 3.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Campaign, distributedTable, finished, PLANTED, start, startCoordinator } from "../helpers/campaign.ts";

const EXITS_3 = `[generator]
command = ["sh", "-c", "echo \\"internal error at seed $1\\" >&2; exit 3", "generator", "{seed_from}", "{count}", "{out}"]
identity = [${JSON.stringify(PLANTED)}]
`;

test("coordinate: every lane disabled on every worker attached ends the session early as 'disabled', exit 4; the worker is stopped exactly", async () => {
  const c = new Campaign({ generator: EXITS_3, extra: distributedTable() });
  try {
    // A five-minute budget: a session that served on until its deadline would be killed below.
    const coord = await startCoordinator(c, ["--for", "5m"]);
    const worker = start(c, ["worker", "--master", `127.0.0.1:${coord.port}`, "-j", "1"]);
    const [rc, rw] = await Promise.all([finished(coord, 60_000, "the coordinator"), finished(worker, 60_000, "the worker")]);
    assert.equal(rc.code, 4, `every lane disabled and nothing found: exit 4\n${rc.stdout}\n${rc.stderr}`);
    assert.equal(rw.code, 0, rw.stdout + rw.stderr);
    assert.match(rc.stdout, /worker \S+#1 stops taking lane 'small' for the rest of this session: the generator exited with 3; see /);
    assert.match(rc.stdout, /every lane is disabled on every worker attached: draining — the sweep stopped sweeping/);
    assert.match(rc.stdout, /all lanes disabled — stopping early/);
    assert.match(rc.stdout, /LANES DISABLED: every lane was disabled for this session; see the lines above/);
    assert.match(rc.stdout, /^ {2}budget: +\d+s of 5m00s — ended early: every lane was disabled$/m);
    assert.match(rc.stdout, /shutdown:\s+all 1 worker\(s\) acknowledged the stop/);
    assert.match(rc.stderr, /^fuzzfleet: every lane was disabled \(timeouts or unexpected generator exits, see above\), so the session stopped early; exiting 4$/m);
    assert.deepEqual(
      c.query<{ status: string }>("SELECT status FROM chunk ORDER BY id").map((ch) => ch.status),
      ["aborted:exit 3"],
      "one chunk, then the lane is disabled on the only worker",
    );
    const session = c.one<{ mode: string; status: string }>("SELECT mode, status FROM session");
    assert.deepEqual([session.mode, session.status], ["distributed", "disabled"]);
    assert.equal(c.one<{ cursor: number }>("SELECT cursor FROM lane").cursor, 1, "nothing was covered");
  } finally {
    c.cleanup();
  }
});
