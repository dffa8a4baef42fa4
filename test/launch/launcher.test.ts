// Where a launched process stands (launch/launcher.ts), from environments as the launchers set
// them: Open MPI's (the variables mpirun 4.1 gave a rank here), MPICH's PMI, srun's (the very
// variables a one-node Slurm 22.05 gave a task here), and a Kubernetes pod's; and the role each
// rank takes.
import assert from "node:assert/strict";
import { test } from "node:test";
import { launchPlace, roleOf } from "../../src/launch/launcher.ts";

/** What `srun -n 4` gave task 2 of job 3 on a one-node Slurm 22.05 (the SLURM_ variables that matter). */
const SRUN = {
  SLURM_CLUSTER_NAME: "fuzzfleet-test",
  SLURM_CPUS_ON_NODE: "2",
  SLURM_JOB_ID: "3",
  SLURM_JOBID: "3",
  SLURM_JOB_NODELIST: "vm",
  SLURM_JOB_NUM_NODES: "1",
  SLURM_LOCALID: "2",
  SLURM_NNODES: "1",
  SLURM_NODEID: "0",
  SLURM_NODELIST: "vm",
  SLURM_NPROCS: "4",
  SLURM_NTASKS: "4",
  SLURM_PROCID: "2",
  SLURM_STEP_ID: "0",
  SLURM_STEPID: "0",
  SLURM_STEP_NUM_TASKS: "4",
  SLURM_TASK_PID: "4242",
};
const OMPI = { OMPI_COMM_WORLD_RANK: "1", OMPI_COMM_WORLD_SIZE: "4", OMPI_COMM_WORLD_LOCAL_RANK: "1", OMPI_MCA_ess_base_jobid: "1166016513", PMIX_NAMESPACE: "1166016513", PMIX_RANK: "1" };

test("each launcher's variables give the rank, the size and the job", () => {
  assert.deepEqual(launchPlace("auto", SRUN, "vm"), { launcher: "Slurm", rank: 2, size: 4, jobId: "3.0" });
  assert.deepEqual(launchPlace("slurm", SRUN, "vm"), { launcher: "Slurm", rank: 2, size: 4, jobId: "3.0" });
  assert.deepEqual(launchPlace("auto", OMPI, "vm"), { launcher: "Open MPI", rank: 1, size: 4, jobId: "1166016513" });
  assert.deepEqual(launchPlace("mpi", { PMI_RANK: "3", PMI_SIZE: "5", PMI_KVSNAME: "kvs_77_0" }, "h"), { launcher: "MPI (PMI)", rank: 3, size: 5, jobId: "kvs_77_0" });
  assert.deepEqual(launchPlace("auto", { KUBERNETES_SERVICE_HOST: "10.0.0.1" }, "fuzzfleet-root-0"), { launcher: "Kubernetes", rank: 0, size: null, jobId: null });
  assert.deepEqual(
    launchPlace("kubernetes", { JOB_COMPLETION_INDEX: "4", FUZZFLEET_RANK_OFFSET: "1", FUZZFLEET_RANKS: "9", FUZZFLEET_JOB_ID: "c1" }, "workers-4-x7k2p"),
    { launcher: "Kubernetes", rank: 5, size: 9, jobId: "c1" },
  );
  assert.deepEqual(launchPlace("auto", {}, "laptop"), { launcher: "no launcher", rank: 0, size: 1, jobId: null });
  assert.equal(launchPlace("auto", { ...SRUN, FUZZFLEET_JOB_ID: " run-7 " }, "vm").jobId, "run-7", "FUZZFLEET_JOB_ID names the job for every launcher");
});

test("mpirun inside an sbatch allocation: the MPI rank wins over the batch step's SLURM_PROCID", () => {
  const inBatch = { ...SRUN, SLURM_PROCID: "0", ...OMPI };
  assert.equal(launchPlace("auto", inBatch, "vm").rank, 1);
  assert.equal(launchPlace("auto", inBatch, "vm").launcher, "Open MPI");
});

test("bad or missing variables are refused by name, with the value and the fix", () => {
  assert.throws(() => launchPlace("slurm", {}, "h"), /--launcher slurm: none of SLURM_PROCID is set.*start it with srun/);
  assert.throws(() => launchPlace("mpi", SRUN, "h"), /--launcher mpi: none of OMPI_COMM_WORLD_RANK \(Open MPI\) or PMI_RANK/);
  assert.throws(() => launchPlace("auto", { ...SRUN, SLURM_PROCID: "x2" }, "h"), /SLURM_PROCID is 'x2', not a rank/);
  assert.throws(() => launchPlace("auto", { ...SRUN, SLURM_PROCID: "4" }, "h"), /SLURM_PROCID is 4, not below the job's size 4/);
  assert.throws(() => launchPlace("auto", { OMPI_COMM_WORLD_RANK: "0" }, "h"), /OMPI_COMM_WORLD_SIZE is not set/);
  assert.throws(() => launchPlace("auto", { ...OMPI, OMPI_COMM_WORLD_SIZE: "0" }, "h"), /OMPI_COMM_WORLD_SIZE is '0', not a process count/);
  assert.throws(() => launchPlace("auto", { ...OMPI, FUZZFLEET_JOB_ID: "  " }, "h"), /FUZZFLEET_JOB_ID is set but empty/);
  assert.throws(() => launchPlace("kubernetes", {}, "no-ordinal-here"), /--launcher kubernetes: none of JOB_COMPLETION_INDEX/);
  assert.throws(() => launchPlace("kubernetes", { JOB_COMPLETION_INDEX: "3", FUZZFLEET_RANK_OFFSET: "1", FUZZFLEET_RANKS: "4" }, "w"), /rank 4 .* is not below FUZZFLEET_RANKS 4/);
});

test("roles: rank 0 leads, explore ranks 1..M-1 are masters of that rank, workers are dealt to the masters in turn", () => {
  assert.deepEqual([0, 1, 2, 3].map((r) => roleOf("sweep", r, 1)), [{ kind: "coordinator" }, { kind: "worker", master: 0 }, { kind: "worker", master: 0 }, { kind: "worker", master: 0 }]);
  assert.deepEqual(
    [0, 1, 2, 3, 4, 5, 6].map((r) => roleOf("explore", r, 3)),
    [
      { kind: "root", masters: 3 },
      { kind: "submaster", masterRank: 1 },
      { kind: "submaster", masterRank: 2 },
      { kind: "worker", master: 0 },
      { kind: "worker", master: 1 },
      { kind: "worker", master: 2 },
      { kind: "worker", master: 0 },
    ],
  );
});

test("the job id is --job-id, else FUZZFLEET_JOB_ID, else the launcher's; only the one taken is checked, against 256 printable characters", () => {
  const bad = { ...OMPI, OMPI_MCA_ess_base_jobid: "x".repeat(257) };
  assert.equal(launchPlace("auto", bad, "h", "j-1").jobId, "j-1", "a flag stands in for the launcher's id");
  assert.equal(launchPlace("auto", { ...bad, FUZZFLEET_JOB_ID: " j-2 " }, "h").jobId, "j-2");
  assert.equal(launchPlace("auto", { ...OMPI, OMPI_MCA_ess_base_jobid: "é".repeat(256) }, "h").jobId, "é".repeat(256), "256 characters, not bytes, and not only ASCII");
  assert.throws(() => launchPlace("auto", bad, "h"), /^UsageError: OMPI_MCA_ess_base_jobid is 257 characters long \('x{40}…'\), over the limit of 256 for a job id: pass --job-id ID/);
  assert.throws(() => launchPlace("auto", { ...OMPI, OMPI_MCA_ess_base_jobid: "" }, "h"), /^UsageError: OMPI_MCA_ess_base_jobid '' is empty: a job id is printable text/);
  assert.throws(() => launchPlace("auto", OMPI, "h", "a\u2028b"), /^UsageError: --job-id 'a\\u2028b' holds a control character: .*; give every rank of the job the same printable id$/);
  assert.throws(() => launchPlace("mpi", { PMI_RANK: "0", PMI_SIZE: "2", PMI_JOBID: "7\r" }, "h"), /^UsageError: PMI_JOBID '7\\x0d' holds a control character/);
});
