// SIGKILL at random moments — of `run`, of workers and of the coordinator — followed by restarts:
// the books stay true (no hole, no lost failure, no double count, an intact file), no child of a
// killed process outlives it, and the scratch a dead session left is removed at the next start.
// And a writer killed in the middle of a commit leaves a store the read commands still read.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { test } from "node:test";
import { assertBooksTrue, completeChunks, exitForSummary } from "../helpers/books.ts";
import { Campaign, distributedTable, finished, freePort, start, waitFor, type Running } from "../helpers/campaign.ts";

const require = createRequire(import.meta.url);
const SEED = Number(process.env.FUZZFLEET_KILL_SEED ?? 1201);

/** A small seeded generator of moments, so a failing order of kills can be run again. */
function moments(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (x + 0x6d2b79f5) >>> 0;
    let t = Math.imul(x ^ (x >>> 15), 1 | x);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** Every live descendant of `pid` (children, their children, …), read from /proc. */
function descendants(pid: number): number[] {
  const found: number[] = [];
  const visit = (p: number) => {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      return;
    }
    for (const t of tasks) {
      let children = "";
      try {
        children = readFileSync(`/proc/${p}/task/${t}/children`, "utf8");
      } catch {
        continue;
      }
      for (const c of children.split(" ").filter(Boolean).map(Number)) {
        found.push(c);
        visit(c);
      }
    }
  };
  visit(pid);
  return found;
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/**
 * SIGKILLs `r` and asserts that every process it had started is gone within a few seconds —
 * well before the chunk it was running could have ended on its own (the chunks here last 10 s
 * or more: over 600 seeds at about 50 seeds/s).
 */
async function killAndCheckOrphans(r: Running, what: string): Promise<void> {
  if (r.child.exitCode !== null || r.child.signalCode !== null) return;
  const pid = r.child.pid!;
  const family = descendants(pid);
  process.kill(pid, "SIGKILL");
  await r.result;
  await waitFor(
    `the children of the killed ${what} (${family.join(", ") || "none"}) to die`,
    () => (family.every((p) => !alive(p)) ? true : undefined),
    8_000,
  );
}

/** Waits until `r` runs a chunk sized from a measured rate (not the short bootstrap chunk). */
async function inLongChunk(r: Running): Promise<void> {
  await waitFor("a chunk sized from a measured rate", () => {
    const sizes = [...r.output().matchAll(/\(n=([\d,]+)\)/g)].map((m) => Number(m[1]!.replace(/,/g, "")));
    return sizes.some((n) => n > 600) ? true : undefined;
  }, 90_000);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("run, SIGKILLed at random moments and restarted: true books, no orphaned generator, leftovers removed", { timeout: 300_000 }, async () => {
  const random = moments(SEED);
  const c = new Campaign({ defaults: { jobs: 2, chunk_minutes: 0.25, bootstrap_seeds: 40 }, costMs: 20 });
  try {
    let removedLines = 0;
    for (let kill = 0; kill < 5; kill++) {
      const run = start(c, ["run", "--for", "60s", "--yes"]);
      await inLongChunk(run);
      await sleep(300 + random() * 3_000);
      await killAndCheckOrphans(run, `run #${kill + 1} (seed ${SEED})`);
      if (/removed 1 scratch entry an earlier session left/.test(run.output())) removedLines++;
      // What a generator had written of the chunk it was killed in (the planted one writes only at the end).
      const inFlight = c.one<{ id: number }>("SELECT id FROM chunk WHERE status = 'running'").id;
      mkdirSync(join(c.outDir, "tmp", `chunk-${inFlight}`, "failures", "1"), { recursive: true });
    }
    // A short budget that still starts a chunk (the deadline floor is 5 s): the restart is what is checked.
    const last = c.cli(["run", "--for", "6s", "--yes"]);
    assert.equal(last.code, exitForSummary(last.stdout), last.stdout + last.stderr);
    if (/removed 1 scratch entry an earlier session left/.test(last.stderr)) removedLines++;
    assert.equal(removedLines, 5, "every restart removed what the killed session left");
    const tmp = readdirSync(join(c.outDir, "tmp")).filter((n) => /^chunk-\d+$/.test(n));
    assert.deepEqual(tmp, [], "no scratch directory is left");
    const crashed = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM session WHERE status = 'crashed'").n;
    assert.equal(crashed, 5, "every killed session is recorded as crashed");
    assert.ok(completeChunks(c) > 0);
    assertBooksTrue(c, `kill seed ${SEED}`);
  } finally {
    c.cleanup();
  }
});

test("coordinate and workers, SIGKILLed at random moments and restarted: true books and no orphaned generator", { timeout: 300_000 }, async () => {
  const random = moments(SEED + 1);
  // 6 s chunks: a kill still lands mid-chunk most of the time, and the last session books one soon.
  const c = new Campaign({ defaults: { chunk_minutes: 0.1, bootstrap_seeds: 40 }, extra: distributedTable({ lease: 6, drainGraceMinutes: 0.05 }), costMs: 20 });
  const port = await freePort();
  // A coordinator that is killed lives until then; the last one is stopped with Ctrl-C once a chunk landed in its session
  // (a chunk still running 3 s later, the drain grace, is not counted and left for the next session).
  const coordinate = () => start(c, ["coordinate", "--for", "45s", "--port", String(port)]);
  const worker = (i: number) => start(c, ["worker", "--master", `127.0.0.1:${port}`, "-j", "1", "--wait", "30"], { FUZZFLEET_TEST_NAME: `w${i}` });
  try {
    let coord = coordinate();
    const workers = [worker(0), worker(1)];
    await waitFor("a complete chunk", () => (completeChunks(c) > 0 ? true : undefined), 60_000);
    const plan = ["worker", "worker", "coordinator", "worker", "coordinator", "worker"];
    for (const [step, target] of plan.entries()) {
      await sleep(500 + random() * 2_500);
      if (target === "worker") {
        const i = random() < 0.5 ? 0 : 1;
        await killAndCheckOrphans(workers[i]!, `worker ${i} (step ${step}, seed ${SEED + 1})`);
        workers[i] = worker(i);
      } else {
        // Killed after it opened its session (a slow start could otherwise die before the banner), so the session is there to be marked crashed.
        const opening = coord;
        await waitFor("the coordinator's session banner", () => (/fuzzfleet coordinate: session \d+/.test(opening.output()) ? true : undefined), 60_000);
        await killAndCheckOrphans(coord, `coordinator (step ${step}, seed ${SEED + 1})`);
        coord = coordinate();
        // Workers that lost the coordinator exit; start them again (they wait for it).
        for (const [i, w] of workers.entries()) if (w.child.exitCode !== null) workers[i] = worker(i);
      }
      for (const [i, w] of workers.entries()) if (w.child.exitCode !== null) workers[i] = worker(i);
    }
    // The last session reclaimed what the killed ones held; one chunk booked in it shows it sweeps on.
    const landed = completeChunks(c);
    await waitFor("a chunk booked by the last coordinator", () => (completeChunks(c) > landed ? true : undefined), 90_000);
    coord.child.kill("SIGINT");
    const rc = await finished(coord, 150_000, "the last coordinator");
    assert.equal(rc.code, exitForSummary(rc.stdout), rc.stdout + rc.stderr);
    for (const w of workers) await finished(w, 60_000, "a worker");
    assertBooksTrue(c, `kill seed ${SEED + 1}`);
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM session WHERE status = 'crashed'").n, 2);
  } finally {
    c.cleanup();
  }
});

test("a writer killed mid-commit leaves a hot journal: status and failures still read the last committed state; the next run goes on", async () => {
  const c = new Campaign({ extra: '[store]\njournal = "truncate"\n' });
  try {
    const first = c.cli(["run", "--for", "4s", "--yes"]);
    assert.equal(first.code, exitForSummary(first.stdout), first.stdout + first.stderr);
    const before = c.one<{ n: number; s: number }>("SELECT COUNT(*) AS n, SUM(seconds) AS s FROM chunk");
    const script = `
      const Database = require(${JSON.stringify(require.resolve("better-sqlite3"))});
      const db = new Database(${JSON.stringify(c.dbPath)});
      db.pragma("cache_size = 1");
      db.exec("BEGIN IMMEDIATE");
      db.exec("CREATE TABLE ballast (x TEXT)");
      const put = db.prepare("INSERT INTO ballast VALUES (?)");
      for (let i = 0; i < 3000; i++) put.run("x".repeat(400));
      db.exec("UPDATE chunk SET seconds = coalesce(seconds, 0) + 1000");
      process.kill(process.pid, "SIGKILL");`;
    assert.equal(spawnSync(process.execPath, ["-e", script]).signal, "SIGKILL");
    for (const command of [["status"], ["failures"], ["status", "--json"]]) {
      const r = c.cli(command);
      assert.equal(r.code, 0, `${command.join(" ")}: ${r.stdout}${r.stderr}`);
      assert.doesNotMatch(r.stderr, /SqliteError|readonly database|\n\s+at /);
    }
    assert.deepEqual(c.one("SELECT COUNT(*) AS n, SUM(seconds) AS s FROM chunk"), before, "the interrupted transaction left nothing behind");
    assert.equal(c.query("SELECT name FROM sqlite_master WHERE name = 'ballast'").length, 0);
    const next = c.cli(["run", "--for", "4s", "--yes"]);
    assert.equal(next.code, exitForSummary(next.stdout), next.stdout + next.stderr);
    assertBooksTrue(c);
  } finally {
    c.cleanup();
  }
});
