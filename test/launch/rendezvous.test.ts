// The rendezvous in the shared directory (launch/rendezvous.ts), on a real file system: a record
// published by rank 0 is read by a waiting rank; a wait that runs out names the file and the wait;
// links and foreign files are refused, never followed; an earlier job's directory is replaced.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { awaitPublished, closeJobDir, jobDir, openJobDir, publish, recordPath, staleJobDirs, type PublishedT } from "../../src/launch/rendezvous.ts";
import { serverToken, tokenPath } from "../../src/net/token.ts";

const scratch = mkdtempSync(join(tmpdir(), "fuzzfleet-rendezvous-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
let n = 0;
const fresh = () => join(scratch, `base-${n++}`);
const rec = (over: Partial<PublishedT> = {}): PublishedT => ({ job: "job-1", rank: 0, role: "coordinator", host: "10.0.0.5", port: 9999, token: "file", ...over });
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
  const dir = openJobDir(base, "job-1");
  const token = serverToken({ outDir: dir });
  publish(dir, rec());
  assert.deepEqual(await waiting, rec());
  assert.equal(lines.length, 1);
  assert.match(lines[0]!, /^waiting up to 10s for the coordinator \(launcher rank 0\) to publish its address in .*\/launch\/job-[0-9a-f]{16}\/r0\.json …$/);
  assert.equal(statSync(tokenPath(dir)).mode & 0o777, 0o600);
  assert.equal(statSync(recordPath(dir, 0)).mode & 0o777, 0o600);
  assert.match(token.token, /^[0-9a-f]{32}$/);
  assert.deepEqual(readdirSync(dir).sort(), ["fuzzfleet.token", "r0.json"], "no temporary file left");
  closeJobDir(base, dir);
  assert.ok(!existsSync(join(base, "launch")), "the job's files and launch/ are gone");
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
  const dir = openJobDir(base, "job-1");
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
  assert.throws(() => openJobDir(other, "job-1"), /launch is a symbolic link; the launch never follows one/);
  await assert.rejects(awaitPublished(other, 0, wait()), /launch is a symbolic link/);
});

test("rank 0 replaces what an earlier job of the same id left, and reports other jobs' directories", () => {
  const base = fresh();
  const old = openJobDir(base, "job-1");
  publish(old, rec({ port: 1111 }));
  const stale = openJobDir(base, "job-0");
  const dir = openJobDir(base, "job-1");
  assert.deepEqual(readdirSync(dir), [], "a fresh directory: no old record, no old token");
  assert.deepEqual(staleJobDirs(base, dir).map((s) => s.path), [stale]);
  assert.equal(jobDir(base, "../../etc"), join(base, "launch", jobDir(base, "../../etc").split("/").at(-1)!), "a job id never reaches outside launch/");
  writeFileSync(join(dir, "unexpected"), "x");
  mkdirSync(join(dir, "sub"));
  assert.throws(() => openJobDir(base, "job-1"), /sub is not a regular file, which no launch wrote/);
});
