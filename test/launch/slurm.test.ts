// A sweep started by a real one-node Slurm: sbatch runs the script docs/cluster.md shows, whose
// `srun` starts four tasks of `fuzzfleet launch`; the roles come from SLURM_PROCID. The Slurm
// daemons (munged, slurmctld, slurmd) are brought up for this file by slurm-single-node.sh, as
// root, in a temporary directory. Skipped where Debian's slurm-wlm is not installed or not root.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { assertBooksTrue, exitOwed } from "../helpers/books.ts";
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { Campaign, CLI, distributedTable, waitFor } from "../helpers/campaign.ts";

const SCRIPT = fileURLToPath(new URL("./slurm-single-node.sh", import.meta.url));
const skip = !existsSync("/usr/sbin/slurmctld") || !existsSync("/usr/bin/sbatch") ? "Debian slurm-wlm is not installed" : process.geteuid?.() !== 0 ? "bringing up Slurm needs root" : false;
const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-slurm-"));
let env: NodeJS.ProcessEnv = {};

before(() => {
  if (skip) return;
  const out = execFileSync("sh", [SCRIPT, "up", dir], { encoding: "utf8", timeout: 60_000 });
  env = { SLURM_CONF: /SLURM_CONF=(\S+)/.exec(out)![1]! };
});
after(() => {
  if (!skip) spawnSync("sh", [SCRIPT, "down", dir]);
  rmSync(dir, { recursive: true, force: true });
});

test("sbatch + srun -n 4: rank 0 coordinates, three tasks work, every seed swept once; the job's exit code is the coordinator's", { timeout: 180_000, skip }, () => {
  const c = new Campaign({ extra: distributedTable(), costMs: 1, defaults: { chunk_minutes: 0.05, bootstrap_seeds: 60 } });
  try {
    const batch = join(c.dir, "sweep.sbatch");
    // The script of docs/cluster.md, with this checkout's CLI and loopback for the one node.
    writeFileSync(
      batch,
      `#!/bin/sh
#SBATCH --ntasks=4
#SBATCH --overcommit
#SBATCH --output=${c.dir}/slurm-%j.out
cd ${c.dir}
srun ${process.execPath} ${CLI} --config ${c.configPath} launch --bind 127.0.0.1 -j 1 --wait 60 -- sweep --for 10s
`,
    );
    chmodSync(batch, 0o755);
    const r = spawnSync("sbatch", ["--wait", "--parsable", batch], { cwd: c.dir, env: { ...process.env, ...c.env, ...env }, encoding: "utf8", timeout: 150_000 });
    const jobId = r.stdout.trim().split(";")[0]!;
    const out = readFileSync(join(c.dir, `slurm-${jobId}.out`), "utf8");
    assert.match(out, /\[rank 0\] Slurm: rank 0 of 4, the coordinator \(job \d+\.0\)/, out);
    for (const w of [1, 2, 3]) assert.match(out, new RegExp(`\\[rank ${w}\\] Slurm: rank ${w} of 4, a worker`));
    assert.equal((out.match(/stop acknowledged/g) ?? []).length, 3, out);
    assert.equal(r.status, exitOwed(c, out), `sbatch --wait exit ${r.status}\n${r.stderr}\n${out}`);
    const audit = assertBooksTrue(c, "a sweep under srun");
    const lane = c.one<{ base_seed: number; cursor: number }>("SELECT * FROM lane");
    assert.equal(lane.cursor - lane.base_seed, audit.sweptSeeds);
    assert.equal(c.query("SELECT DISTINCT worker_id FROM chunk WHERE status = 'complete'").length, 3, "chunks came from all three tasks");
  } finally {
    c.cleanup();
  }
});

// Unlike mpirun, srun lets the other tasks run on when one dies: the coordinator reissues the dead
// worker's chunk and finishes its session as it would with any lost worker.
test("srun -n 4 with a worker task killed mid-sweep: the step runs on, the chunk is reissued, the books stay true", { timeout: 180_000, skip }, async () => {
  const c = new Campaign({ extra: distributedTable({ lease: 5, stopGrace: 5 }), costMs: 2, defaults: { chunk_minutes: 0.05, bootstrap_seeds: 60 } });
  try {
    const child = spawn("srun", ["--overcommit", "-n", "4", process.execPath, CLI, "--config", c.configPath, "launch", "--bind", "127.0.0.1", "-j", "1", "--wait", "60", "--", "sweep", "--for", "15s"], {
      cwd: c.dir,
      env: { ...process.env, ...c.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
    const done = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    await waitFor("task 3 to finish a chunk", () => (/^\[rank 3\]\s+chunk \d+: /m.test(out) ? true : undefined), 60_000);
    process.kill(await waitFor("task 3's pid", () => taskPid(3)), "SIGKILL");
    const code = await done;
    assert.match(out, /chunk \d+ \(small [\d,.]+\) reissued: worker \S+ left/, out);
    assert.match(out, /^session 1 done — /m, "the coordinator finished its session");
    assert.equal((out.match(/stop acknowledged/g) ?? []).length, 2, "the two live workers were stopped");
    assert.equal(code, 137, "srun reports the highest exit status of its tasks: the killed one's");
    assertBooksTrue(c, "a worker task killed under srun");
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE status = 'running'").n, 0);
  } finally {
    c.cleanup();
  }
});

/** The pid of the fuzzfleet process of Slurm task `rank`, read from /proc. */
function taskPid(rank: number): number | undefined {
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (!readFileSync(`/proc/${name}/cmdline`, "utf8").includes(CLI)) continue;
      if (readFileSync(`/proc/${name}/environ`, "utf8").split("\0").includes(`SLURM_PROCID=${rank}`)) return Number(name);
    } catch {
      // Gone.
    }
  }
  return undefined;
}
