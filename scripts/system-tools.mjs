// The system tools the test suite drives for real (a browser, AFL++, Open MPI, Slurm, Csmith,
// C-Vise, Z3 for the SymCC target, unshare and ip for workers in namespaces of their own), checked before any test runs. A test file needs a tool when
// its text names it, so `npm test -- core` needs none of them and the whole suite needs all.
// Missing tools are installed from Debian's packages when this runs as root on a machine with
// apt-get (one `apt-get update`, one install); otherwise the run stops before any test with the
// one command that installs them.
import { spawnSync } from "node:child_process";
import { accessSync, constants, readFileSync } from "node:fs";
import { delimiter, join } from "node:path";

function onPath(name) {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    try {
      accessSync(join(dir, name), constants.X_OK);
      return true;
    } catch {}
  }
  return false;
}

function executable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** A shared library the dynamic linker finds (its cache, read with the system's own ldconfig). */
function sharedLibrary(soname) {
  for (const ldconfig of ["/sbin/ldconfig", "/usr/sbin/ldconfig"]) {
    if (!executable(ldconfig)) continue;
    const listed = spawnSync(ldconfig, ["-p"], { encoding: "utf8" }).stdout ?? "";
    return listed.split("\n").some((line) => line.trim().startsWith(`${soname} `));
  }
  return false;
}

function exists(path) {
  try {
    accessSync(path, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}

/** Each tool: what in a test file's text says it is needed, how to tell it is here, the Debian packages that bring it. */
export const SYSTEM_TOOLS = [
  { tool: "Chromium", needed: /chromium/i, present: () => executable("/usr/bin/chromium"), packages: ["chromium"] },
  { tool: "Z3's library (the SymCC target links it)", needed: /symcc/i, present: () => sharedLibrary("libz3.so.4"), packages: ["libz3-4"] },
  { tool: "AFL++ (afl-fuzz)", needed: /afl-fuzz/, present: () => onPath("afl-fuzz"), packages: ["afl++"] },
  { tool: "Open MPI (mpirun)", needed: /mpirun/, present: () => onPath("mpirun"), packages: ["openmpi-bin"] },
  { tool: "Csmith", needed: /csmith/i, present: () => onPath("csmith") && exists("/usr/include/csmith/csmith.h"), packages: ["csmith", "libcsmith-dev"] },
  { tool: "C-Vise", needed: /cvise/i, present: () => onPath("cvise"), packages: ["cvise"] },
  { tool: "unshare (a worker in its own mount namespace)", needed: /"unshare"/, present: () => onPath("unshare"), packages: ["util-linux"] },
  { tool: "ip (a worker in its own network namespace)", needed: /"netns"/, present: () => onPath("ip"), packages: ["iproute2"] },
  { tool: "Slurm (slurmctld, sbatch) with munge", needed: /sbatch|slurmctld/, present: () => executable("/usr/sbin/slurmctld") && onPath("sbatch"), packages: ["slurm-wlm", "munge"] },
];

/** The tools the given test files need and this machine lacks. */
export function missingTools(files) {
  const texts = files.map((f) => readFileSync(f, "utf8"));
  return SYSTEM_TOOLS.filter((t) => texts.some((text) => t.needed.test(text)) && !t.present());
}

/**
 * Installs what is missing (as root, with apt-get) or returns the message that says what to run.
 * Returns null when everything the files need is here.
 */
export function ensureSystemTools(files) {
  const missing = missingTools(files);
  if (missing.length === 0) return null;
  const packages = [...new Set(missing.flatMap((t) => t.packages))];
  const names = missing.map((t) => t.tool).join(", ");
  const command = `apt-get update && apt-get install -y ${packages.join(" ")}`;
  const isRoot = process.getuid?.() === 0;
  if (!isRoot || !onPath("apt-get")) {
    return `the tests chosen drive system tools this machine lacks: ${names}.\nInstall them (Debian or Ubuntu) with:\n  sudo ${command.replace("&& apt-get", "&& sudo apt-get")}\nor choose test files that do not need them: npm test -- core store`;
  }
  console.log(`installing the system tools the tests need: ${names}`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  for (const argv of [["update"], ["install", "-y", ...packages]]) {
    const r = spawnSync("apt-get", argv, { stdio: "inherit", env });
    if (r.status !== 0) return `apt-get ${argv[0]} failed (exit ${r.status ?? r.signal}); install by hand: ${command}`;
  }
  const still = missingTools(files);
  return still.length === 0 ? null : `still missing after apt-get install: ${still.map((t) => t.tool).join(", ")}`;
}
