// The bundled planted generator as the sweep benchmarks use it: its campaign file, a calibration
// run, the chunks a session recorded, and a bash loop that runs those very chunks directly.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import Database from "better-sqlite3";
import { ROOT, timedRun } from "./common.mjs";

export const PLANTED = join(ROOT, "examples", "planted", "planted.mjs");
export const MAX_SHRINKS = 20;
export const LANE = { name: "small", baseSeed: 1, args: ["--size", "small"] };
/** Calibration runs about this many seconds of work to measure seeds/s. */
const CALIBRATION_SECONDS = 3;

export function generatorCommand() {
  return ["node", PLANTED, "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"];
}

/** A one-lane campaign file; `tail` is appended as it is (a `[distributed]` table, say). */
export function campaignToml({ title, jobs, nice = 0, idleIo = false, chunkSeconds, bootstrapSeeds, tail = "" }) {
  const list = (xs) => `[${xs.map((x) => JSON.stringify(x)).join(", ")}]`;
  return `# ${title} benchmark campaign (temporary)
[defaults]
jobs = ${jobs}
nice = ${nice}
idle_io = ${idleIo}
chunk_minutes = ${chunkSeconds / 60}
bootstrap_seeds = ${bootstrapSeeds}
max_shrinks = ${MAX_SHRINKS}

[generator]
command = ${list(generatorCommand())}
identity = ${list([join(dirname(PLANTED), "*.mjs")])}

[lanes.${LANE.name}]
base_seed = ${LANE.baseSeed}
args = ${list(LANE.args)}
${tail}`;
}

/** Mirrors the engine's deadline floor: no chunk starts with less than this many seconds left. */
function deadlineFloor(chunkSeconds) {
  return Math.min(60, Math.max(10, Math.floor(chunkSeconds / 2)));
}

/**
 * A budget that fits `chunks` chunks and then stops: after chunk N the time left is below the
 * deadline floor, after chunk N-1 at or above it. Half a chunk of slack on each side.
 */
export function budgetSeconds({ chunkSeconds, chunks }) {
  return Math.round(deadlineFloor(chunkSeconds) + (chunks - 0.5) * chunkSeconds);
}

function fillArgv(template, v) {
  const values = { seed_from: v.from, seed_to: v.from + v.count - 1, count: v.count, jobs: v.jobs, out: v.out, max_shrinks: MAX_SHRINKS };
  return template.map((a) => a.replace(/\{([A-Za-z_]+)\}/g, (_, name) => String(values[name])));
}

/**
 * Seeds/s of the generator alone, and the bootstrap_seeds that make even the first chunk last
 * about `chunkSeconds`.
 */
export async function calibrate({ jobs, costMs, chunkSeconds }, env, dir) {
  const count = Math.max(10 * jobs, Math.round((CALIBRATION_SECONDS * 1000 * jobs) / costMs));
  const argv = fillArgv([...generatorCommand(), ...LANE.args], { from: LANE.baseSeed, count, out: join(dir, "calibration"), jobs });
  const logPath = join(dir, "calibration.log");
  const r = await timedRun(argv, { cwd: dir, env, logPath });
  if (r.code !== 0 && r.code !== 1) throw new Error(`calibration run failed (exit ${r.code ?? r.signal}): ${readFileSync(logPath, "utf8")}`);
  rmSync(join(dir, "calibration"), { recursive: true, force: true });
  const seedsPerSec = count / r.seconds;
  return { count, seconds: r.seconds, seedsPerSec, bootstrapSeeds: Math.max(10, Math.round(seedsPerSec * chunkSeconds)) };
}

/** The chunks of the latest session in the order they ran, with their worker and the lane args they ran with. */
export function readChunks(dbPath) {
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  try {
    const rows = db
      .prepare(
        `SELECT c.id, c.worker_id, c.seed_from, c.seed_to, c.status, c.seconds, c.finds, c.quarantine, c.started_at, l.name AS lane, l.params_json
           FROM chunk c JOIN lane l ON l.id = c.lane_id
          WHERE c.session_id = (SELECT MAX(id) FROM session)
          ORDER BY c.id`,
      )
      .all();
    return rows.map((r) => {
      if (r.status !== "complete") throw new Error(`chunk ${r.id} (${r.seed_from}..${r.seed_to}) ended '${r.status}', not complete`);
      return {
        id: r.id,
        workerId: r.worker_id,
        lane: r.lane,
        laneArgs: JSON.parse(r.params_json).args ?? [],
        seedFrom: r.seed_from,
        seedTo: r.seed_to,
        seeds: r.seed_to - r.seed_from + 1,
        childSeconds: r.seconds,
        /** When the coordinator assigned it (its wall clock, ms since the epoch). */
        startedAtMs: Date.parse(r.started_at),
        finds: r.finds,
        quarantine: r.quarantine,
      };
    });
  } finally {
    db.close();
  }
}

function shellQuote(s) {
  return `'${String(s).replaceAll("'", `'\\''`)}'`;
}

/** One argv template word as bash source: literal text single-quoted, per-chunk placeholders as "$var". */
function shellWord(arg, jobs) {
  const perChunk = { seed_from: "from", seed_to: "to", count: "count", out: "out" };
  const fixed = { jobs, max_shrinks: MAX_SHRINKS };
  return arg
    .split(/(\{[A-Za-z_]+\})/)
    .filter((part) => part !== "")
    .map((part) => {
      const name = /^\{([A-Za-z_]+)\}$/.exec(part)?.[1];
      if (name && name in perChunk) return `"$${perChunk[name]}"`;
      if (name && name in fixed) return shellQuote(fixed[name]);
      return shellQuote(part);
    })
    .join("");
}

/**
 * A bash loop that runs `chunks` one after another, one fresh output directory each (left in
 * place), with output appended to a log per chunk, and prints "start end" ($EPOCHREALTIME) per
 * run. Bash builtins only between runs, no extra processes.
 */
export function directScript(jobs, chunks, outRoot) {
  const laneArgs = chunks[0].laneArgs;
  for (const c of chunks) {
    if (JSON.stringify(c.laneArgs) !== JSON.stringify(laneArgs)) throw new Error("the benchmark expects one lane; chunks ran with different lane args");
  }
  const command = [...generatorCommand(), ...laneArgs].map((a) => shellWord(a, jobs)).join(" ");
  return `set -u
froms=(${chunks.map((c) => c.seedFrom).join(" ")})
tos=(${chunks.map((c) => c.seedTo).join(" ")})
times=""
for i in "\${!froms[@]}"; do
  from=\${froms[$i]}; to=\${tos[$i]}; count=$((to - from + 1)); out=${shellQuote(outRoot)}/chunk-$i
  t0=$EPOCHREALTIME
  ${command} >>"$out.log" 2>&1
  rc=$?
  t1=$EPOCHREALTIME
  if [ "$rc" -gt 1 ]; then echo "chunk $i ($from..$to) exited $rc; see $out.log" >&2; exit 3; fi
  times+="$t0 $t1"$'\\n'
done
printf '%s' "$times"
`;
}

/**
 * Writes directScript to `scriptPath`, runs it with bash in `outRoot` and returns its wall time
 * and each chunk's seconds; `what` names the loop in errors.
 */
export async function runDirectScript({ jobs, chunks, outRoot, scriptPath, timesPath, env, what }) {
  writeFileSync(scriptPath, directScript(jobs, chunks, outRoot));
  const r = await timedRun(["bash", scriptPath], { cwd: outRoot, env, logPath: timesPath });
  if (r.code !== 0) throw new Error(`${what} exited ${r.code ?? r.signal}:\n${readFileSync(timesPath, "utf8")}`);
  const chunkSeconds = readFileSync(timesPath, "utf8")
    .trim()
    .split("\n")
    .map((line) => {
      const [t0, t1] = line.split(" ").map(Number);
      return t1 - t0;
    });
  if (chunkSeconds.length !== chunks.length) throw new Error(`${what} timed ${chunkSeconds.length} chunks, expected ${chunks.length}`);
  return { run: r, chunkSeconds };
}
