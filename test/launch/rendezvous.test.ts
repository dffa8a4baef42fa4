// The rendezvous in the shared directory (launch/rendezvous.ts), on a real file system: a record
// published by rank 0 is read by a waiting rank; a wait that runs out names the file and the wait;
// links and foreign files are refused, never followed; only the rank 0 that holds the leader's
// lock touches launch/, and it replaces what a dead job of the same id left.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { awaitPublished, closeJobDir, jobDir, openJobDir, publish, recordPath, staleJobDirs, type JobLead, type LeadOutcome, type PublishedT } from "../../src/launch/rendezvous.ts";
import { serverToken, tokenPath } from "../../src/net/token.ts";

const scratch = mkdtempSync(join(tmpdir(), "fuzzfleet-rendezvous-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
let n = 0;
const fresh = () => join(scratch, `base-${n++}`);
const rec = (over: Partial<PublishedT> = {}): PublishedT => ({ job: "job-1", rank: 0, role: "coordinator", host: "10.0.0.5", port: 9999, token: "file", ...over });
const lines: string[] = [];
const leadOf = (base: string, jobId: string): LeadOutcome => openJobDir(base, jobId, { command: "coordinate", port: 9999, forceUnlock: false, log: (l) => lines.push(l) });
/** Rank 0's lead of `jobId` under `base`, which it must get. */
function lead(base: string, jobId = "job-1"): JobLead {
  const o = leadOf(base, jobId);
  assert.equal(o.kind, "lead", JSON.stringify(o));
  return (o as { lead: JobLead }).lead;
}
/** What is below `dir`, each file with its bytes: a refused rank 0 must leave it exactly so. */
function tree(dir: string, out: Record<string, string> = {}): Record<string, string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    out[path] = e.isFile() ? readFileSync(path, "utf8") : e.isDirectory() ? "<dir>" : "<other>";
    if (e.isDirectory()) tree(path, out);
  }
  return out;
}
const lockFile = (base: string) => join(base, "launch", "fuzzfleet.lock");
const wait = (o: { jobId?: string; waitSeconds?: number; signal?: AbortSignal; log?: (l: string) => void } = {}) => ({
  jobId: o.jobId ?? "job-1",
  waitSeconds: o.waitSeconds ?? 10,
  signal: o.signal ?? new AbortController().signal,
  log: o.log ?? (() => undefined),
  who: "the coordinator",
});

test("a rank that starts first waits, says so once, and reads the record rank 0 publishes; the token file beside it is 0600", async () => {
  const base = fresh();
  const lines: string[] = [];
  const waiting = awaitPublished(base, 0, wait({ log: (l) => lines.push(l) }));
  await new Promise((r) => setTimeout(r, 600));
  const l = lead(base);
  const dir = l.dir;
  const token = serverToken({ outDir: dir });
  publish(dir, rec());
  assert.deepEqual(await waiting, rec());
  assert.equal(lines.length, 1);
  assert.match(lines[0]!, /^waiting up to 10s for the coordinator \(launcher rank 0\) to publish its address in .*\/launch\/job-[0-9a-f]{16}\/r0\.json …$/);
  assert.equal(statSync(tokenPath(dir)).mode & 0o777, 0o600);
  assert.equal(statSync(recordPath(dir, 0)).mode & 0o777, 0o600);
  assert.match(token.token, /^[0-9a-f]{32}$/);
  assert.deepEqual(readdirSync(dir).sort(), ["fuzzfleet.token", "r0.json"], "no temporary file left");
  closeJobDir(base, l);
  assert.ok(!existsSync(join(base, "launch")), "the job's files, the leader's lock and launch/ are gone");
});

test("a wait that runs out names the file, the wait and what to check", async () => {
  const base = fresh();
  await assert.rejects(awaitPublished(base, 0, wait({ waitSeconds: 1 })), (err: Error) => {
    assert.match(err.message, /^the coordinator published no address in .*\/launch\/job-[0-9a-f]{16}\/r0\.json within 1s \(--wait\): is launcher rank 0 running, and is this the same shared directory/);
    return true;
  });
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 200);
  assert.equal(await awaitPublished(base, 0, wait({ waitSeconds: 60, signal: controller.signal })), null, "Ctrl-C ends the wait at once");
});

test("a record of another job, a link or a file that is no record is never taken", async () => {
  const base = fresh();
  const dir = lead(base).dir;
  publish(dir, rec({ job: "job-0" }));
  await assert.rejects(awaitPublished(base, 0, wait({ waitSeconds: 0.3 })), /published no address/, "another job's record is not this job's");
  rmSync(recordPath(dir, 0));
  writeFileSync(join(scratch, "elsewhere.json"), JSON.stringify(rec()));
  symlinkSync(join(scratch, "elsewhere.json"), recordPath(dir, 0));
  await assert.rejects(awaitPublished(base, 0, wait()), /r0\.json is a symbolic link; a launch record is never followed/);
  rmSync(recordPath(dir, 0));
  writeFileSync(recordPath(dir, 0), JSON.stringify({ ...rec(), host: "evil; rm -rf /" }));
  await assert.rejects(awaitPublished(base, 0, wait()), /r0\.json is no launch record \(host: a host name or an IP address\)/);
  writeFileSync(recordPath(dir, 0), JSON.stringify({ ...rec(), extra: 1 }));
  await assert.rejects(awaitPublished(base, 0, wait()), /is no launch record/);
  writeFileSync(recordPath(dir, 0), "{half");
  await assert.rejects(awaitPublished(base, 0, wait()), /is not JSON/);
  // A launch/ directory that is a link is refused too, by rank 0 and by the readers.
  const other = fresh();
  mkdirSync(other);
  symlinkSync(scratch, join(other, "launch"));
  assert.throws(() => leadOf(other, "job-1"), /launch is a symbolic link; the launch never follows one/);
  await assert.rejects(awaitPublished(other, 0, wait()), /launch is a symbolic link/);
});

test("rank 0 replaces what a dead job of the same id left, and reports other jobs' directories", () => {
  const base = fresh();
  // Dead jobs: their rank 0 ended without removing its directory, and its lock is gone or a dead pid's.
  const old = lead(base, "job-1");
  publish(old.dir, rec({ port: 1111 }));
  old.lock.release();
  const stale = lead(base, "job-0");
  stale.lock.release();
  const dir = lead(base, "job-1").dir;
  assert.deepEqual(readdirSync(dir), [], "a fresh directory: no old record, no old token");
  assert.deepEqual(staleJobDirs(base, dir).map((s) => s.path), [stale.dir]);
  assert.equal(jobDir(base, "../../etc"), join(base, "launch", jobDir(base, "../../etc").split("/").at(-1)!), "a job id never reaches outside launch/");
  writeFileSync(join(dir, "unexpected"), "x");
  mkdirSync(join(dir, "sub"));
  rmSync(lockFile(base));
  assert.throws(() => leadOf(base, "job-1"), /sub is not a regular file, which no launch wrote/);
  assert.ok(!existsSync(lockFile(base)), "a rank 0 that could not make the job's directory lets the lock go");
});

test("a rank 0 refused the leader's lock leaves launch/ exactly as it was and names the holder and its job", () => {
  const base = fresh();
  const theirs = lead(base, "job-1");
  serverToken({ outDir: theirs.dir });
  publish(theirs.dir, rec());
  // The running rank 0 is on another host: always live, however old its lock.
  writeFileSync(lockFile(base), "node-7 4242 2026-01-01T00:00:00Z coordinate 9999\n");
  const before = tree(base);
  for (const id of ["job-1", "job-2"]) {
    const o = leadOf(base, id);
    assert.equal(o.kind, "held");
    const by = (o as Extract<LeadOutcome, { kind: "held" }>).by;
    assert.deepEqual([by.holder.host, by.holder.pid, by.holder.started, by.holder.port, by.jobId, by.lockPath], ["node-7", 4242, "2026-01-01T00:00:00Z", 9999, "job-1", lockFile(base)]);
    assert.deepEqual(tree(base), before, `${id}: nothing created, changed or removed`);
  }
  // A holder that has not published yet (no record at the port its lock names) names no job.
  writeFileSync(lockFile(base), "node-7 4243 2026-01-01T00:00:01Z coordinate 1234\n");
  const early = leadOf(base, "job-1") as Extract<LeadOutcome, { kind: "held" }>;
  assert.deepEqual([early.kind, early.by.holder.pid, early.by.jobId], ["held", 4243, null]);
  writeFileSync(lockFile(base), "node-7 4242 2026-01-01T00:00:00Z coordinate 9999\n");
  // The holder ends: its directory goes only while the lock is still its own.
  closeJobDir(base, theirs);
  assert.deepEqual(tree(base), before, "a lead taken over leaves the new holder's job directory and lock");
});

test("a lock left by a dead rank 0 of this host, or naming this very pid (a restarted container), is taken over", () => {
  const host = hostname().replace(/\s+/g, "_");
  const dead = spawnSync(process.execPath, ["-e", ""]).pid!;
  for (const pid of [dead, process.pid]) {
    const base = fresh();
    const old = lead(base);
    publish(old.dir, rec({ port: 1111 }));
    writeFileSync(lockFile(base), `${host} ${pid} 2026-01-01T00:00:00Z coordinate 1111\n`);
    lines.length = 0;
    const l = lead(base);
    assert.deepEqual(readdirSync(l.dir), [], `pid ${pid}: the dead job's record is gone`);
    assert.match(readFileSync(lockFile(base), "utf8"), new RegExp(`^${host} ${process.pid} \\S+ coordinate 9999\n$`));
    if (pid === process.pid) assert.match(lines.join("\n"), /names this host and this process's pid, so an earlier run of this container left it: taking it over/);
    closeJobDir(base, l);
    assert.ok(!existsSync(join(base, "launch")));
  }
});
