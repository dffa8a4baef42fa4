// `fuzzfleet launch` refuses what cannot work before anything starts, naming the value and the
// fix (exit 2), and a rank whose master never publishes gives up after --wait naming the file
// (exit 4). The compiled CLI, run as a user runs it, with the launchers' variables it would get.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { CLI } from "../helpers/campaign.ts";

const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-launch-usage-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const CLEAN: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(OMPI_|PMI|PMIX_|SLURM_|FUZZFLEET_|JOB_COMPLETION_INDEX|KUBERNETES_)/.test(k)));

function launch(args: string[], env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(process.execPath, [CLI, "launch", ...args], { cwd: dir, env: { ...CLEAN, ...env }, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, out: r.stdout + r.stderr };
}
const RANK1 = { OMPI_COMM_WORLD_RANK: "1", OMPI_COMM_WORLD_SIZE: "2", OMPI_MCA_ess_base_jobid: "77" };

test("what launch cannot run is refused with exit 2, naming the value and the fix", () => {
  const cases: [string[], NodeJS.ProcessEnv, RegExp][] = [
    [["--", "fuzz"], RANK1, /launch wants `-- sweep …` or `-- explore …` after its own options \(got 'fuzz'\)/],
    [["--", "sweep", "--for", "1h", "--port", "9"], RANK1, /--port is set by launch for each rank: leave it out of the sweep options \(give launch --port\)/],
    [["--", "explore", "-i", "s", "-o", "c", "--join=h:1", "--", "t"], RANK1, /--join is set by launch for each rank/],
    [["--masters", "2", "--", "sweep"], RANK1, /--masters is for explore: a sweep has one coordinator/],
    [["--", "sweep"], { ...RANK1, OMPI_COMM_WORLD_SIZE: "two" }, /OMPI_COMM_WORLD_SIZE is 'two', not a process count/],
    [["--", "sweep"], { OMPI_COMM_WORLD_RANK: "0", OMPI_COMM_WORLD_SIZE: "1" }, /Open MPI started 1 rank\(s\): a sweep with a coordinator needs at least one worker too/],
    [["--masters", "3", "--", "explore", "-i", "s", "-o", "c", "--", "t"], RANK1, /Open MPI started 2 rank\(s\): an explore with --masters 3 needs at least 3; start more ranks or lower --masters/],
    [["--", "sweep"], { PMI_RANK: "1", PMI_SIZE: "2" }, /MPI \(PMI\) gives no job id: pass --job-id ID \(or set FUZZFLEET_JOB_ID\)/],
    [["--launcher", "slurm", "--", "sweep"], {}, /--launcher slurm: none of SLURM_PROCID is set/],
    [["--", "explore", "-i", "s", "--", "t"], RANK1, /launch -- explore needs -o CORPUS_DIR/],
    [
      ["--masters", "2", "--", "explore", "-i", "s", "-o", "c", "-j", "0", "--", "t"],
      { ...RANK1, OMPI_COMM_WORLD_SIZE: "3" },
      /started 3 rank\(s\): with --masters 2 that leaves 1 worker\(s\), so master rank 1 and up would have none, and -j 0 gives them no local slot either: start at least 4 ranks, or give the masters local slots \(-j 1\)/,
    ],
  ];
  for (const [args, env, message] of cases) {
    const r = launch(args, env);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.out}`);
    assert.match(r.out, message);
  }
});

test("a worker rank whose coordinator never publishes gives up after --wait, naming the file (exit 4)", () => {
  const r = launch(["--wait", "2", "--", "sweep", "--for", "1m"], RANK1);
  assert.equal(r.code, 4, r.out);
  assert.match(r.out, /\[rank 1\] Open MPI: rank 1 of 2, a worker \(job 77\)/);
  assert.match(r.out, /\[rank 1\] waiting up to 2s for the coordinator \(launcher rank 0\) to publish its address in .*\/fuzzfleet-out\/launch\/job-[0-9a-f]{16}\/r0\.json …/);
  assert.match(r.out, /fuzzfleet: the coordinator published no address in .*r0\.json within 2s \(--wait\): is launcher rank 0 running/);
});

test("rank 0 of an explore reports the work directory an earlier job left, with --resume and the rm that removes it", () => {
  const seeds = join(dir, "seeds");
  const stale = join(dir, "corpus", ".fuzzfleet", `work-${"c".repeat(64)}`);
  mkdirSync(seeds, { recursive: true });
  writeFileSync(join(seeds, "one"), "1");
  mkdirSync(stale, { recursive: true });
  writeFileSync(join(stale, "state.json"), "{}");
  const r = launch(["--bind", "127.0.0.1", "--", "explore", "-i", seeds, "-o", join(dir, "corpus"), "-j", "1", "--max-idle", "0.5", "--", "/bin/true", "@@"], {
    OMPI_COMM_WORLD_RANK: "0",
    OMPI_COMM_WORLD_SIZE: "2",
    OMPI_MCA_ess_base_jobid: "78",
  });
  assert.equal(r.code, 0, r.out);
  // Said by the explore master itself, as a plain explore says it.
  assert.match(r.out, /^stale state: 1 earlier campaign\(s\) on this corpus did not end cleanly/m);
  assert.ok(r.out.includes(`\n  ${stale} (last written `), r.out);
  assert.ok(r.out.includes(`continue it with --resume ${"c".repeat(64)}, or remove it with: rm -rf -- ${stale}`), r.out);
  assert.ok(existsSync(stale), "reported, never removed behind the user's back");
  assert.ok(!existsSync(join(dir, "corpus", ".fuzzfleet", "launch")), "the rendezvous is gone after the job");
});

test("a job id over 256 characters, or with a control character, is refused in one line naming the variable and the limit (exit 2), the value escaped", () => {
  const long = "j".repeat(300);
  const cases: [string[], NodeJS.ProcessEnv, RegExp][] = [
    [[], { OMPI_COMM_WORLD_RANK: "0", OMPI_COMM_WORLD_SIZE: "2", FUZZFLEET_JOB_ID: long }, /^fuzzfleet: FUZZFLEET_JOB_ID is 300 characters long \('j{40}…'\), over the limit of 256 for a job id: give every rank of the job the same shorter id$/m],
    [[], { OMPI_COMM_WORLD_RANK: "0", OMPI_COMM_WORLD_SIZE: "2", OMPI_MCA_ess_base_jobid: long }, /^fuzzfleet: OMPI_MCA_ess_base_jobid is 300 characters long \('j{40}…'\), over the limit of 256 for a job id: pass --job-id ID \(or set FUZZFLEET_JOB_ID\)/],
    [["--job-id", long], RANK1, /^fuzzfleet: --job-id is 300 characters long \('j{40}…'\), over the limit of 256 for a job id/],
    [[], { ...RANK1, OMPI_MCA_ess_base_jobid: "77\x1b[2J\nforged line" }, /^fuzzfleet: OMPI_MCA_ess_base_jobid '77\\x1b\[2J\\x0aforged line' holds a control character: a job id is printable text of at most 256 characters; pass --job-id ID/],
    [[], { SLURM_PROCID: "1", SLURM_NTASKS: "2", SLURM_JOB_ID: "9\u202e1", SLURM_STEP_ID: "0" }, /^fuzzfleet: SLURM_JOB_ID\.SLURM_STEP_ID '9\\u202e1\.0' holds a control character/],
    [["--job-id", "a\tb"], RANK1, /^fuzzfleet: --job-id 'a\\x09b' holds a control character/],
    [["--launcher", "kubernetes"], { JOB_COMPLETION_INDEX: "1", FUZZFLEET_JOB_ID: "x\x07" }, /^fuzzfleet: FUZZFLEET_JOB_ID 'x\\x07' holds a control character/],
  ];
  for (const [args, env, message] of cases) {
    const r = launch([...args, "--wait", "1", "--", "sweep", "--for", "1m"], env);
    assert.equal(r.code, 2, `${JSON.stringify(env)}: ${r.out}`);
    assert.match(r.out, message);
    assert.equal(r.out.trimEnd().split("\n").length, 1, `one line:\n${r.out}`);
    assert.doesNotMatch(r.out, /[\x00-\x08\x0b-\x1f\x7f\u202e]/, "nothing raw reaches the terminal");
  }
});
