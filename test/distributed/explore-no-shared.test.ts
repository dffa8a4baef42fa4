// Explore without a shared filesystem: a worker in a mount namespace of its own (the campaign's
// parent directory hidden under a tmpfs) and a network namespace of its own (a veth pair on the
// test's own 10.234.N.0/30), with its own copy of the target, explores the maze with the master's
// local slots off and ends with exactly the single-host run's counts; a copy that differs is
// refused at the handshake (exit 3, naming both builds). Inputs too large to travel inline are
// fetched piece by piece and children larger than a frame travel in several pieces. Needs root
// (unshare, mount, ip netns), as CI runs.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { appendFileSync, copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { CLI, exited, waitFor } from "../helpers/campaign.ts";
import { ExploreDir, MAZE, MAZE_SEEDS } from "../helpers/explore.ts";
import { sha256 } from "../helpers/scratch.ts";
import { campaignStateLeft } from "../explore/leftovers.ts";
import { ownNetwork } from "./partition-network.ts";

const TOKEN = "explore-no-shared-token-0123456789";
const DEPTH = "4";


/**
 * `fuzzfleet worker --master …` started in `cwd` inside a mount namespace where `hidden` is an
 * empty tmpfs (and, given `ns`, in that network namespace): it cannot see a byte of the campaign.
 */
function hiddenWorker(hidden: string, cwd: string, master: string, env: NodeJS.ProcessEnv, ns: string | null = null) {
  const inner = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs fuzzfleet-hidden "$1" && cd "$2" && shift 2 && exec "$@"', "sh", hidden, cwd, process.execPath, CLI, "worker", "--master", master, "-j", "1", "--token", TOKEN];
  const [cmd, ...args] = ns === null ? inner : ["ip", "netns", "exec", ns, ...inner];
  const child = spawn(cmd!, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  return exited(child);
}

/** The maze and its core, copied into `dir` (the target runs as `node maze.mjs @@` there). */
function mazeCopy(dir: string): void {
  for (const f of ["maze.mjs", "maze-core.mjs"]) copyFileSync(join(dirname(MAZE), f), join(dir, f));
}

const MAZE_TARGET = [process.execPath, "maze.mjs", "@@"];
const MAZE_FILES = ["--target-file", "maze.mjs", "--target-file", "maze-core.mjs"];

function seeded(): ExploreDir {
  const e = new ExploreDir();
  for (const n of readdirSync(MAZE_SEEDS)) e.seed(n, readFileSync(join(MAZE_SEEDS, n)));
  mazeCopy(e.dir);
  return e;
}

test("explore with a worker on its own network and filesystem, local slots off: a target copy that differs is refused at the handshake (exit 3, naming both builds); the same copy explores the maze to the single-host run's counts", async () => {
  // The single-host run: what the fleet must reproduce exactly.
  const single = seeded();
  const e = seeded();
  const own = mkdtempSync(join("/var/tmp", "fuzzfleet-own-"));
  const net = ownNetwork(234);
  try {
    const r = single.run(["-j", "1", "--max-idle", "1", "-t", "10", ...MAZE_FILES], MAZE_TARGET, { MAZE_DEPTH: DEPTH });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const want = single.stats();
    assert.ok(want.observations > 20, `the maze explores something: ${want.observations}`);

    const master = e.start(["-j", "0", "--port", "0", "--bind", net.host, "--token", TOKEN, "--max-idle", "2", "-t", "10", ...MAZE_FILES], MAZE_TARGET, { MAZE_DEPTH: DEPTH });
    const port = await waitFor("the master to listen on the veth address", () => {
      const m = new RegExp(`listening on ${net.host.replace(/\./g, "\\.")}:(\\d+)`).exec(master.output());
      if (!m && master.child.exitCode !== null) throw new Error(`explore exited early:\n${master.output()}`);
      return m ? Number(m[1]) : undefined;
    }, 60_000);
    const at = `${net.host}:${port}`;

    mazeCopy(own);
    appendFileSync(join(own, "maze-core.mjs"), "// a local edit\n");
    const refused = await hiddenWorker(dirname(e.dir), own, at, { MAZE_DEPTH: DEPTH }, net.ns);
    assert.equal(refused.code, 3, refused.stdout + refused.stderr);
    assert.match(
      refused.stderr,
      /refused this worker:\s+target build differs \(worker build [0-9a-f]{12}, master build [0-9a-f]{12}\): the worker resolves the target from its own working directory and PATH \(it does not see the shared directory\)/,
    );

    mazeCopy(own);
    const worker = await hiddenWorker(dirname(e.dir), own, at, { MAZE_DEPTH: DEPTH }, net.ns);
    const ended = await master.done;
    assert.equal(ended.code, 0, master.output());
    assert.equal(worker.code, 0, worker.stdout + worker.stderr);
    assert.match(worker.stdout + worker.stderr, new RegExp(`attached to ${net.host.replace(/\./g, "\\.")}:\\d+ as #\\d+ \\(explore session 1, no shared directory \\(nonce: ENOENT\\): runs in its own, files sent over the connection\\)`));
    assert.match(master.output(), /joined \(-j 1, 1 slot\(s\), from 10\.234\.\d+\.2:\d+\) {2}files: over the connection \(no shared directory\)/);

    const got = e.stats();
    for (const k of ["observations", "generated", "interesting", "invalid_results"] as const) assert.equal(got[k], want[k], `${k}: the fleet's count is the single host's`);
    assert.deepEqual(e.corpusFiles().sort(), single.corpusFiles().sort(), "the same corpus, byte for byte named");
    assert.deepEqual(campaignStateLeft(e.corpus), [], "no landed stage nor other state is left behind");
  } finally {
    net.remove();
    rmSync(own, { recursive: true, force: true });
    single.cleanup();
    e.cleanup();
  }
});

test("without the shared directory an input too large to travel inline is fetched piece by piece, and a child larger than a frame travels in several pieces; each input runs once", async () => {
  const e = new ExploreDir();
  const own = mkdtempSync(join("/var/tmp", "fuzzfleet-own-"));
  try {
    const big = Buffer.alloc(200 * 1024, "s");
    e.seed("big", big);
    e.seed("small", "small\n");
    // Each input: a 3 MiB child (once) and a child naming its size.
    const body = `sha256sum "$1" | cut -c1-64 >> "$RUNS"
head -c 3145728 /dev/zero | tr '\\0' x > "$SYMCC_OUTPUT_DIR/big"
wc -c < "$1" | tr -d ' ' > "$SYMCC_OUTPUT_DIR/size"`;
    e.script("t.sh", body);
    copyFileSync(join(e.dir, "t.sh"), join(own, "t.sh"));
    const runs = join(own, "runs.log");
    const master = e.start(["-j", "0", "--port", "0", "--bind", "127.0.0.1", "--token", TOKEN, "--max-idle", "1", "-t", "10"], ["./t.sh", "@@"]);
    const port = await master.port();
    const worker = await hiddenWorker(dirname(e.dir), own, `127.0.0.1:${port}`, { RUNS: runs });
    const ended = await master.done;
    assert.equal(ended.code, 0, master.output());
    assert.equal(worker.code, 0, worker.stdout + worker.stderr);
    assert.match(worker.stdout + worker.stderr, /\(explore session 1, no shared directory \(nonce: ENOENT\): runs in its own, files sent over the connection\)/);
    const bigChild = Buffer.alloc(3145728, "x");
    const want = [big, Buffer.from("small\n"), bigChild, Buffer.from(`${big.length}\n`), Buffer.from("6\n"), Buffer.from("3145728\n"), Buffer.from("7\n"), Buffer.from("2\n"), Buffer.from("8\n")].map((b) => sha256(b));
    const unique = [...new Set(want)].sort();
    assert.deepEqual(e.corpusFiles().sort(), unique, "every input and child, with verified bytes");
    const ran = readFileSync(runs, "utf8").trim().split("\n").sort();
    assert.deepEqual(ran, unique, "each input executed exactly once, the large ones too");
    assert.equal(readFileSync(join(e.corpus, sha256(bigChild))).length, 3145728);
    assert.equal(e.stats().observations, unique.length);
    assert.deepEqual(campaignStateLeft(e.corpus), [], "no landed stage nor other state is left behind");
  } finally {
    rmSync(own, { recursive: true, force: true });
    e.cleanup();
  }
});
