// Findings found by remote workers, and the `--fresh` flag, end to end through the CLI: a worker's
// result frame carries the finding (the `finding` field of the wire's result), the master records
// it once; `--fresh` runs content an earlier campaign explored and counts its findings again.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";
import { CLI } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { sha256 } from "../helpers/scratch.ts";

const TOKEN = "findings-test-token-0123456789";

function target(e: ExploreDir): string[] {
  e.seed("abort", "abort\n");
  e.seed("hang", "hang\n");
  e.seed("ok", "ok\n");
  return [e.script("t.sh", `case "$(cat "$1")" in\n  abort) echo "boom" >&2; kill -ABRT $$ ;;\n  hang) sleep 60 ;;\nesac`), "@@"];
}

test("a crash and a hang found by a remote worker are recorded by the master, once each", async () => {
  const e = new ExploreDir();
  try {
    const t = target(e);
    const master = e.start(["-j", "0", "--port", "0", "--bind", "127.0.0.1", "--token", TOKEN, "--max-idle", "1", "-t", "1"], t);
    const port = await master.port();
    const worker = spawn(process.execPath, [CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", TOKEN], { cwd: e.dir, stdio: ["ignore", "pipe", "pipe"] });
    let wout = "";
    worker.stdout!.setEncoding("utf8").on("data", (d: string) => (wout += d));
    const workerDone = new Promise<number | null>((resolve) => worker.on("close", (code) => resolve(code)));
    const m = await master.done;
    assert.equal(m.code, 0, master.output());
    assert.equal(await workerDone, 0, wout);
    const s = e.stats();
    assert.equal(s.observations, 3);
    assert.equal(s.executors.remote_workers, 1);
    assert.deepEqual(
      s.findings.inputs.map((f) => [f.input_hash, f.kind, f.signal, f.times_seen]).sort(),
      [[sha256("abort\n"), "crash", 6, 1], [sha256("hang\n"), "hang", null, 1]].sort(),
    );
    assert.deepEqual(s.findings.groups.map((g) => g.signature).sort(), ["signal 6 | boom", "timeout"]);
  } finally {
    e.cleanup();
  }
});

test("--fresh runs everything again and counts the findings again", () => {
  const e = new ExploreDir();
  try {
    const t = target(e);
    assert.equal(e.run(["-j", "2", "-t", "1", "--max-idle", "1"], t).code, 0);
    const again = e.run(["-j", "2", "-t", "1", "--max-idle", "1", "--fresh"], t);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    const s = e.stats();
    assert.equal(s.skipped_explored, 0);
    assert.equal(s.observations, 3);
    assert.deepEqual(s.findings.inputs.map((f) => f.times_seen), [2, 2]);
  } finally {
    e.cleanup();
  }
});
