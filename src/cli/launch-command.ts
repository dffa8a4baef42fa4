// `launch`: one rank of a campaign started by the cluster's own launcher (mpirun, srun, a
// Kubernetes Job). The rank comes from the launcher's environment (launch/launcher.ts), the role
// from the rank: 0 leads (a sweep's coordinator, an explore's root), an explore's ranks 1 to M-1
// are its other masters, the rest are workers. The leaders publish their address, and rank 0 a
// fresh token, in the shared campaign directory (launch/rendezvous.ts); the others wait for them
// there. Each rank then runs the ordinary command in this process (`coordinate`, `explore`,
// `worker`), with the token in its environment, never on a command line. docs/cluster.md.
import { createServer } from "node:net";
import { performance } from "node:perf_hooks";
import { availableParallelism, hostname as osHostname } from "node:os";
import { resolve } from "node:path";
import { Command, Option } from "commander";
import { campaignPaths, type GlobalOptions } from "../config/paths.ts";
import { printable } from "../core/log-lines.ts";
import { RefusedError, RuntimeFailure, UsageError } from "../errors.ts";
import { EXIT } from "../exit-codes.ts";
import { LAUNCHERS, launchPlace, roleOf, type LaunchPlace, type LaunchRole } from "../launch/launcher.ts";
import { awaitPublished, closeJobDir, jobDir, openJobDir, publish, staleJobDirs, type LeadHolder, type PublishedT } from "../launch/rendezvous.ts";
import { describeHolder } from "../lock/campaign-lock.ts";
import { clientToken, serverToken, tokenPath } from "../net/token.ts";
import { action, actionExitCode, intAtLeast, portNumber, waitSeconds } from "./action.ts";
import { withSignalStop } from "./stop-signals.ts";

interface LaunchFlags extends GlobalOptions {
  launcher: (typeof LAUNCHERS)[number];
  masters: number;
  port?: number;
  bind?: string;
  advertise?: string;
  jobs: number;
  slots: number;
  wait: number;
  jobId?: string;
}

/** Flags of the campaign's own command that the launch sets for each rank. */
const SET_BY_LAUNCH = ["--port", "--bind", "--masters", "--join", "--token"];

export function registerLaunch(program: Command): void {
  program
    .command("launch")
    .description("run one rank of a sweep or explore campaign started by mpirun, srun or Kubernetes: the role comes from the launcher's rank")
    .usage("[options] -- sweep [coordinate options] | -- explore -i INPUT_DIR -o CORPUS_DIR [explore options] -- TARGET [ARGS...]")
    .argument("<campaign...>", "after --: `sweep` and coordinate's options, or `explore` and explore's options and target")
    .addOption(new Option("--launcher <name>", "where the rank comes from").choices(LAUNCHERS).default("auto"))
    .option("--masters <m>", "explore: ranks 0 to M-1 are masters (master rank = launcher rank), the rest workers", intAtLeast(1), 1)
    .addOption(new Option("--port <n>", "rank 0's port (default: a free one; Kubernetes: the Service's port)").argParser(portNumber))
    .option("--bind <addr>", "the address the leading ranks listen on (default: this host's name)")
    .option("--advertise <host>", "the address the others dial (default: $FUZZFLEET_ADVERTISE, else --bind, else this host's name)")
    .addOption(new Option("-j, --jobs <n>", "workers: parallel jobs per chunk, the generator's {jobs}").argParser(intAtLeast(1)).default(availableParallelism(), "this host's cores"))
    .option("--slots <n>", "workers: units held at once", intAtLeast(1), 1)
    .option("--wait <duration>", "how long a rank waits for its master to publish its address and to listen (seconds or 2m)", waitSeconds, 120)
    .option("--job-id <id>", "the job's id, the same on every rank, at most 256 printable characters (default: $FUZZFLEET_JOB_ID, else the launcher's)")
    .addHelpText(
      "after",
      `
Roles: launcher rank 0 is the sweep's coordinator or the explore's root master; with --masters M
the explore's ranks 1 to M-1 are its other masters (master rank = launcher rank); every later rank
is a worker (rank M serves master 0, M+1 master 1, …). One process per rank.
The launcher: Open MPI (OMPI_COMM_WORLD_RANK/SIZE), MPICH and PMI (PMI_RANK/PMI_SIZE), Slurm
(SLURM_PROCID/SLURM_NTASKS), Kubernetes (JOB_COMPLETION_INDEX or the pod's ordinal, plus
FUZZFLEET_RANK_OFFSET); auto tries them in that order.
Rendezvous: the campaign directory must be shared, at the same path, by every rank. Rank 0 writes
its address and a fresh token (mode 0600) into <out>/launch/ (sweep) or CORPUS_DIR/.fuzzfleet/launch/
(explore), and removes them at the end; the others wait for them up to --wait. With
FUZZFLEET_TOKEN set on every rank (a Kubernetes Secret) no token file is written. Rank 0 first
takes the leader's lock launch/fuzzfleet.lock: a second rank 0 (one job id started twice, a
Kubernetes workers Job without FUZZFLEET_RANK_OFFSET) touches nothing and exits 3 naming the
running one. A job id is printable text of at most 256 characters.
Exit: rank 0's is the campaign's (as coordinate's or explore's); a worker exits 0 when its master
stopped it, 4 when it lost it; a rank that waited in vain exits 4 naming the file it waited for.
Under mpirun the job's exit code is the first non-zero one. docs/cluster.md walks through mpirun,
sbatch/srun and Kubernetes.`,
    )
    .action(action<LaunchFlags>(async (o, cmd) => launch(o, cmd.args)));
}

async function launch(o: LaunchFlags, args: string[]): Promise<number> {
  const [kind, ...rest] = args;
  if (kind !== "sweep" && kind !== "explore") {
    throw new UsageError(`launch wants \`-- sweep …\` or \`-- explore …\` after its own options (got '${kind ?? ""}'); e.g. mpirun -n 4 fuzzfleet launch -- sweep --for 1h`);
  }
  const own = ownArgs(rest);
  for (const a of own) {
    const flag = a.split("=")[0]!;
    if (SET_BY_LAUNCH.includes(flag)) throw new UsageError(`${flag} is set by launch for each rank: leave it out of the ${kind} options${flag === "--port" || flag === "--bind" ? ` (give launch ${flag})` : ""}`);
  }
  if (kind === "sweep" && o.masters !== 1) throw new UsageError("--masters is for explore: a sweep has one coordinator (rank 0)");
  const place = launchPlace(o.launcher, process.env, osHostname(), o.jobId);
  const jobId = place.jobId;
  const size = place.size;
  if (size !== null && size < o.masters + (kind === "sweep" ? 1 : 0)) {
    throw new UsageError(
      `${place.launcher} started ${size} rank(s): ${kind === "sweep" ? "a sweep with a coordinator needs at least one worker too (2 ranks)" : `an explore with --masters ${o.masters} needs at least ${o.masters}`}; start more ranks${kind === "explore" ? " or lower --masters" : ""}`,
    );
  }
  if (kind === "explore" && size !== null && localSlots(own) === 0 && size - o.masters < o.masters) {
    // Workers are dealt to the masters in turn: with fewer workers than masters the last masters get none.
    throw new UsageError(
      `${place.launcher} started ${size} rank(s): with --masters ${o.masters} that leaves ${size - o.masters} worker(s), so master rank ${Math.max(1, size - o.masters)} and up would have none, and -j 0 gives them no local slot either: ` +
        `start at least ${2 * o.masters} ranks, or give the masters local slots (-j 1)`,
    );
  }
  const role = roleOf(kind, place.rank, o.masters);
  const say = (line: string): void => void process.stdout.write(`[rank ${place.rank}] ${line}\n`);
  if (size === 1 && kind === "explore") return runCommand(kind, ["explore", ...rest], o); // a lone master needs no rendezvous
  if (jobId === null) throw new UsageError(`${place.launcher} gives no job id: pass --job-id ID (or set FUZZFLEET_JOB_ID), the same on every rank and new for each job`);
  const base = kind === "sweep" ? campaignPaths(o).outDir : resolve(corpusOf(own), ".fuzzfleet");
  say(`${place.launcher}: rank ${place.rank}${size !== null ? ` of ${size}` : ""}, ${describe(role, kind)} (job ${printable(jobId)})`);
  const bind = o.bind ?? osHostname();
  const advertise = o.advertise ?? process.env.FUZZFLEET_ADVERTISE ?? o.bind ?? osHostname();
  const common: Rank = { o, kind, rest, place, jobId, base, bind, advertise, say: (line) => void say(line) };
  if (role.kind === "worker") return runWorkerRank(common, role.master);
  if (role.kind === "submaster") return runSubmaster(common, role.masterRank);
  return runLeader(common, role);
}

interface Rank {
  o: LaunchFlags;
  kind: "sweep" | "explore";
  rest: string[];
  place: LaunchPlace;
  jobId: string;
  base: string;
  bind: string;
  advertise: string;
  say: (line: string) => void;
}

/**
 * Rank 0: takes the lead of launch/ (refused while another rank 0 holds it), reports stale state,
 * publishes its address (and the job's fresh token), runs the campaign, removes the job's files.
 */
async function runLeader(r: Rank, role: LaunchRole): Promise<number> {
  const port = r.o.port ?? (await freePort(r.bind));
  const taken = openJobDir(r.base, r.jobId, { command: r.kind === "sweep" ? "coordinate" : "explore", port, forceUnlock: ownArgs(r.rest).includes("--force-unlock"), log: r.say });
  if (taken.kind === "held") throw leadRefused(r, taken.by);
  const { lead } = taken;
  try {
    for (const s of staleJobDirs(r.base, lead.dir)) {
      r.say(`stale state: ${s.path} is an earlier job's rendezvous (last written ${Math.round(s.ageSeconds)}s ago); remove it with: rm -rf -- '${s.path.replace(/'/g, `'\\''`)}'`);
    }
    const fromEnv = process.env.FUZZFLEET_TOKEN !== undefined;
    // A fresh token in the job's new directory (0600, net/token.ts), unless every rank has one in its environment.
    if (!fromEnv) process.env.FUZZFLEET_TOKEN = serverToken({ outDir: lead.dir }).token;
    publish(lead.dir, { job: r.jobId, rank: 0, role: role.kind === "coordinator" ? "coordinator" : "root", host: r.advertise, port, token: fromEnv ? "environment" : "file" });
    const flags = ["--port", String(port), "--bind", r.bind];
    if (r.kind === "sweep") return await runCommand("sweep", ["coordinate", ...flags, "--yes", ...r.rest], r.o);
    const masters = role.kind === "root" && role.masters > 1 ? ["--masters", String(role.masters)] : [];
    return await runCommand("explore", ["explore", ...withFlags(r.rest, [...masters, ...flags])], r.o);
  } finally {
    closeJobDir(r.base, lead);
  }
}

/**
 * Why this rank 0 may not lead, naming the rank 0 that does, and the fix: under Kubernetes a
 * second rank 0 of one job is almost always a workers' Job without FUZZFLEET_RANK_OFFSET (its
 * index 0 is rank 0 too), and the pod would be restarted into the same refusal until that is set.
 */
function leadRefused(r: Rank, by: LeadHolder): RefusedError {
  const who = describeHolder(by.holder);
  const same = by.jobId === r.jobId;
  const head =
    by.jobId === null
      ? `another rank 0 leads the campaign in this directory (it has not published its job id yet): ${who}`
      : same
        ? `job '${printable(r.jobId)}' already has a rank 0: ${who}`
        : `job '${printable(by.jobId)}' leads the campaign in this directory: ${who}`;
  let fix: string;
  if (same && r.place.launcher === "Kubernetes") {
    const env = process.env;
    const offset = env.FUZZFLEET_RANK_OFFSET === undefined ? "is unset" : `is ${printable(env.FUZZFLEET_RANK_OFFSET)}`;
    fix =
      `this pod is rank 0 because its ${env.JOB_COMPLETION_INDEX !== undefined ? "index" : "ordinal"} is 0 and FUZZFLEET_RANK_OFFSET ${offset}: ` +
      `set FUZZFLEET_RANK_OFFSET in the workers' Job to the rank of its first pod (1 when the root is rank 0). A new campaign run needs a FUZZFLEET_JOB_ID of its own.`;
  } else if (same) {
    fix = "two launches were given one job id: each job needs an id of its own (--job-id, FUZZFLEET_JOB_ID), and one campaign directory runs one job at a time; wait for that one to end.";
  } else {
    fix = "one campaign directory runs one job at a time: wait for that job to end, or give this job a campaign directory of its own.";
  }
  const dead = by.holder.local || (same && r.place.launcher === "Kubernetes") ? "" : ` If you know pid ${by.holder.pid} on ${by.holder.host} is dead, ${r.kind === "sweep" ? "pass --force-unlock after `-- sweep`" : `remove ${by.lockPath}`}.`;
  return new RefusedError(`${head}\n  ${fix}${dead}\n  (${by.lockPath})`);
}

/** An explore's master rank 1 to M-1: joins the root as that rank and serves its own workers. */
async function runSubmaster(r: Rank, masterRank: number): Promise<number> {
  const root = await withSignalStop(({ signal }) => rendezvous(r, 0, "the root explore master", signal));
  if (root === null) return EXIT.ok;
  const port = await freePort(r.bind);
  publish(jobDir(r.base, r.jobId), { job: r.jobId, rank: masterRank, role: "submaster", host: r.advertise, port, token: root.token });
  // explore --join asks the root for this rank (explore/command/roles.ts).
  process.env.FUZZFLEET_MASTER_RANK = String(masterRank);
  const args = statsPerRank(withoutResume(r.rest), masterRank);
  return runCommand("explore", ["explore", ...withFlags(args, ["--join", `${root.host}:${root.port}`, "--port", String(port), "--bind", r.bind])], r.o);
}

/** A worker: finds its master's address and the token, then is an ordinary worker. */
async function runWorkerRank(r: Rank, master: number): Promise<number> {
  const who = r.kind === "sweep" ? "the coordinator" : master === 0 ? "the root explore master" : `explore master rank ${master}`;
  const startMs = performance.now();
  return withSignalStop(async ({ signal }) => {
    const at = await rendezvous(r, master, who, signal);
    if (at === null) return EXIT.ok;
    const { runWorker } = await import("../worker/client.ts");
    const left = Math.max(1, Math.round(r.o.wait - (performance.now() - startMs) / 1000));
    return runWorker({
      host: at.host,
      port: at.port,
      jobs: r.o.jobs,
      slots: r.o.slots,
      token: { flag: process.env.FUZZFLEET_TOKEN, outDir: jobDir(r.base, r.jobId) },
      waitSeconds: left,
      signal,
      who,
      log: (line) => r.say(line),
    });
  });
}

/** Waits for master `rank`'s record and takes the job's token from beside it (unless every rank has it already). */
async function rendezvous(r: Rank, rank: number, who: string, signal: AbortSignal): Promise<PublishedT | null> {
  const rec = await awaitPublished(r.base, rank, { jobId: r.jobId, waitSeconds: r.o.wait, signal, log: r.say, who });
  if (rec === null) {
    r.say("interrupted while waiting for the rendezvous; nothing was started");
    return null;
  }
  if (rec.token === "file") {
    const dir = jobDir(r.base, r.jobId);
    process.env.FUZZFLEET_TOKEN = clientToken({ file: tokenPath(dir), outDir: dir, env: {} });
  } else if (process.env.FUZZFLEET_TOKEN === undefined) {
    throw new UsageError(`rank ${rank} takes the token from FUZZFLEET_TOKEN, which this rank lacks: give every rank the same FUZZFLEET_TOKEN (a Kubernetes Secret)`);
  }
  return rec;
}

/** Runs the campaign's own command in this process, with launch's global options, and returns its exit code. */
async function runCommand(kind: "sweep" | "explore", argv: string[], g: GlobalOptions): Promise<number> {
  const program = new Command("fuzzfleet")
    .option("--config <path>", "campaign config file", "./fuzzfleet.toml")
    .option("--db <path>", "SQLite store")
    .option("--out <dir>", "artifacts, logs and the lock")
    .exitOverride();
  if (kind === "sweep") (await import("./distributed-commands.ts")).registerDistributedCommands(program);
  else (await import("./explore-command.ts")).registerExplore(program);
  for (const c of program.commands) c.exitOverride();
  const globals = [...(g.config ? ["--config", g.config] : []), ...(g.db ? ["--db", g.db] : []), ...(g.out ? ["--out", g.out] : [])];
  await program.parseAsync(["node", "fuzzfleet", ...globals, ...argv]);
  return actionExitCode();
}

/** The campaign command's options: its arguments up to the target's `--` (explore), all of them (sweep). */
function ownArgs(rest: string[]): string[] {
  const i = rest.indexOf("--");
  return i < 0 ? rest : rest.slice(0, i);
}

/** The explore options without --resume, which is the root's alone (a submaster joins whatever epoch the root runs). */
function withoutResume(rest: string[]): string[] {
  const end = rest.indexOf("--") < 0 ? rest.length : rest.indexOf("--");
  const out: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    if (i < end && rest[i] === "--resume") i++;
    else if (!(i < end && rest[i]!.startsWith("--resume="))) out.push(rest[i]!);
  }
  return out;
}

/**
 * Every rank gets the same command line, but a submaster's --stats-json is its own share: it is
 * written beside the root's file with the rank in its name (stats.json -> stats.r1.json), so the
 * root's fleet view at the path the user named is never overwritten.
 */
function statsPerRank(rest: string[], rank: number): string[] {
  const end = rest.indexOf("--") < 0 ? rest.length : rest.indexOf("--");
  const ranked = (file: string) => file.replace(/(\.[^./]*)?$/, (ext) => `.r${rank}${ext}`);
  return rest.map((a, i) => {
    if (i >= end) return a;
    if (i > 0 && rest[i - 1] === "--stats-json") return ranked(a);
    if (a.startsWith("--stats-json=")) return `--stats-json=${ranked(a.slice("--stats-json=".length))}`;
    return a;
  });
}

/** `rest` with `flags` put before the target's `--`. */
function withFlags(rest: string[], flags: string[]): string[] {
  const i = rest.indexOf("--");
  return i < 0 ? [...rest, ...flags] : [...rest.slice(0, i), ...flags, ...rest.slice(i)];
}

/** explore's -j (local slots) among its options; 1, explore's default, when absent. */
function localSlots(own: string[]): number {
  let slots = 1;
  for (let i = 0; i < own.length; i++) {
    const a = own[i]!;
    if ((a === "-j" || a === "--jobs") && own[i + 1] !== undefined) slots = Number(own[++i]);
    else if (a.startsWith("--jobs=")) slots = Number(a.slice(7));
    else if (/^-j\d+$/.test(a)) slots = Number(a.slice(2));
  }
  return slots;
}

/** The corpus directory of explore's options (-o DIR, --output-dir DIR, --output-dir=DIR, -oDIR). */
function corpusOf(own: string[]): string {
  for (let i = 0; i < own.length; i++) {
    const a = own[i]!;
    if ((a === "-o" || a === "--output-dir") && own[i + 1] !== undefined) return own[i + 1]!;
    if (a.startsWith("--output-dir=")) return a.slice("--output-dir=".length);
    if (a.startsWith("-o") && a.length > 2 && !a.startsWith("--")) return a.slice(2);
  }
  throw new UsageError("launch -- explore needs -o CORPUS_DIR: the ranks meet in its .fuzzfleet/ directory");
}

function describe(role: LaunchRole, kind: "sweep" | "explore"): string {
  switch (role.kind) {
    case "coordinator":
      return "the coordinator";
    case "root":
      return role.masters > 1 ? `the root master (master rank 0 of ${role.masters})` : "the explore master";
    case "submaster":
      return `explore master rank ${role.masterRank}`;
    case "worker":
      return kind === "sweep" ? "a worker" : `a worker of master rank ${role.master}`;
  }
}

/** A port free on `bind` now, for a leading rank to publish before its command listens on it. */
function freePort(bind: string): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", (err) => reject(new RuntimeFailure(`cannot listen on ${bind} to pick a port (${err.message}): give launch --bind an address of this host, or --port`)));
    server.listen(0, bind, () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

