// A second rank 0 with a running job's id (a launch started twice, a Kubernetes workers Job
// without FUZZFLEET_RANK_OFFSET) is refused before it touches the job's rendezvous: the token
// file and r0.json stay as they were, a worker that starts later still finds the coordinator and
// works, and the first campaign ends as it would have. The compiled CLI, each rank a process with
// the variables its launcher would give it.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { assertBooksTrue, exitOwed } from "../helpers/books.ts";
import { Campaign, CLI, distributedTable, waitFor } from "../helpers/campaign.ts";
import { jobDir, recordPath } from "../../src/launch/rendezvous.ts";
import { tokenPath } from "../../src/net/token.ts";

const TEST = { timeout: 180_000 };
const CLEAN: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(OMPI_|PMI|PMIX_|SLURM_|FUZZFLEET_|JOB_COMPLETION_INDEX|KUBERNETES_)/.test(k)));

const cleanups: (() => void)[] = [];
after(() => {
  for (const f of cleanups) f();
});

interface Rank {
  child: ChildProcess;
  output: () => string;
  done: Promise<number | null>;
}

/** One rank: `fuzzfleet launch …` with exactly the launcher variables in `env`. */
function rank(c: Campaign, launchArgs: string[], env: NodeJS.ProcessEnv): Rank {
  const child = spawn(process.execPath, [CLI, "--config", c.configPath, "launch", ...launchArgs], {
    cwd: c.dir,
    env: { ...CLEAN, ...c.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  const done = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  return { child, output: () => out, done };
}

/** The bytes and the inode of a file (a rewrite with equal bytes still shows); null when it is gone. */
function snapshot(path: string): { text: string; ino: number; mtimeMs: number } | null {
  if (!existsSync(path)) return null;
  const st = statSync(path);
  return { text: readFileSync(path, "utf8"), ino: st.ino, mtimeMs: st.mtimeMs };
}

async function chunkBy(r: Rank, n: number): Promise<void> {
  await waitFor(`rank ${n} to finish a chunk`, () => (new RegExp(`^\\[rank ${n}\\]\\s+chunk \\d+: `, "m").test(r.output()) ? true : undefined), 90_000);
}

/**
 * Runs the scenario: rank 0 and rank 1 of a job, then the stray rank 0, then a late worker (rank
 * 2), then Ctrl-C to the coordinator. Returns the stray's exit code and output.
 */
async function strayLeader(o: { jobId: string; launcher: string[]; env: (rank: number) => NodeJS.ProcessEnv; strayEnv: NodeJS.ProcessEnv; tokenFile: boolean }) {
  const c = new Campaign({ extra: distributedTable(), costMs: 2, defaults: { chunk_minutes: 0.05, bootstrap_seeds: 60 } });
  cleanups.push(() => c.cleanup());
  const args = [...o.launcher, "--bind", "127.0.0.1", "-j", "1", "--wait", "60", "--", "sweep", "--for", "10m"];
  const leader = rank(c, args, o.env(0));
  cleanups.push(() => leader.child.kill("SIGKILL"));
  const dir = jobDir(c.outDir, o.jobId);
  await waitFor("rank 0 to publish its address", () => (existsSync(recordPath(dir, 0)) ? true : undefined), 60_000);
  const record = snapshot(recordPath(dir, 0));
  const token = o.tokenFile ? snapshot(tokenPath(dir)) : null;
  const worker1 = rank(c, args, o.env(1));
  cleanups.push(() => worker1.child.kill("SIGKILL"));
  await chunkBy(worker1, 1);

  const stray = rank(c, args, o.strayEnv);
  const strayCode = await stray.done;

  assert.deepEqual(snapshot(recordPath(dir, 0)), record, "r0.json is the first rank 0's, untouched");
  if (token !== null) assert.deepEqual(snapshot(tokenPath(dir)), token, "the token file is the first rank 0's, untouched");
  else assert.ok(!existsSync(tokenPath(dir)), "the token comes from the environment: no file was written");

  // A worker that starts after the stray still finds the coordinator and works.
  const worker2 = rank(c, args, o.env(2));
  cleanups.push(() => worker2.child.kill("SIGKILL"));
  await chunkBy(worker2, 2);
  leader.child.kill("SIGINT");
  const [leaderCode, code1, code2] = await Promise.all([leader.done, worker1.done, worker2.done]);
  const out = leader.output();
  assert.match(out, /shutdown:\s+all 2 worker\(s\) acknowledged the stop/, out);
  assert.equal(leaderCode, exitOwed(c, out), out);
  for (const [w, code] of [[worker1, code1], [worker2, code2]] as const) {
    assert.equal(code, 0, w.output());
    assert.match(w.output(), /stop acknowledged/);
  }
  assertBooksTrue(c, "a sweep a second rank 0 tried to lead");
  assert.ok(!existsSync(join(c.outDir, "launch")), "the first rank 0 removed the rendezvous at its end");
  return { code: strayCode, out: stray.output(), leaderPid: leader.child.pid! };
}

test("Open MPI: a second rank 0 with the job's id is refused, naming the running rank 0, and the job's rendezvous, its late worker and its campaign are untouched", TEST, async () => {
  const mpi = (r: number): NodeJS.ProcessEnv => ({ OMPI_COMM_WORLD_RANK: String(r), OMPI_COMM_WORLD_SIZE: "3", OMPI_MCA_ess_base_jobid: "4242" });
  const r = await strayLeader({ jobId: "4242", launcher: [], env: mpi, strayEnv: mpi(0), tokenFile: true });
  assert.equal(r.code, 3, r.out);
  assert.match(r.out, /^\[rank 0\] Open MPI: rank 0 of 3, the coordinator \(job 4242\)$/m);
  assert.match(r.out, new RegExp(`^fuzzfleet: job '4242' already has a rank 0: a coordinate campaign is running on this host \\(pid ${r.leaderPid}, started \\d{4}-\\d\\d-\\d\\dT[\\d:]+Z, coordinating on port \\d+; `, "m"));
  assert.match(r.out, /each job needs an id of its own \(--job-id, FUZZFLEET_JOB_ID\)/);
  assert.doesNotMatch(r.out, /unexpected error|\n\s+at /, "no stack trace");
});

test("Kubernetes: a workers Job without FUZZFLEET_RANK_OFFSET gives a second rank 0, which is refused saying to set it; the root's rendezvous and campaign are untouched", TEST, async () => {
  const base = { KUBERNETES_SERVICE_HOST: "10.96.0.1", FUZZFLEET_JOB_ID: "campaign-1", FUZZFLEET_TOKEN: "0123456789abcdef0123456789abcdef", FUZZFLEET_RANKS: "3" };
  // The root is index 0 of its own set; the workers' Job adds FUZZFLEET_RANK_OFFSET=1 to its indexes 0, 1.
  const k8s = (r: number): NodeJS.ProcessEnv => (r === 0 ? { ...base, JOB_COMPLETION_INDEX: "0" } : { ...base, JOB_COMPLETION_INDEX: String(r - 1), FUZZFLEET_RANK_OFFSET: "1" });
  const r = await strayLeader({ jobId: "campaign-1", launcher: ["--launcher", "kubernetes"], env: k8s, strayEnv: { ...base, JOB_COMPLETION_INDEX: "0" }, tokenFile: false });
  assert.equal(r.code, 3, r.out);
  assert.match(r.out, new RegExp(`^fuzzfleet: job 'campaign-1' already has a rank 0: a coordinate campaign is running on this host \\(pid ${r.leaderPid}, `, "m"));
  assert.match(r.out, /this pod is rank 0 because its index is 0 and FUZZFLEET_RANK_OFFSET is unset: set FUZZFLEET_RANK_OFFSET in the workers' Job to the rank of its first pod \(1 when the root is rank 0\)/);
  assert.doesNotMatch(r.out, /unexpected error|\n\s+at /, "no stack trace");
});
