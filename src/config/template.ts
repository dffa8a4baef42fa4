// The starter fuzzfleet.toml written by `fuzzfleet init`. It is a literal string because TOML
// stringifiers drop comments, and the comments are the point of a starter file.
import { availableParallelism } from "node:os";

const template = (cores: number) => `# fuzzfleet.toml — one sweep campaign.
# Relative paths in this file are relative to this file's directory, and the generator runs
# with that directory as its working directory.
# Durations on the command line look like 2h, 90m, 1h30m or 45s:  fuzzfleet run --for 2h

[defaults]
jobs = ${cores}${" ".repeat(Math.max(1, 18 - String(cores).length))}# parallel jobs per chunk on a single host ({jobs}); lanes may override.
                          # ${cores} = this machine's cores (os.availableParallelism()), also the default
nice = 19                 # niceness of the generator, 0..19; 0 leaves the priority alone
idle_io = true            # run the generator with idle I/O priority (ionice -c3)
chunk_minutes = 10        # target wall-clock length of one chunk (fractions allowed)
bootstrap_seeds = 40      # chunk size while a lane has no measured rate yet
max_shrinks = 20          # failures the generator may minimise per chunk ({max_shrinks})
hard_timeout_floor = 180  # seconds; a chunk is killed after max(this, 3 x its target length)

[generator]
# argv of one chunk. Placeholders, usable anywhere inside an argument:
#   {seed_from} first seed   {seed_to} last seed (inclusive)   {count} number of seeds
#   {jobs} parallel jobs     {out} the chunk's output dir      {max_shrinks} see [defaults]
# Exit 0 = no failures, 1 = failures found; anything else aborts the chunk and its seeds are redone.
command = ["node", "examples/planted/planted.mjs", "--from", "{seed_from}", "--count", "{count}",
           "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"]
# Files whose bytes make the generation id (globs allowed): change one and a new generation
# starts from scratch.
identity = ["examples/planted/*.mjs"]
# Where failures/<seed>/ and quarantine/ appear after a chunk; must use {out}.
results = "{out}"
# Optional: re-check a list of seeds ({seeds} = comma-separated, {jobs} allowed); used by resweep.
check = ["node", "examples/planted/planted.mjs", "--check", "--seeds", "{seeds}", "--json"]
# Optional: minimize, in the background, the finds a chunk left unshrunk (its {max_shrinks} cap).
# Until then such a find is "pending minimization" under its signature, not a distinct failure.
#   {seeds} comma-separated seeds (or {seed}: one per run)   {out} where failures/<seed>/ go   {jobs}
minimize = ["node", "examples/planted/planted.mjs", "--minimize", "--seeds", "{seeds}", "--out", "{out}", "--jobs", "{jobs}"]

# Optional: the system under test. Its hash is the app build id that workers must match, and a
# source newer than it stops the run (unless --allow-stale-app).
# [app]
# path = "../app/build/app"          # required in this table
# sources = ["../app/src/**/*.ts"]   # glob patterns

# A lane is a settings profile with its own seed range and cursor. Its coverage is the
# contiguous range [base_seed, cursor). Lanes are picked by weight; ties go to file order.
# Changing base_seed or args restarts the lane; weight, enabled and jobs can change at any time.
[lanes.small]
base_seed = 1             # first seed of the lane
weight = 2                # share of chunks relative to the other lanes. 0 still runs one chunk per
                          # session (more while every other lane is disabled): park with enabled = false
enabled = true            # false parks the lane
# jobs = 2                # single-host jobs for this lane (default: defaults.jobs)
args = ["--size", "small"]  # appended to the command; may use the placeholders too

[lanes.large]
base_seed = 1000000
weight = 1
args = ["--size", "large"]

# The coordinator reads this table (fuzzfleet coordinate); run reads drain_grace_minutes.
[distributed]
port = 9999               # TCP port workers connect to
bind = ""                 # listen address; "" = this host's name (deliberately not 0.0.0.0)
lease_seconds = 120       # a chunk with no heartbeat for this long is handed to another worker
drain_grace_minutes = 35  # after the deadline, how long to wait for chunks still running (then killed)
stop_grace_seconds = 15   # then how long each worker has to acknowledge the stop
# What a worker without the shared directory may send back of one chunk (its failures/ and quarantine/):
transfer_max_files = 10000    # files
transfer_max_mib = 2048       # bytes in all, in MiB
transfer_max_file_mib = 512   # bytes of one file, in MiB

# Background minimization; only read with [generator] minimize.
[minimize]
share = 0.25              # share of the jobs minimize runs get beside the sweep; 0 = only when no chunk runs
batch = 16                # finds per minimize run ({seeds}); 1 when the template uses {seed}
timeout_minutes = 10      # a minimize run is killed after this (or at the end of the session)

# The SQLite store (docs/store.md). The defaults suit almost everyone.
[store]
journal = "auto"          # "auto": WAL on a local disk, TRUNCATE on a network file system; or "wal", "truncate"
give_up_minutes = 10      # how long writes the store refuses (locked, disk full) are retried before the session ends
`;

/** The commented starter config, set up for the bundled example generator and this machine's cores. */
export function initTemplate(cores: number = availableParallelism()): string {
  return template(cores);
}
