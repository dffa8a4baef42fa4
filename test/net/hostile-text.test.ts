// Hostile text on disk and from a coordinator: what a generator wrote (a message, a repro line,
// report.txt, the minimized input) and what the store holds reach `failures -v`, `export` and
// `status` escaped; what a coordinator sends (lane names, notes, drain reasons) reaches the
// worker's own log escaped. An escape sequence never drives the terminal, a newline never forges
// a line.
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { Campaign, CLI, exited } from "../helpers/campaign.ts";
import { Connection } from "../../src/net/connection.ts";
import { Hello, Prove, WorkerFrame } from "../../src/net/messages.ts";

/** Control characters other than the newlines between lines. */
const CONTROL = /[\x00-\x09\x0b-\x1f\x7f-\x9f]/;
const forged = (text: string) => text.split("\n").filter((l) => /^\s*REFUSED forged/.test(l));

test("what a generator wrote and the store holds reaches failures -v, export and status escaped", () => {
  const c = new Campaign({
    generator: `[generator]
command = ["node", "gen.mjs", "{seed_from}", "{count}", "{out}"]
identity = ["gen.mjs"]
`,
  });
  try {
    // Seed 1 fails, with control characters in everything the contract lets a generator write.
    writeFileSync(
      join(c.dir, "gen.mjs"),
      `import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
const [from, , out] = process.argv.slice(2);
mkdirSync(out, { recursive: true });
if (Number(from) !== 1) process.exit(0);
const dir = join(out, "failures", "1");
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, "meta.json"), JSON.stringify({
  seed: 1, bucket: "evil", shrunk: true, key_file: "input.min.txt",
  msg: "boom\\x1b[2J\\x1b[H\\nREFUSED forged by the message",
  repro: "node gen.mjs 1 \\x1b]0;pwned\\x07",
}));
writeFileSync(join(dir, "input.min.txt"), "first\\x1b[31m red\\r\\nsecond\\twith a tab\\n");
writeFileSync(join(dir, "report.txt"), "report \\x1b[2J head\\nits second line\\n");
process.exit(1);
`,
    );
    const run = c.cli(["run", "--for", "4s"]);
    assert.equal(run.code, 1, run.stdout + run.stderr);
    // What only a damaged or forged store holds: a bucket, lane arguments and a host the ingest would never write.
    const db = new Database(c.dbPath);
    db.prepare("UPDATE failure SET bucket = ?").run("evil\x1b[2J\nREFUSED forged by the bucket");
    db.prepare("UPDATE lane SET params_json = ?").run(JSON.stringify({ args: ["--size\x1b[2J", "\nREFUSED forged by the args"] }));
    db.prepare("UPDATE session SET mode = 'distributed', coordinator_host = ?").run("host\x1b]0;pwned\x07\nREFUSED forged by the host");
    db.close();

    const failures = c.cli(["failures", "-v", "--state", "all"]);
    assert.equal(failures.code, 0, failures.stderr);
    const exported = c.cli(["export", "--state", "all"]);
    assert.equal(exported.code, 0, exported.stderr);
    const status = c.cli(["status"]);
    assert.equal(status.code, 0, status.stderr);
    for (const [what, out] of [["failures -v", failures.stdout], ["export", exported.stdout], ["status", status.stdout]] as const) {
      assert.doesNotMatch(out.replace(/\t/g, ""), CONTROL, `${what} shows no control character`);
      assert.deepEqual(forged(out), [], `${what} has no forged line`);
    }
    assert.match(failures.stdout, /evil\\x1b\[2J\\x0aREFUSED forged by the bucket/);
    assert.match(failures.stdout, /boom\\x1b\[2J\\x1b\[H REFUSED forged by the message/, "the message is one line, escaped");
    assert.match(failures.stdout, /repro: node gen\.mjs 1 \\x1b\]0;pwned\\x07/);
    assert.match(failures.stdout, /\| report \\x1b\[2J head\n {6}\| its second line\n/, "report.txt keeps its lines, each shown after a bar");
    assert.match(exported.stdout, /----- input\.min\.txt {2}shown=2 of 2 lines\nfirst\\x1b\[31m red\\x0d\nsecond\twith a tab\n/, "contents keep their lines and tabs");
    assert.match(exported.stdout, /message {5}boom\\x1b\[2J\\x1b\[H REFUSED forged by the message/);
    assert.match(status.stdout, /--size\\x1b\[2J \\x0aREFUSED forged by the args/);
    assert.match(status.stdout, /\[distributed on host\\x1b\]0;pwned\\x07\\x0aREFUSED forged by the host\]/);
  } finally {
    c.cleanup();
  }
});

test("what a coordinator sends reaches the worker's log escaped: lane names, notes, drain reasons", async () => {
  const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-hostile-text-"));
  let server: Server | null = null;
  try {
    const nonce = join(dir, "nonce");
    writeFileSync(nonce, "n0nce\n");
    mkdirSync(join(dir, "scratch"));
    // A coordinator double that speaks the wire correctly but puts control characters in every text it may.
    const served = new Promise<void>((resolve, reject) => {
      server = createServer((socket) => {
        const conn = new Connection(socket);
        void (async () => {
          await conn.receive(Hello, 10_000);
          conn.send({ type: "challenge", nonce_path: nonce, identity: null, app_path: null });
          await conn.receive(Prove, 10_000);
          conn.send({ type: "welcome", worker_id: 7, session: 1, mode: "sweep", lease_seconds: 20, heartbeat_seconds: 0.2, generation: 1, explore: null });
          let assigned = false;
          for (;;) {
            const f = await conn.receive(WorkerFrame, 20_000);
            if (f.type === "want" && !assigned) {
              assigned = true;
              conn.send({
                type: "assign",
                chunks: [
                  {
                    chunk_id: 1,
                    lane: "lane\x1b[2J\nREFUSED forged by the lane",
                    seed_from: 1,
                    seed_to: 10,
                    argv: ["true"],
                    cwd: dir,
                    log_path: join(dir, "chunk-1.log"),
                    scratch_dir: join(dir, "scratch", "chunk-1"),
                    hard_timeout: 30,
                    nice: 0,
                    idle_io: false,
                  },
                ],
              });
            } else if (f.type === "want") {
              conn.send({ type: "drain", reason: "end\x1b[H\nREFUSED forged by the drain" });
            } else if (f.type === "done") {
              conn.send({ type: "ack", drain: false, known: null, note: "ok\x1b[2J\nREFUSED forged by the note" });
            } else if (f.type === "heartbeat") {
              conn.send(f.ids.length === 0 ? { type: "stop", token: "a".repeat(32) } : { type: "ack", drain: false, known: f.ids, note: null });
            } else if (f.type === "stop_ack") {
              conn.send({ type: "bye", reason: "stopped" });
              conn.close();
              return resolve();
            }
          }
        })().catch(reject);
      });
      server.listen(0, "127.0.0.1");
    });
    await new Promise((r) => server!.once("listening", r));
    const port = (server!.address() as { port: number }).port;
    const worker = spawn(process.execPath, [CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", "t".repeat(32), "-j", "1"], {
      cwd: dir,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const r = await exited(worker);
    await served;
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const out = r.stdout + r.stderr;
    assert.doesNotMatch(out, CONTROL, "the worker's log holds no control character");
    assert.deepEqual(forged(out), []);
    assert.match(out, /chunk 1: lane\\x1b\[2J\\x0aREFUSED forged by the lane seeds 1\.\.10/);
    assert.match(out, /\(ok\\x1b\[2J\\x0aREFUSED forged by the note\)/);
    assert.match(out, /draining \(end\\x1b\[H\\x0aREFUSED forged by the drain\)/);
  } finally {
    (server as Server | null)?.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
