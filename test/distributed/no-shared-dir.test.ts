// A fleet without a shared filesystem (sweep): a worker started in its own mount namespace, the
// campaign's parent directory hidden under a tmpfs, joins with the same command as any worker,
// runs the generator in a scratch directory of its own and sends each chunk's failures back over
// the connection; and a worker whose connection is lost mid-transfer has its chunk swept again,
// nothing of the half-sent files booked; and one in its own network namespace (a veth pair, the
// test's own 10.231.N.0/30) that brings its own copy of the generator. Real coordinator, real
// sockets, real SQLite, the audit of the books after each (test/helpers/books.ts). Needs root
// (unshare, mount, ip netns), as CI runs.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { appendFileSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { z } from "zod";
import { createHash } from "node:crypto";
import { dial, type Connection } from "../../src/net/connection.ts";
import { CoordinatorReply, HandshakeReply, PROTOCOL_VERSION, Welcome, Refuse, type AssignedChunk, type Frame } from "../../src/net/messages.ts";
import { proveIdentity } from "../../src/config/identity.ts";
import { assertBooksTrue, exitOwed } from "../helpers/books.ts";
import { Campaign, CLI, distributedTable, exited, PLANTED, PLANTED_FORMS, start, startCoordinator, waitFor } from "../helpers/campaign.ts";
import { campaignToken } from "../helpers/wire.ts";
import { ownNetwork } from "./partition-network.ts";

/**
 * `fuzzfleet worker --master …` in a mount namespace of its own where the campaign directory's
 * parent is an empty tmpfs: the worker cannot see a byte of the campaign. The token comes from
 * the environment, as on a host that does not share the directory.
 */
function hiddenWorker(c: Campaign, port: number, env: NodeJS.ProcessEnv = {}, args: string[] = []) {
  const child = spawn(
    "unshare",
    ["-m", "sh", "-c", 'mount -t tmpfs fuzzfleet-hidden "$1" && cd / && shift && exec "$@"', "sh", dirname(c.dir), process.execPath, CLI, "worker", "--master", `127.0.0.1:${port}`, "-j", "1", ...args],
    { env: { ...process.env, ...c.env, FUZZFLEET_TOKEN: campaignToken(c.outDir), ...env }, stdio: ["ignore", "pipe", "pipe"] },
  );
  return { child, result: exited(child) };
}

/** A worker double that says it does not see the shared directory (its identity is this host's: the generator lies outside the campaign). */
async function transferDouble(port: number, token: string): Promise<{ conn: Connection; welcome: Extract<Frame, { type: "welcome" }> }> {
  const conn = await dial("127.0.0.1", port, 5000);
  const first = await conn.request({ type: "hello", token, protocol: PROTOCOL_VERSION, host: "double", jobs: 1, slots: 2 }, HandshakeReply, 10_000);
  assert.equal(first.type, "challenge");
  const prove = { ...proveIdentity(first as Extract<Frame, { type: "challenge" }>), nonce: null, shared_dir: false };
  const welcome = await conn.request(prove, z.discriminatedUnion("type", [Welcome, Refuse]), 10_000);
  assert.equal(welcome.type, "welcome", JSON.stringify(welcome));
  return { conn, welcome: welcome as Extract<Frame, { type: "welcome" }> };
}

async function twoChunks(conn: Connection): Promise<AssignedChunk[]> {
  const assign = await conn.request({ type: "want", slots: 2 }, CoordinatorReply, 10_000);
  assert.equal(assign.type, "assign", JSON.stringify(assign));
  const chunks = (assign as Extract<Frame, { type: "assign" }>).chunks;
  assert.equal(chunks.length, 2, "two chunks for two slots");
  return chunks;
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
    assert.deepEqual(c.query<{ files: string }>("SELECT files FROM worker"), [{ files: "transfer" }], "the store records the worker's mode, for the dashboard and /metrics");
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
    const { conn, welcome } = await transferDouble(coord.port, token);
    assert.deepEqual(welcome.transfer, {
      results: "",
      max_files: 10_000,
      max_bytes: 2 * 2 ** 30,
      max_file_bytes: 512 * 2 ** 20,
      piece_bytes: 2 ** 20,
    });
    const [cut, short] = await twoChunks(conn);

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
        sha256: createHash("sha256").update(body).digest("hex"),
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

test("a long transfer keeps every lease the worker holds alive without a heartbeat; when the puts stop, the leases run out", async () => {
  const c = new Campaign({ extra: distributedTable({ lease: 2 }), defaults: { chunk_minutes: 0.5, bootstrap_seeds: 50 }, costMs: 1 });
  try {
    const coord = await startCoordinator(c, ["--for", "40s"]);
    const { conn } = await transferDouble(coord.port, campaignToken(c.outDir));
    const [sending, other] = await twoChunks(conn);
    const status = (id: number) => c.one<{ status: string }>("SELECT status FROM chunk WHERE id = ?", id).status;
    // One byte every 400 ms for 6 s: three leases long, and not one heartbeat (the file is never finished).
    const size = 16;
    const started = Date.now();
    for (let offset = 0; offset < size - 1; offset++) {
      const piece = await conn.request(
        { type: "put", unit: sending.chunk_id, path: `failures/${sending.seed_from}/input.min.txt`, size, offset, data: Buffer.from("x").toString("base64"), sha256: null },
        CoordinatorReply,
        10_000,
      );
      assert.deepEqual(piece, { type: "ack", drain: false, known: [sending.chunk_id, other.chunk_id], note: null }, `piece ${offset}`);
      await new Promise((r) => setTimeout(r, 400));
    }
    assert.ok(Date.now() - started >= 3 * 2000, "the transfer outlasted the lease three times over");
    assert.equal(status(sending.chunk_id), "leased");
    assert.equal(status(other.chunk_id), "leased", "the chunk not being sent is kept alive too");
    // Silence now: the lease scan takes both back within a lease or so.
    await waitFor("both chunks to be reissued once the puts stopped", () => (status(sending.chunk_id) === "reissued" && status(other.chunk_id) === "reissued" ? true : undefined), 10_000);
    conn.destroy();
    coord.child.kill("SIGINT");
    const rc = await coord.result;
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assertBooksTrue(c, "after leases kept by a transfer");
  } finally {
    c.cleanup();
  }
});


test("a worker on its own network and filesystem, with its own copy of the generator: a copy that differs is refused (exit 3, naming it), the same copy sweeps and the books audit clean", async () => {
  // The generator lives inside the campaign directory, so the worker must bring its own copy.
  const c = new Campaign({
    extra: distributedTable({ lease: 20 }),
    defaults: { chunk_minutes: 0.03, bootstrap_seeds: 200 },
    costMs: 1,
    generator: `[generator]
command = ["node", "gen/planted.mjs", "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"]
identity = ["gen/*.mjs"]
`,
  });
  const own = mkdtempSync(join("/var/tmp", "fuzzfleet-own-"));
  const planted = dirname(PLANTED);
  for (const dir of [join(c.dir, "gen"), join(own, "gen")]) {
    mkdirSync(dir);
    for (const f of readdirSync(planted).filter((n) => n.endsWith(".mjs"))) copyFileSync(join(planted, f), join(dir, f));
  }
  const net = ownNetwork(231);
  try {
    const coord = start(c, ["coordinate", "--for", "8s", "--bind", net.host]);
    const port = await waitFor("the coordinator to listen on the veth address", () => {
      const m = new RegExp(`listening on ${net.host.replace(/\./g, "\\.")}:(\\d+)[^]*watch it: `).exec(coord.output());
      if (!m && coord.child.exitCode !== null) throw new Error(`coordinate exited early:\n${coord.output()}`);
      return m ? Number(m[1]) : undefined;
    }, 60_000);
    const remote = (cwd: string) => {
      const child = spawn(
        "ip",
        ["netns", "exec", net.ns, "unshare", "-m", "sh", "-c", 'mount -t tmpfs fuzzfleet-hidden "$1" && cd "$2" && exec "$3" "$4" worker --master "$5" -j 1', "sh", dirname(c.dir), cwd, process.execPath, CLI, `${net.host}:${port}`],
        { env: { ...process.env, ...c.env, FUZZFLEET_TOKEN: campaignToken(c.outDir) }, stdio: ["ignore", "pipe", "pipe"] },
      );
      return exited(child);
    };

    appendFileSync(join(own, "gen", "machine.mjs"), "// a local edit\n");
    const refused = await remote(own);
    assert.equal(refused.code, 3, refused.stdout + refused.stderr);
    assert.match(refused.stderr, /generator identity differs \(worker [0-9a-f]{12}, coordinator [0-9a-f]{12}\): the copy of gen\/\*\.mjs in the worker's working directory \(it does not see the shared directory\) is not the coordinator's/);

    copyFileSync(join(planted, "machine.mjs"), join(own, "gen", "machine.mjs"));
    const [rc, rw] = await Promise.all([coord.result, remote(own)]);
    assert.equal(rw.code, 0, rw.stdout + rw.stderr);
    assert.match(rw.stdout + rw.stderr, new RegExp(`attached to ${net.host.replace(/\./g, "\\.")}:\\d+ as #\\d+ .*no shared directory`));
    assert.match(rc.stdout, /joined \(-j 1, from 10\.231\.\d+\.2:\d+\)/, "the worker dialled in from its own network");
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assert.ok(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE status = 'complete'").n >= 2);
    assert.ok(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure").n >= 1);
    assertBooksTrue(c, "a worker on its own network with its own copy");
    assert.deepEqual(chunkDirs(c), []);
  } finally {
    net.remove();
    rmSync(own, { recursive: true, force: true });
    c.cleanup();
  }
});

test("minimize units run on a worker without the shared directory: the minimized failures travel back and are recorded, each find once", async () => {
  const gen = JSON.stringify(PLANTED);
  const c = new Campaign({
    defaults: { max_shrinks: 0, chunk_minutes: 0.05, bootstrap_seeds: 200 },
    costMs: 1,
    generator: `[generator]
command = ["node", ${gen}, "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"]
identity = [${JSON.stringify(PLANTED.replace(/planted\.mjs$/, "*.mjs"))}]
minimize = ["node", ${gen}, "--minimize", "--seeds", "{seeds}", "--out", "{out}", "--jobs", "{jobs}"]
`,
    extra: `${distributedTable({ lease: 20 })}\n[minimize]\nshare = 1\nbatch = 8\n`,
  });
  try {
    const coord = await startCoordinator(c, ["--for", "15s"]);
    const worker = hiddenWorker(c, coord.port, {}, ["--slots", "2"]);
    const [rc, rw] = await Promise.all([coord.result, worker.result]);
    const said = rw.stdout + rw.stderr;
    assert.equal(rw.code, 0, said);
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assert.match(said, /minimize unit \d+: .* — complete \(rc [01]\) in [\d.]+s, [\d,]+ file\(s\) [\d,]+ bytes sent \(recorded\)/, "a unit's minimized failures were sent back");
    assert.ok(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM minimize_unit WHERE status = 'complete' AND new_failures > 0").n >= 1, "a unit recorded the failures it minimized");
    const finds = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure_seed").n;
    const end = JSON.parse(c.cli(["failures", "--json"]).stdout) as { failures: { id: number; artifact_dir: string }[]; totals: { distinct_hits: number; pending_hits: number; hits: number } };
    assert.equal(end.totals.hits, finds, "no find lost or counted twice");
    assert.equal(end.totals.distinct_hits + end.totals.pending_hits, finds, "finds = distinct hits + pending");
    assert.ok(end.failures.length >= 1);
    for (const f of end.failures) {
      const min = readFileSync(join(f.artifact_dir, "input.min.txt"), "utf8").trim();
      assert.ok(PLANTED_FORMS.has(min), `failure #${f.id}, minimized on the worker, is a planted form:\n${min}`);
    }
    const twice = c.one<{ n: number }>(
      `SELECT COUNT(*) AS n FROM (SELECT m.failure_id FROM minimize_find m JOIN minimize_unit u ON u.id = m.unit_id
         WHERE u.status = 'complete' GROUP BY m.failure_id HAVING COUNT(*) > 1)`,
    ).n;
    assert.equal(twice, 0, "no find was minimized by two units");
    assert.deepEqual(readdirSync(join(c.outDir, "tmp")).filter((n) => /^(chunk|minimize)-\d+$/.test(n)), []);
  } finally {
    c.cleanup();
  }
});
