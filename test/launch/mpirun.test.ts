// Campaigns started by the real Open MPI mpirun (--oversubscribe, every rank on 127.0.0.1): the
// roles come from OMPI_COMM_WORLD_RANK, the ranks meet in the shared campaign directory, and the
// numbers are the ones a single host gives. Skipped where /usr/bin/mpirun is absent (CI installs
// openmpi-bin).
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { assertBooksTrue, exitOwed } from "../helpers/books.ts";
import { Campaign, CLI, distributedTable, waitFor } from "../helpers/campaign.ts";
import { ExploreDir, MAZE, MAZE_SEEDS } from "../helpers/explore.ts";

const MPIRUN = "/usr/bin/mpirun";
const skip = existsSync(MPIRUN) ? false : "no /usr/bin/mpirun (Debian openmpi-bin)";
const TEST = { timeout: 240_000, skip };
const ROOT_ENV = { OMPI_ALLOW_RUN_AS_ROOT: "1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: "1" };

const cleanups: (() => void)[] = [];
after(() => {
  for (const f of cleanups) f();
});

interface Job {
  child: ChildProcess;
  output: () => string;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** `mpirun -n N` of the compiled CLI with `args`, every rank's line tagged with its rank. */
function mpirun(n: number, args: string[], o: { cwd: string; env?: NodeJS.ProcessEnv; mpi?: string[] }): Job {
  const child = spawn(
    MPIRUN,
    ["--allow-run-as-root", "--oversubscribe", "--tag-output", ...(o.mpi ?? []), "-n", String(n), process.execPath, CLI, ...args],
    { cwd: o.cwd, env: { ...process.env, ...ROOT_ENV, ...o.env }, stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("close", (code, signal) => resolve({ code, signal })));
  cleanups.push(() => {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // Already gone.
    }
  });
  return { child, output: () => out, done };
}

/**
 * What launcher rank `rank` printed (mpirun's --tag-output prefix removed). Open MPI forwards a
 * rank's output in pieces, each tagged, and a piece may end mid-line with another rank's piece
 * after it on the same line: the rank's pieces are joined as they came, then read as lines.
 */
function rankLines(out: string, rank: number): string {
  const tag = new RegExp(`^\\[\\d+,${rank}\\]<std(?:out|err)>:`);
  return out
    .split(/(?=\[\d+,\d+\]<std(?:out|err)>:)/)
    .filter((piece) => tag.test(piece))
    .map((piece) => piece.replace(tag, ""))
    .join("")
    .split("\n")
    .map((l) => l.replace(/^\[rank \d+\] /, ""))
    .join("\n");
}

test("mpirun -n 4: rank 0 coordinates, ranks 1-3 work; every seed below the cursor swept exactly once, exit code the coordinator's", TEST, async () => {
  const c = new Campaign({ extra: distributedTable(), costMs: 1, defaults: { chunk_minutes: 0.05, bootstrap_seeds: 60 } });
  cleanups.push(() => c.cleanup());
  const job = mpirun(4, ["--config", c.configPath, "launch", "--bind", "127.0.0.1", "-j", "1", "--wait", "60", "--", "sweep", "--for", "12s"], { cwd: c.dir, env: c.env });
  const r = await job.done;
  const out = job.output();
  const coordinator = rankLines(out, 0);
  assert.match(coordinator, /Open MPI: rank 0 of 4, the coordinator/);
  for (const w of [1, 2, 3]) {
    const lines = rankLines(out, w);
    assert.match(lines, new RegExp(`Open MPI: rank ${w} of 4, a worker`));
    assert.match(lines, /stop acknowledged/, `rank ${w}:\n${lines}`);
    assert.doesNotMatch(lines, /waiting for the coordinator or explore master/, "a launched worker knows whom it waits for");
  }
  assert.equal(r.code, exitOwed(c, coordinator), `mpirun exit ${r.code}\n${out}`);
  assert.match(coordinator, /shutdown:\s+all 3 worker\(s\) acknowledged the stop/);
  const workers = c.query<{ id: number }>("SELECT DISTINCT worker_id AS id FROM chunk WHERE status = 'complete'");
  assert.equal(workers.length, 3, "chunks came from all three workers");
  const audit = assertBooksTrue(c, "launched sweep");
  const lane = c.one<{ base_seed: number; cursor: number }>("SELECT * FROM lane");
  assert.equal(lane.cursor - lane.base_seed, audit.sweptSeeds, "the cursor is exactly the seeds of the complete chunks, each counted once");
  const overlaps = c.one<{ n: number }>(
    "SELECT COUNT(*) AS n FROM chunk a JOIN chunk b ON a.lane_id = b.lane_id AND a.id < b.id AND a.status = 'complete' AND b.status = 'complete' AND a.seed_from <= b.seed_to AND b.seed_from <= a.seed_to",
  ).n;
  assert.equal(overlaps, 0, "no seed lies in two complete chunks");
  assert.ok(!existsSync(join(c.outDir, "launch")), "rank 0 removed the rendezvous");
  // Each worker says one line per chunk.
  const w1 = rankLines(out, 1);
  const chunkLines = w1.split("\n").filter((l) => /^\s+chunk \d+/.test(l));
  const ids = chunkLines.map((l) => /chunk (\d+)/.exec(l)![1]);
  assert.ok(ids.length > 0, `rank 1 reported chunks:\n${w1}`);
  assert.ok(chunkLines.every((l) => /^\s+chunk \d+: \S+ seeds [\d,]+\.\.[\d,]+ \([\d,]+\) — \w+/.test(l)), `what and how, on one line:\n${chunkLines.join("\n")}`);
  assert.equal(new Set(ids).size, ids.length, `one line per chunk:\n${w1}`);
});

test("mpirun -n 4 --masters 2: two masters and two workers explore the maze to the single-host numbers", TEST, async () => {
  const single = new ExploreDir();
  const multi = new ExploreDir();
  cleanups.push(() => single.cleanup(), () => multi.cleanup());
  for (const e of [single, multi]) cpSync(MAZE_SEEDS, e.seeds, { recursive: true });
  const maze = { MAZE_DEPTH: "6" };
  const alone = single.run(["-j", "2", "--max-idle", "1"], [process.execPath, MAZE, "@@"], maze);
  assert.equal(alone.code, 0, alone.stdout + alone.stderr);
  const want = single.stats();

  const job = mpirun(
    4,
    ["launch", "--masters", "2", "--bind", "127.0.0.1", "-j", "1", "--wait", "60", "--", ...multi.args(["-j", "0", "--max-idle", "1"], [process.execPath, MAZE, "@@"])],
    { cwd: multi.dir, env: maze },
  );
  const r = await job.done;
  const out = job.output();
  if (process.env.LAUNCH_TEST_SHOW) writeFileSync(process.env.LAUNCH_TEST_SHOW, out);
  assert.equal(r.code, 0, out);
  assert.match(rankLines(out, 1), /joining the root master at 127\.0\.0\.1:\d+ as rank 1/);
  assert.match(rankLines(out, 0), /joined as rank 1/);
  for (const w of [2, 3]) assert.match(rankLines(out, w), /stop acknowledged/, rankLines(out, w));
  assert.match(rankLines(out, 2), /a worker of master rank 0/);
  assert.match(rankLines(out, 3), /a worker of master rank 1/);
  const got = multi.stats();
  assert.ok(want.observations > 50, `a maze worth exploring: ${want.observations} observations`);
  assert.equal(got.observations, want.observations, "every unique input ran exactly once, as on one host");
  assert.equal(got.generated, want.generated);
  // The submaster's own share is beside the root's fleet view, never over it.
  const share = JSON.parse(readFileSync(join(multi.dir, "stats.r1.json"), "utf8")) as { role: string; rank: number; observations: number };
  assert.deepEqual([share.role, share.rank], ["submaster", 1]);
  assert.ok(share.observations > 0 && share.observations < got.observations, `a share: ${share.observations} of ${got.observations}`);
  assert.deepEqual(multi.corpusFiles(), single.corpusFiles(), "the same corpus");
  const hidden = (e: ExploreDir) => readdirSync(join(e.corpus, ".fuzzfleet")).sort();
  assert.deepEqual(hidden(multi), hidden(single), "what a clean end leaves (the explored ledger), and no rendezvous, work directory or token");
});

// Master rank = launcher rank, however the joins race: each submaster asks for its rank in
// peer_hello (the schema's optional `rank`, net/messages.ts).
test("mpirun -n 5 --masters 3: launcher ranks 1 and 2 are master ranks 1 and 2; the maze's numbers are one host's", TEST, async () => {
  const single = new ExploreDir();
  const multi = new ExploreDir();
  cleanups.push(() => single.cleanup(), () => multi.cleanup());
  for (const e of [single, multi]) cpSync(MAZE_SEEDS, e.seeds, { recursive: true });
  const maze = { MAZE_DEPTH: "6" };
  const alone = single.run(["-j", "2", "--max-idle", "1"], [process.execPath, MAZE, "@@"], maze);
  assert.equal(alone.code, 0, alone.stdout + alone.stderr);
  // Five ranks: three masters, each with a local slot, and two workers (of masters 0 and 1).
  const job = mpirun(5, ["launch", "--masters", "3", "--bind", "127.0.0.1", "--wait", "60", "--", ...multi.args(["-j", "1", "--max-idle", "1"], [process.execPath, MAZE, "@@"])], {
    cwd: multi.dir,
    env: maze,
  });
  const r = await job.done;
  const out = job.output();
  assert.equal(r.code, 0, out);
  for (const rank of [1, 2]) {
    assert.match(rankLines(out, rank), new RegExp(`epoch [0-9a-f]{64} \\(joined\\), rank ${rank} of 3 masters`), rankLines(out, rank));
    assert.match(rankLines(out, 0), new RegExp(`joined as rank ${rank} \\(as asked\\)`));
  }
  assert.equal(multi.stats().observations, single.stats().observations);
  assert.deepEqual(multi.corpusFiles(), single.corpusFiles());
});

// Open MPI ends the whole job when one rank dies (4.1 hangs when told not to): the other ranks
// get SIGTERM, and SIGKILL odls_base_sigkill_timeout seconds later (1 by default; docs/cluster.md
// has the job give the coordinator time to drain). What must hold is the books.
test("mpirun: a worker rank killed in the middle of a sweep ends the job with true books", TEST, async () => {
  const c = new Campaign({ extra: distributedTable({ lease: 5, stopGrace: 5 }), costMs: 2, defaults: { chunk_minutes: 0.05, bootstrap_seeds: 60 } });
  cleanups.push(() => c.cleanup());
  const job = mpirun(4, ["--config", c.configPath, "launch", "--bind", "127.0.0.1", "-j", "1", "--wait", "60", "--", "sweep", "--for", "60s"], {
    cwd: c.dir,
    env: c.env,
    mpi: ["--mca", "odls_base_sigkill_timeout", "30"],
  });
  // Once rank 3 has finished a chunk, it dies without a word.
  await waitFor("rank 3 to finish a chunk", () => (/^\[\d+,3\]<stdout>:\[rank 3\]\s+chunk \d+: /m.test(job.output()) ? true : undefined), 60_000);
  const pid = await waitFor("rank 3's pid", () => rankPid(3));
  process.kill(pid, "SIGKILL");
  const r = await job.done;
  const out = job.output();
  if (process.env.LAUNCH_TEST_SHOW) writeFileSync(process.env.LAUNCH_TEST_SHOW, out);
  assert.notEqual(r.code, 0, "a rank that died is not a clean job");
  assertBooksTrue(c, "a worker rank killed");
  const coordinator = rankLines(out, 0);
  assert.match(coordinator, /session \d+ interrupted — /, `the coordinator drained and closed its session:\n${out}`);
  assert.match(coordinator, /chunk \d+ \(small [\d,.]+\) reissued: worker \S+ left/, "the dead rank's chunk went back to the queue");
  const running = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE status = 'running'").n;
  assert.equal(running, 0, "no chunk is left marked running");
});

/** The pid of the fuzzfleet process of launcher rank `rank` (from /proc: its environment says its rank). */
function rankPid(rank: number): number | undefined {
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = readFileSyncSafe(`/proc/${name}/cmdline`);
      if (!cmd.includes(CLI) || !cmd.includes("launch")) continue;
      const env = readFileSyncSafe(`/proc/${name}/environ`).split("\0");
      if (env.includes(`OMPI_COMM_WORLD_RANK=${rank}`)) return Number(name);
    } catch {
      // Gone, or not ours.
    }
  }
  return undefined;
}

function readFileSyncSafe(path: string): string {
  return readFileSync(path, "utf8");
}
