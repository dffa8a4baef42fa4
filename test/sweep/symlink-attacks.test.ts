// Through the real CLI: a generator that replaces {out} with a symlink under `run`, and a worker
// holding the token that replaces its chunk's scratch directory with one before it reports done
// (complete, rc 1) to a real `coordinate`. The link's target is never moved, copied or deleted,
// nothing of it is recorded, and the refusal is reported on the console.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { Campaign, distributedTable, PLANTED, startCoordinator, waitFor } from "../helpers/campaign.ts";
import { campaignToken, fakeWorker, send } from "../helpers/wire.ts";
import { snapshot, writeFailure } from "./ingest-fixture.ts";

/** A directory of the coordinator's host, outside the campaign, laid out like a chunk's results. */
function victim(): { dir: string; before: Record<string, string>; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-victim-"));
  writeFailure(dir, 3, { seed: 3, bucket: "crash" }, { "input.min.txt": "victim's", "report.txt": "victim's report" });
  writeFailure(dir, 4, { seed: 4, bucket: "crash" }, { "input.min.txt": "another" });
  mkdirSync(join(dir, "quarantine"));
  writeFileSync(join(dir, "quarantine", "5.txt"), "victim's quarantined test");
  return { dir, before: snapshot(dir, true), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

const refusal = (path: string) => new RegExp(`${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} is a symbolic link to '[^']+'; nothing is followed through a symlink`);

test("a generator that replaces {out} with a symlink: the target is untouched, nothing is recorded, the refusal is reported", () => {
  const v = victim();
  const c = new Campaign({
    defaults: { bootstrap_seeds: 20 },
    generator: `[generator]
command = ["sh", "-c", "ln -s \\"$VICTIM\\" \\"$3\\"; sleep 0.3; exit 1", "generator", "{seed_from}", "{count}", "{out}"]
identity = [${JSON.stringify(PLANTED)}]
`,
  });
  try {
    const r = c.cli(["run", "--for", "5s"], { env: { VICTIM: v.dir } });
    // The chunk is aborted (its finds cannot be known) and the lane disabled: every lane is, so exit 4.
    assert.equal(r.code, 4, r.stdout + r.stderr);
    assert.match(r.stdout, /lane 'small' disabled for the rest of this session: the chunk's results could not be read/);
    assert.deepEqual(snapshot(v.dir, true), v.before, "the symlink's target is exactly as it was");
    const chunk = c.one<{ id: number }>("SELECT MIN(id) AS id FROM chunk").id;
    assert.match(r.stdout, refusal(join(c.outDir, "tmp", `chunk-${chunk}`)));
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure").n, 0, "no failure was taken from the link's target");
    assert.deepEqual(readdirSync(join(c.outDir, "failures")), []);
    assert.ok(readdirSync(join(c.outDir, "malformed")).includes(`chunk-${chunk}.txt`), "a note says why the chunk was refused");
    assert.deepEqual(c.query("SELECT status FROM chunk"), [{ status: "aborted:results refused" }]);
    assert.equal(c.one<{ cursor: number }>("SELECT cursor FROM lane").cursor, 1, "no seed of the refused chunk is covered");
    assert.equal(c.one<{ status: string }>("SELECT status FROM session").status, "disabled", "the session stopped because every lane got disabled");
  } finally {
    c.cleanup();
    v.cleanup();
  }
});

test("a worker with the token that swaps its scratch directory for a symlink and reports done: the coordinator touches nothing outside the campaign", async () => {
  const v = victim();
  const c = new Campaign({ extra: distributedTable(), defaults: { bootstrap_seeds: 20 } });
  try {
    const coord = await startCoordinator(c, ["--for", "5s"]);
    const attacker = await fakeWorker(coord.port, campaignToken(c.outDir), "attacker");
    const reply = (await send(attacker.conn, { type: "want", slots: 1 })) as { type: string; chunks?: { chunk_id: number; scratch_dir: string }[] };
    assert.equal(reply.type, "assign", JSON.stringify(reply));
    const chunk = reply.chunks![0]!;
    assert.equal(chunk.scratch_dir, join(c.outDir, "tmp", `chunk-${chunk.chunk_id}`));
    symlinkSync(v.dir, chunk.scratch_dir);
    const ack = (await send(attacker.conn, { type: "done", chunk_id: chunk.chunk_id, elapsed: 1, rc: 1, outcome: "complete", error: null })) as { type: string; note: string };
    // The ack is released only after the chunk's books were committed: aborted, its seeds swept again.
    assert.equal(ack.type, "ack");
    assert.equal(ack.note, "aborted");
    assert.equal(c.one<{ status: string }>("SELECT status FROM chunk WHERE id = ?", chunk.chunk_id).status, "aborted:results refused");
    assert.equal(c.one<{ cursor: number }>("SELECT cursor FROM lane").cursor, 1);
    assert.deepEqual(snapshot(v.dir, true), v.before, "the victim directory is exactly as it was");
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure").n, 0);
    assert.deepEqual(readdirSync(join(c.outDir, "failures")), []);
    await waitFor("the refusal on the coordinator's console", () => (refusal(chunk.scratch_dir).test(coord.output()) ? true : undefined));
    // The lane is disabled on the only worker attached: the sweep stopped sweeping, as `run`'s above.
    // The coordinator drains and stops it; it acknowledges, so the exit is 4, not 70.
    let stop = (await send(attacker.conn, { type: "heartbeat", ids: [] })) as { type: string; token?: string };
    while (stop.type !== "stop") stop = (await send(attacker.conn, { type: "heartbeat", ids: [] })) as { type: string; token?: string };
    assert.deepEqual(await send(attacker.conn, { type: "stop_ack", token: stop.token! }), { type: "bye", reason: "stopped" });
    const rc = await coord.result;
    assert.equal(rc.code, 4, rc.stdout + rc.stderr);
    assert.match(rc.stdout, /every lane is disabled on every worker attached: draining — the sweep stopped sweeping/);
    assert.equal(c.one<{ status: string }>("SELECT status FROM session").status, "disabled");
    assert.deepEqual(snapshot(v.dir, true), v.before, "and still so after the coordinator removed the chunk's scratch");
  } finally {
    c.cleanup();
    v.cleanup();
  }
});
