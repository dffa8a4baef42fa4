// Where a launched process stands: its rank, the job's size and the job's id, read from the
// environment the cluster's own launcher gives each process it starts (docs/cluster.md):
//
//   mpi         Open MPI: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, job OMPI_MCA_ess_base_jobid
//               (else PMIX_NAMESPACE); MPICH/Hydra and other PMI launchers: PMI_RANK, PMI_SIZE,
//               job PMI_KVSNAME or PMI_JOBID when set
//   slurm       srun: SLURM_PROCID, SLURM_NTASKS (else SLURM_NPROCS), job SLURM_JOB_ID.SLURM_STEP_ID
//   kubernetes  the pod's ordinal: JOB_COMPLETION_INDEX (an Indexed Job) else the number at the
//               end of the host name (a StatefulSet's pod-N), plus FUZZFLEET_RANK_OFFSET; the size
//               from FUZZFLEET_RANKS when set; the job from FUZZFLEET_JOB_ID
//   none        no launcher: rank 0 of 1
//
// `auto` tries them in that order: MPI first, because mpirun inside a Slurm allocation passes the
// batch step's SLURM_PROCID (0) on to every rank. FUZZFLEET_JOB_ID, when set, names the job for
// every launcher (it must be the same on every rank). Every value is checked; a bad one is refused
// with the variable's name, its value (escaped) and the fix. A job id is printable text of at most
// JOB_ID_MAX_CHARS characters, whichever variable (or --job-id) gives it.
import { printable } from "../core/log-lines.ts";
import { UsageError } from "../errors.ts";

export const LAUNCHERS = ["auto", "mpi", "slurm", "kubernetes", "none"] as const;
export type LauncherChoice = (typeof LAUNCHERS)[number];

export interface LaunchPlace {
  /** The launcher found, in words ("Open MPI", "Slurm", …). */
  launcher: string;
  rank: number;
  /** How many processes the job has; null when the launcher does not say (Kubernetes without FUZZFLEET_RANKS). */
  size: number | null;
  /** The same on every rank of one job, different for the next job; null when the launcher gives none. */
  jobId: string | null;
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Where this process stands, from `choice`'s variables (the first launcher found, for auto). The
 * job id is `jobIdFlag` (--job-id) when given, else FUZZFLEET_JOB_ID, else the launcher's; only the
 * one taken is checked.
 */
export function launchPlace(choice: LauncherChoice, env: Env, hostname: string, jobIdFlag?: string): LaunchPlace {
  const { jobId, ...place } = find(choice, env, hostname);
  if (jobIdFlag !== undefined) return { ...place, jobId: checkJobId(jobIdFlag, "--job-id", true) };
  const override = env.FUZZFLEET_JOB_ID;
  if (override !== undefined) {
    if (override.trim() === "") throw new UsageError("FUZZFLEET_JOB_ID is set but empty; give it the job's id (the same on every rank), or unset it");
    return { ...place, jobId: checkJobId(override.trim(), "FUZZFLEET_JOB_ID", true) };
  }
  return { ...place, jobId: jobId === null ? null : checkJobId(jobId.value, jobId.source, false) };
}

/** The longest job id taken: the rendezvous record carries it (rendezvous.ts), and so does every line that names the job. */
export const JOB_ID_MAX_CHARS = 256;
/** How much of an over-long id a message shows. */
const JOB_ID_SHOWN_CHARS = 40;

/**
 * `id` as read from `source` (a variable, or --job-id), or a UsageError naming the source, the
 * limit and the fix (`userSet`: the user gave the id, else the launcher did). A control character,
 * a line separator or a bidirectional override is refused, not escaped: the ranks must agree on
 * the id, and every rank's lines show it as it is.
 */
export function checkJobId(id: string, source: string, userSet: boolean): string {
  const fix = (better: string) => (userSet ? `give every rank of the job the same ${better} id` : "pass --job-id ID (or set FUZZFLEET_JOB_ID), the same on every rank and new for each job");
  if (id.length > JOB_ID_MAX_CHARS) {
    const head = printable(id.slice(0, JOB_ID_SHOWN_CHARS), { max: JOB_ID_SHOWN_CHARS * 6 });
    throw new UsageError(`${source} is ${id.length} characters long ('${head}…'), over the limit of ${JOB_ID_MAX_CHARS} for a job id: ${fix("shorter")}`);
  }
  // printable() changes a text this short only where it has a character it must escape.
  const shown = printable(id, { max: JOB_ID_MAX_CHARS * 6 });
  if (id === "" || shown !== id) {
    throw new UsageError(`${source} '${shown}' ${id === "" ? "is empty" : "holds a control character"}: a job id is printable text of at most ${JOB_ID_MAX_CHARS} characters; ${fix("printable")}`);
  }
  return id;
}

/** What a launcher gives: the place, and the job id with the variable it came from (checked by launchPlace). */
type Found = Omit<LaunchPlace, "jobId"> & { jobId: { value: string; source: string } | null };

/** The job id in the first of `names` that is set in `env`. */
function jobIdOf(env: Env, ...names: string[]): Found["jobId"] {
  const source = names.find((n) => env[n] !== undefined);
  return source === undefined ? null : { value: env[source]!, source };
}

function find(choice: LauncherChoice, env: Env, hostname: string): Found {
  switch (choice) {
    case "mpi": {
      const p = mpi(env);
      if (p === null) throw missing("mpi", "OMPI_COMM_WORLD_RANK (Open MPI) or PMI_RANK (MPICH, PMI)", "start it with mpirun or mpiexec");
      return p;
    }
    case "slurm": {
      const p = slurm(env);
      if (p === null) throw missing("slurm", "SLURM_PROCID", "start it with srun (in an sbatch script, srun fuzzfleet launch …)");
      return p;
    }
    case "kubernetes": {
      const p = kubernetes(env, hostname);
      if (p === null) {
        throw missing("kubernetes", "JOB_COMPLETION_INDEX, or a host name ending in -N (a StatefulSet pod)", "run it in an Indexed Job or a StatefulSet (examples/kubernetes/)");
      }
      return p;
    }
    case "none":
      return { launcher: "no launcher", rank: 0, size: 1, jobId: null };
    case "auto":
      return mpi(env) ?? slurm(env) ?? (env.JOB_COMPLETION_INDEX !== undefined || env.KUBERNETES_SERVICE_HOST !== undefined ? kubernetes(env, hostname) : null) ?? find("none", env, hostname);
  }
}

function mpi(env: Env): Found | null {
  if (env.OMPI_COMM_WORLD_RANK !== undefined) {
    const size = count(env, "OMPI_COMM_WORLD_SIZE", true)!;
    return { launcher: "Open MPI", rank: rankOf(env, "OMPI_COMM_WORLD_RANK", size), size, jobId: jobIdOf(env, "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE") };
  }
  if (env.PMI_RANK !== undefined) {
    const size = count(env, "PMI_SIZE", true)!;
    return { launcher: "MPI (PMI)", rank: rankOf(env, "PMI_RANK", size), size, jobId: jobIdOf(env, "PMI_KVSNAME", "PMI_JOBID") };
  }
  return null;
}

function slurm(env: Env): Found | null {
  if (env.SLURM_PROCID === undefined) return null;
  const sizeVar = env.SLURM_NTASKS !== undefined ? "SLURM_NTASKS" : "SLURM_NPROCS";
  const size = count(env, sizeVar, true)!;
  const job = jobIdOf(env, "SLURM_JOB_ID", "SLURM_JOBID");
  const step = jobIdOf(env, "SLURM_STEP_ID", "SLURM_STEPID");
  const jobId = job === null ? null : { value: `${job.value}.${step?.value ?? "0"}`, source: `${job.source}.${step?.source ?? "SLURM_STEP_ID"}` };
  return { launcher: "Slurm", rank: rankOf(env, "SLURM_PROCID", size), size, jobId };
}

function kubernetes(env: Env, hostname: string): Found | null {
  let ordinal: number;
  if (env.JOB_COMPLETION_INDEX !== undefined) ordinal = rankOf(env, "JOB_COMPLETION_INDEX", null);
  else {
    const m = /-(\d+)$/.exec(hostname);
    if (!m) return null;
    ordinal = Number(m[1]);
  }
  const offset = env.FUZZFLEET_RANK_OFFSET === undefined ? 0 : rankOf(env, "FUZZFLEET_RANK_OFFSET", null);
  const size = count(env, "FUZZFLEET_RANKS", false);
  const rank = ordinal + offset;
  if (size !== null && rank >= size) {
    throw new UsageError(`this pod's rank ${rank} (ordinal ${ordinal} + FUZZFLEET_RANK_OFFSET ${offset}) is not below FUZZFLEET_RANKS ${size}: make FUZZFLEET_RANKS the job's whole count`);
  }
  return { launcher: "Kubernetes", rank, size, jobId: null };
}

/** A non-negative integer, below `size` when the size is known. */
function rankOf(env: Env, name: string, size: number | null): number {
  const raw = env[name]!;
  const n = Number(raw.trim());
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(n)) throw new UsageError(`${name} is '${printable(raw)}', not a rank (an integer >= 0): is this process started by the launcher it names?`);
  if (size !== null && n >= size) throw new UsageError(`${name} is ${n}, not below the job's size ${size}: the launcher's variables disagree`);
  return n;
}

function count(env: Env, name: string, required: boolean): number | null {
  const raw = env[name];
  if (raw === undefined) {
    if (required) throw new UsageError(`${name} is not set, so the job's size is unknown: start this process with its launcher (mpirun, srun)`);
    return null;
  }
  const n = Number(raw.trim());
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(n) || n < 1) throw new UsageError(`${name} is '${printable(raw)}', not a process count (an integer >= 1)`);
  return n;
}

function missing(choice: string, variables: string, fix: string): UsageError {
  return new UsageError(`--launcher ${choice}: none of ${variables} is set in this process's environment; ${fix}, or pass --launcher auto`);
}

/** What each rank of a launched campaign is (docs/cluster.md). */
export type LaunchRole =
  | { kind: "coordinator" }
  | { kind: "root"; masters: number }
  | { kind: "submaster"; masterRank: number }
  /** A worker, and the rank of the master it serves (0 for a sweep's coordinator). */
  | { kind: "worker"; master: number };

/**
 * The role of launcher rank `rank`: rank 0 leads (a sweep's coordinator, an explore's root);
 * ranks 1 to M-1 of an explore are its other masters, with master rank = launcher rank; every
 * later rank is a worker, dealt to the masters in turn (rank M to master 0, M+1 to master 1, …).
 */
export function roleOf(kind: "sweep" | "explore", rank: number, masters: number): LaunchRole {
  const m = kind === "sweep" ? 1 : masters;
  if (rank === 0) return kind === "sweep" ? { kind: "coordinator" } : { kind: "root", masters: m };
  if (rank < m) return { kind: "submaster", masterRank: rank };
  return { kind: "worker", master: (rank - m) % m };
}
