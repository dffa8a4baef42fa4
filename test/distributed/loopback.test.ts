// A coordinator and two real workers on 127.0.0.1 run a short campaign end to end.
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, coverageViolations, distributedTable, start, startCoordinator, waitFor } from "../helpers/campaign.ts";

const c = new Campaign({ extra: distributedTable(), costMs: 1, defaults: { chunk_minutes: 0.05, bootstrap_seeds: 60 } });
after(() => c.cleanup());

test("a coordinator and two workers (-j 2 and -j 1) finish a campaign with exact stop ACKs and a true-prefix cursor", async () => {
  const coord = await startCoordinator(c, ["--for", "10s"]);
  const master = `127.0.0.1:${coord.port}`;
  assert.match(coord.output(), /!! that is a LOOPBACK address/);
  assert.match(coord.output(), new RegExp(`start workers:  fuzzfleet worker --master ${master}`));
  const w1 = start(c, ["worker", "--master", master, "-j", "2"]);
  const w2 = start(c, ["worker", "--master", master, "-j", "1"]);

  // While it runs, status --master adds the live section and failures --master answers too.
  await waitFor("two workers to attach and complete a chunk", () =>
    (coord.output().match(/ joined /g) ?? []).length === 2 && /recorded|clean/.test(coord.output()) ? true : undefined,
  );
  const status = c.cli(["status", "--master", master]);
  assert.equal(status.code, 0, status.stderr);
  assert.match(status.stdout, /coordinator on 127\.0\.0\.1:\d+ — session 1/);
  assert.match(status.stdout, /#1 .*-j 2|#2 .*-j 2/);
  const statusJson = JSON.parse(c.cli(["status", "--master", master, "--json"]).stdout) as { live: { workers: unknown[] } };
  assert.equal(statusJson.live.workers.length, 2);
  const failures = c.cli(["failures", "--master", master, "--state", "all"]);
  assert.equal(failures.code, 0, failures.stderr);

  const [rc, r1, r2] = await Promise.all([coord.result, w1.result, w2.result]);
  assert.equal(rc.code, exitOwed(c, rc.stdout), `coordinator exit ${rc.code}\n${rc.stdout}\n${rc.stderr}`);
  assert.equal(r1.code, 0, r1.stdout + r1.stderr);
  assert.equal(r2.code, 0, r2.stdout + r2.stderr);
  assert.match(r1.stdout, /stop acknowledged/);
  assert.match(r2.stdout, /stop acknowledged/);
  assert.equal((rc.stdout.match(/stopped \(exact ACK\)/g) ?? []).length, 2);
  assert.match(rc.stdout, /shutdown:\s+all 2 worker\(s\) acknowledged the stop/);

  const workers = c.query<{ id: number; state: string; jobs: number }>("SELECT id, state, jobs FROM worker ORDER BY id");
  assert.deepEqual(workers.map((w) => w.state), ["gone", "gone"]);
  const complete = c.query<{ worker_id: number; seed_from: number; seed_to: number }>("SELECT * FROM chunk WHERE status = 'complete'");
  assert.ok(complete.length >= 3, `complete chunks: ${complete.length}`);
  assert.equal(new Set(complete.map((ch) => ch.worker_id)).size, 2, "chunks came from both workers");
  assert.deepEqual(coverageViolations(c), []);
  const lane = c.one<{ base_seed: number; cursor: number }>("SELECT * FROM lane");
  assert.equal(lane.cursor - lane.base_seed, complete.reduce((n, ch) => n + ch.seed_to - ch.seed_from + 1, 0));
  const rates = c.query<{ worker_id: number; seeds_per_sec: number }>("SELECT * FROM worker_rate ORDER BY worker_id");
  assert.equal(rates.length, 2, "one rate row per worker");
  assert.notEqual(rates[0]!.seeds_per_sec, rates[1]!.seeds_per_sec, "the workers did not share an estimate");
  const session = c.one<{ mode: string; status: string; port: number }>("SELECT * FROM session");
  assert.deepEqual([session.mode, session.status, session.port], ["distributed", "done", coord.port]);
  assert.deepEqual(
    readdirSync(join(c.outDir, "tmp")).filter((n) => n.startsWith("chunk-") || n.startsWith("nonce")),
    [],
    "no scratch directory, log or nonce left",
  );
  assert.ok(!existsSync(join(c.outDir, "fuzzfleet.lock")));
});

test("a restarted worker on the same host and -j starts from its earlier measured rate", async () => {
  const coord = await startCoordinator(c, ["--for", "7s"]);
  const w = start(c, ["worker", "--master", `127.0.0.1:${coord.port}`, "-j", "2"]);
  const [rc, rw] = await Promise.all([coord.result, w.result]);
  assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
  assert.equal(rw.code, 0);
  assert.match(rc.stdout, /joined \(-j 2, from 127\.0\.0\.1:\d+\)  known rates: small \d+\.\d\/s/);
});
