// A fleet without a shared filesystem (sweep): a worker started in its own mount namespace, the
// campaign's parent directory hidden under a tmpfs, joins with the same command as any worker,
// runs the generator in a scratch directory of its own and sends each chunk's failures back over
// the connection; and a worker whose connection is lost mid-transfer has its chunk swept again,
// nothing of the half-sent files booked. Real coordinator, real sockets, real SQLite, the audit
// of the books after each (test/helpers/books.ts).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { z } from "zod";
import { dial } from "../../src/net/connection.ts";
import { CoordinatorReply, HandshakeReply, PROTOCOL_VERSION, Welcome, Refuse, type Frame } from "../../src/net/messages.ts";
import { proveIdentity } from "../../src/generator/identity.ts";
import { assertBooksTrue, exitOwed } from "../helpers/books.ts";
import { Campaign, CLI, distributedTable, exited, startCoordinator, waitFor } from "../helpers/campaign.ts";
import { campaignToken } from "../helpers/wire.ts";

/**
 * `fuzzfleet worker --master …` in a mount namespace of its own where the campaign directory's
 * parent is an empty tmpfs: the worker cannot see a byte of the campaign. The token comes from
 * the environment, as on a host that does not share the directory.
 */
function hiddenWorker(c: Campaign, port: number, env: NodeJS.ProcessEnv = {}) {
  const child = spawn(
    "unshare",
    ["-m", "sh", "-c", 'mount -t tmpfs fuzzfleet-hidden "$1" && cd / && exec "$2" "$3" worker --master "$4" -j 1', "sh", dirname(c.dir), process.execPath, CLI, `127.0.0.1:${port}`],
    { env: { ...process.env, ...c.env, FUZZFLEET_TOKEN: campaignToken(c.outDir), ...env }, stdio: ["ignore", "pipe", "pipe"] },
  );
  return { child, result: exited(child) };
}

function chunkDirs(c: Campaign): string[] {
  try {
    return readdirSync(join(c.outDir, "tmp")).filter((n) => /^chunk-\d+$/.test(n));
  } catch {
    return [];
  }
}

test("a worker that cannot see the campaign directory sweeps with the same command: its failures travel back, land as artifacts, and the books audit clean", async () => {
  const c = new Campaign({ extra: distributedTable({ lease: 20 }), defaults: { chunk_minutes: 0.03, bootstrap_seeds: 200 }, costMs: 1 });
  try {
    const coord = await startCoordinator(c, ["--for", "10s"]);
    const worker = hiddenWorker(c, coord.port);
    const [rc, rw] = await Promise.all([coord.result, worker.result]);
    const said = rw.stdout + rw.stderr;
    assert.equal(rw.code, 0, said);
    assert.match(said, /attached to 127\.0\.0\.1:\d+ as #\d+ \(sweep session 1, generation 1, no shared directory \(nonce: ENOENT\): runs in its own, files sent over the connection\)/);
    assert.match(said, /file\(s\) [\d,]+ bytes sent/, "at least one chunk sent its failures back");
    assert.match(rc.stdout, /joined \(-j 1, from 127\.0\.0\.1:\d+\)(?: {2}known rates: [^\n]*)? {2}files: over the connection \(no shared directory\)/);
    assert.match(rc.stdout, /-j 1 +\d+ chunk\(s\), [\d,]+ seeds, files over the connection/);
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);

    const complete = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE status = 'complete'").n;
    assert.ok(complete >= 2, `chunks completed over the connection: ${complete}`);
    const failures = c.query<{ artifact_dir: string | null }>("SELECT artifact_dir FROM failure");
    assert.ok(failures.length >= 1, "the planted generator's failures were recorded");
    for (const f of failures) {
      assert.ok(f.artifact_dir !== null, "every failure has its artifacts");
      const dir = join(c.outDir, f.artifact_dir);
      assert.ok(existsSync(join(dir, "meta.json")), `${dir} holds the meta.json the worker sent`);
    }
    assertBooksTrue(c, "a worker without the shared directory");
    assert.deepEqual(chunkDirs(c), [], "no landing directory is left behind");
  } finally {
    c.cleanup();
  }
});

test("a connection lost mid-transfer: the chunk is swept again, the half-sent files are never booked; a short account is not booked either", async () => {
  const c = new Campaign({ extra: distributedTable({ lease: 20 }), defaults: { chunk_minutes: 0.03, bootstrap_seeds: 200 }, costMs: 1 });
  try {
    const coord = await startCoordinator(c, ["--for", "12s"]);
    const token = campaignToken(c.outDir);

    // A worker double that says it does not see the shared directory and sends part of a file.
    const conn = await dial("127.0.0.1", coord.port, 5000);
    const first = await conn.request({ type: "hello", token, protocol: PROTOCOL_VERSION, host: "partial", jobs: 1, slots: 2 }, HandshakeReply, 10_000);
    assert.equal(first.type, "challenge");
    const prove = { ...proveIdentity(first as Extract<Frame, { type: "challenge" }>), nonce: null, shared_dir: false };
    const welcome = await conn.request(prove, z.discriminatedUnion("type", [Welcome, Refuse]), 10_000);
    assert.equal(welcome.type, "welcome", JSON.stringify(welcome));
    assert.deepEqual((welcome as Extract<Frame, { type: "welcome" }>).transfer, {
      results: "",
      max_files: 10_000,
      max_bytes: 2 * 2 ** 30,
      max_file_bytes: 512 * 2 ** 20,
      piece_bytes: 2 ** 20,
    });
    const assign = await conn.request({ type: "want", slots: 2 }, CoordinatorReply, 10_000);
    assert.equal(assign.type, "assign", JSON.stringify(assign));
    const [cut, short] = (assign as Extract<Frame, { type: "assign" }>).chunks;
    assert.ok(cut && short, "two chunks for two slots");

    // Chunk `short`: one whole file, then a done whose account claims two.
    const body = Buffer.from('{"seed": 1}');
    const whole = await conn.request(
      {
        type: "put",
        unit: short.chunk_id,
        path: `failures/${short.seed_from}/meta.json`,
        size: body.length,
        offset: 0,
        data: body.toString("base64"),
        sha256: (await import("node:crypto")).createHash("sha256").update(body).digest("hex"),
      },
      CoordinatorReply,
      10_000,
    );
    assert.deepEqual(whole, { type: "ack", drain: false, known: [cut.chunk_id, short.chunk_id], note: null });
    assert.ok(existsSync(join(c.outDir, "tmp", `chunk-${short.chunk_id}`, "failures", String(short.seed_from), "meta.json")), "the piece landed in the chunk's scratch directory");
    const shortDone = await conn.request(
      { type: "done", chunk_id: short.chunk_id, elapsed: 0.5, rc: 1, outcome: "complete", error: null, files: { count: 2, bytes: body.length + 5, wrote: "results" } },
      CoordinatorReply,
      10_000,
    );
    assert.equal(shortDone.type === "ack" ? shortDone.note : shortDone.type, "aborted", "a short account is not booked");
    assert.ok(!existsSync(join(c.outDir, "tmp", `chunk-${short.chunk_id}`, "failures")), "what landed of it is removed");

    // Chunk `cut`: the first piece of a larger file, then the connection is gone.
    const piece = await conn.request(
      { type: "put", unit: cut.chunk_id, path: `failures/${cut.seed_from}/input.min.txt`, size: 100, offset: 0, data: Buffer.from("push 0\n").toString("base64"), sha256: null },
      CoordinatorReply,
      10_000,
    );
    assert.equal(piece.type, "ack");
    assert.ok(existsSync(join(c.outDir, "tmp", `chunk-${cut.chunk_id}`, "failures", String(cut.seed_from), "input.min.txt")), "the first piece landed");
    conn.destroy();
    await waitFor("the cut chunk to be taken back", () => (c.one<{ status: string }>("SELECT status FROM chunk WHERE id = ?", cut.chunk_id).status === "reissued" ? true : undefined), 10_000);
    assert.ok(!existsSync(join(c.outDir, "tmp", `chunk-${cut.chunk_id}`)), "the half-sent file is removed with its landing directory");

    // A real worker without the shared directory sweeps the rest, the two ranges included.
    const worker = hiddenWorker(c, coord.port);
    const [rc, rw] = await Promise.all([coord.result, worker.result]);
    assert.equal(rw.code, 0, rw.stdout + rw.stderr);
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assert.match(rc.stdout, /the files of chunk \d+ are not booked \(the worker sent 2 file\(s\) of 16 bytes, 1 of 11 bytes landed\); it is swept again/);
    for (const ch of [cut, short]) {
      const row = c.one<{ status: string }>("SELECT status FROM chunk WHERE id = ?", ch.chunk_id);
      assert.notEqual(row.status, "complete", `chunk ${ch.chunk_id} was never booked complete`);
      assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure_seed WHERE chunk_id = ?", ch.chunk_id).n, 0, `nothing of chunk ${ch.chunk_id} was booked`);
      const swept = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE status = 'complete' AND seed_from <= ? AND seed_to >= ?", ch.seed_from, ch.seed_from).n;
      assert.equal(swept, 1, `the range of chunk ${ch.chunk_id} was swept again, once`);
    }
    assertBooksTrue(c, "after a transfer cut short");
    assert.deepEqual(chunkDirs(c), []);
  } finally {
    c.cleanup();
  }
});
