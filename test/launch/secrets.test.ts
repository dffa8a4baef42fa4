// Under `launch` the job's token lives in the launcher process's environment (rank 0 makes it,
// the other ranks read it from the rendezvous): the generators a worker rank runs never see it.
// Two ranks of a fake Open MPI job (the variables mpirun sets), each a real CLI process.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Campaign, distributedTable, finished, start, waitFor } from "../helpers/campaign.ts";
import { envDumpingGenerator, seenEnvironments } from "../helpers/env-dump.ts";

// What the test runner's own environment must not lend the ranks (a launcher, a token).
const FOREIGN = /^(OMPI_|PMI|PMIX_|SLURM_|FUZZFLEET_|JOB_COMPLETION_INDEX|KUBERNETES_)/;
const MPI = (rank: number) => ({ OMPI_COMM_WORLD_RANK: String(rank), OMPI_COMM_WORLD_SIZE: "2", OMPI_MCA_ess_base_jobid: "4242" });

test("a worker rank's generator does not see the job's token", { timeout: 120_000 }, async () => {
  const c = new Campaign({ extra: distributedTable() });
  try {
    c.writeConfig({ generator: envDumpingGenerator(c), extra: distributedTable() });
    const env = (rank: number) => ({ ...Object.fromEntries(Object.keys(process.env).filter((k) => FOREIGN.test(k)).map((k) => [k, undefined])), ...MPI(rank) });
    // The worker rank starts first and waits for the rendezvous, as under a real mpirun, so it is
    // there when rank 0 starts its budget however slowly this machine starts processes.
    const args = ["launch", "--bind", "127.0.0.1", "-j", "1", "--wait", "60", "--", "sweep", "--for", "15s"];
    const rank1 = start(c, args, env(1));
    const rank0 = start(c, args, env(0));
    const jobs = join(c.outDir, "launch");
    // Read while the job runs: rank 0 removes its rendezvous at the end.
    const tokenFile = await waitFor("rank 0 to write the job's token", () => {
      const dir = existsSync(jobs) ? readdirSync(jobs).find((n) => n.startsWith("job-")) : undefined;
      return dir !== undefined && existsSync(join(jobs, dir, "fuzzfleet.token")) ? join(jobs, dir, "fuzzfleet.token") : undefined;
    });
    const token = readFileSync(tokenFile, "utf8").trim();
    const [r0, r1] = await Promise.all([finished(rank0, 90_000, "rank 0"), finished(rank1, 90_000, "rank 1")]);
    assert.equal(r0.code, 0, r0.stdout + r0.stderr);
    assert.equal(r1.code, 0, r1.stdout + r1.stderr);
    assert.match(r1.stdout, /stop acknowledged/);
    const envs = seenEnvironments(c);
    assert.ok(envs.length >= 1, "the worker rank ran the generator");
    for (const seen of envs) {
      assert.match(seen, /^OMPI_COMM_WORLD_RANK=1$/m, "the generator ran on rank 1, with the launcher's own variables");
      assert.doesNotMatch(seen, /FUZZFLEET_TOKEN/);
      assert.ok(!seen.includes(token));
    }
  } finally {
    c.cleanup();
  }
});
