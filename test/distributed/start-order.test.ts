// Start order does not matter: a worker started before the coordinator of a brand-new campaign
// waits (within --wait) for the token file and the coordinator, says so once, and then works;
// a wait that runs out or is cut short by Ctrl-C ends with one clear line. Real processes and
// sockets on 127.0.0.1.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, coverageViolations, distributedTable, freePort, start, startCoordinator, waitFor } from "../helpers/campaign.ts";

const occurrences = (text: string, needle: string) => text.split(needle).length - 1;

test("a worker started before the coordinator of a new campaign waits for its token, then completes chunks beside one started after", { timeout: 180_000 }, async () => {
  const c = new Campaign({ extra: distributedTable(), costMs: 1, defaults: { chunk_minutes: 0.05, bootstrap_seeds: 60 } });
  try {
    const port = await freePort();
    const master = `127.0.0.1:${port}`;
    assert.ok(!existsSync(c.outDir), "a fresh campaign: no fuzzfleet-out/, so no token yet");
    const early = start(c, ["worker", "--master", master, "-j", "1", "--wait", "2m"]);
    const waiting = `no campaign token yet: waiting up to 2m00s for ${c.outDir}/fuzzfleet.token`;
    await waitFor("the early worker to say it waits", () => (early.output().includes(waiting) ? true : undefined));

    const coord = await startCoordinator(c, ["--for", "7s", "--port", String(port)]);
    const late = start(c, ["worker", "--master", master, "-j", "1"]);
    const [rc, re, rl] = await Promise.all([coord.result, early.result, late.result]);
    assert.equal(rc.code, exitOwed(c, rc.stdout), `coordinator exit ${rc.code}\n${rc.stdout}\n${rc.stderr}`);
    assert.equal(re.code, 0, re.stdout + re.stderr);
    assert.equal(rl.code, 0, rl.stdout + rl.stderr);
    assert.equal(occurrences(re.stdout, "no campaign token yet"), 1, "the wait is announced once");
    assert.equal(re.stderr, "", "no warning (a listener leak showed as MaxListenersExceededWarning)");
    assert.match(re.stdout, /stop acknowledged/);
    assert.doesNotMatch(rl.stdout, /no campaign token yet/, "the late worker found the token at once");

    const byWorker = c.query<{ worker_id: number; n: number }>(
      "SELECT worker_id, COUNT(*) AS n FROM chunk WHERE status = 'complete' GROUP BY worker_id ORDER BY worker_id",
    );
    assert.equal(byWorker.length, 2, `both workers completed chunks: ${JSON.stringify(byWorker)}`);
    assert.ok(byWorker.every((w) => w.n >= 1));
    assert.deepEqual(coverageViolations(c), []);
  } finally {
    c.cleanup();
  }
});

test("a worker whose --wait runs out with no token file exits 3 with one line naming the file and the fix", { timeout: 60_000 }, async () => {
  const c = new Campaign({ extra: distributedTable() });
  try {
    const r = await start(c, ["worker", "--master", `127.0.0.1:${await freePort()}`, "--wait", "2s"]).result;
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.equal(
      r.stderr,
      `fuzzfleet: no campaign token: ${c.outDir}/fuzzfleet.token did not appear within 2s (--wait); start the coordinator, and run this worker in its ` +
        "campaign directory or pass --out (sweep); for an explore master pass --token-file CORPUS_DIR/.fuzzfleet/fuzzfleet.token; or set FUZZFLEET_TOKEN\n",
    );
    assert.equal(r.stdout, `no campaign token yet: waiting up to 2s for ${c.outDir}/fuzzfleet.token (the coordinator or explore master writes it when it starts) …\n`);
    assert.ok(!existsSync(c.outDir), "the worker created nothing");
  } finally {
    c.cleanup();
  }
});

test("Ctrl-C while a worker waits for its token ends it at once, having started nothing", { timeout: 60_000 }, async () => {
  const c = new Campaign({ extra: distributedTable() });
  try {
    const w = start(c, ["worker", "--master", `127.0.0.1:${await freePort()}`, "--wait", "10m"]);
    await waitFor("the worker to wait", () => (w.output().includes("no campaign token yet: waiting up to 10m00s") ? true : undefined));
    w.child.kill("SIGINT");
    const r = await w.result;
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /interrupted while waiting for the campaign token; nothing was started\n$/);
    assert.equal(r.stderr, "");
  } finally {
    c.cleanup();
  }
});

test("--wait takes plain seconds or a duration; anything else is refused naming the flag", () => {
  const c = new Campaign({ extra: distributedTable() });
  try {
    const r = c.cli(["worker", "--master", "127.0.0.1:1", "--wait", "soon"]);
    assert.equal(r.code, 2);
    assert.equal(r.stderr, "fuzzfleet: --wait wants seconds or a duration such as 15s, 2m or 1h (got 'soon')\n");
    for (const [flag, shown] of [["0", "0s"], ["1.5", "1s"], ["1s", "1s"]] as const) {
      const ok = c.cli(["worker", "--master", "127.0.0.1:1", "--wait", flag, "--token-file", "no-such.token"]);
      assert.equal(ok.code, 3, `--wait ${flag}: ${ok.stderr}`);
      assert.match(ok.stderr, new RegExp(`no-such\\.token did not appear within ${shown} \\(--wait\\); check --token-file`));
    }
  } finally {
    c.cleanup();
  }
});

test("an empty or short token is refused by the worker and the coordinator alike", () => {
  const c = new Campaign({ extra: distributedTable() });
  try {
    const worker = c.cli(["worker", "--master", "127.0.0.1:1"], { env: { FUZZFLEET_TOKEN: "" } });
    assert.equal(worker.code, 2, worker.stderr);
    assert.match(worker.stderr, /^fuzzfleet: FUZZFLEET_TOKEN is empty; a token is 8 to 256 visible ASCII characters/);
    const short = c.cli(["worker", "--master", "127.0.0.1:1", "--token", "abc"]);
    assert.equal(short.code, 2, short.stderr);
    assert.match(short.stderr, /^fuzzfleet: the token given with --token has 3 characters;/);
    const coord = c.cli(["coordinate", "--for", "30s"], { env: { FUZZFLEET_TOKEN: "   " } });
    assert.equal(coord.code, 2, coord.stdout + coord.stderr);
    assert.match(coord.stderr, /fuzzfleet: FUZZFLEET_TOKEN is empty;/);
    assert.doesNotMatch(coord.stdout, /listening on/);
    assert.ok(!existsSync(`${c.outDir}/fuzzfleet.token`), "no token file was made instead");
  } finally {
    c.cleanup();
  }
});
