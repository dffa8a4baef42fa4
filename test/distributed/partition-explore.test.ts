// A network partition in an explore fleet without a shared filesystem: the worker (its own network
// and mount namespaces, its own copy of the target, the master's local slots off) has its link cut
// past the point where the master gives up on it (silent for twice the lease, at least a minute),
// then healed: once while it holds a task, once in the middle of a child's `put` transfer (the
// uplink slowed so the cut lands on the event: a child half-written in the master's stage). The
// master removes what landed and puts the worker's tasks back at the front of the queue; the
// cut-off worker finds its master gone once the link is up; a worker started again finishes the
// campaign with exactly the single-host run's counts and corpus, each input committed once and
// run again only if it was one the master took back. Real namespaces (partition-network.ts, on
// the test's own 10.233.N.0/30; needs root, unshare, ip netns and tc, as CI runs), a real master,
// sockets and target processes.
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { EXIT } from "../../src/exit-codes.ts";
import { waitFor } from "../helpers/campaign.ts";
import { ExploreDir, MAZE, MAZE_SEEDS, type Started } from "../helpers/explore.ts";
import { sha256 } from "../helpers/scratch.ts";
import { campaignStateLeft } from "../explore/leftovers.ts";
import { ownNetwork, remoteExploreWorker, type OwnNetwork } from "./partition-network.ts";

const TOKEN = "partition-explore-token-0123456789";
const DEPTH = "4";

/**
 * The maze behind a wrapper that logs the hash of each input it runs (to $RUNS) and takes a
 * fifth of a second, so that the worker is always holding a task when the link goes down.
 */
const WRAPPER = `sha256sum "$1" | cut -c1-64 >> "$RUNS"
sleep 0.2
exec "${process.execPath}" maze.mjs "$1"`;
const TARGET = ["./t.sh", "@@"];
const TARGET_FILES = ["--target-file", "maze.mjs", "--target-file", "maze-core.mjs"];

function seeded(): ExploreDir {
  const e = new ExploreDir();
  for (const n of readdirSync(MAZE_SEEDS)) e.seed(n, readFileSync(join(MAZE_SEEDS, n)));
  for (const f of ["maze.mjs", "maze-core.mjs"]) copyFileSync(join(dirname(MAZE), f), join(e.dir, f));
  e.script("t.sh", WRAPPER);
  return e;
}

const lines = (file: string): string[] => (existsSync(file) ? readFileSync(file, "utf8").split("\n").filter((l) => l !== "") : []);

/** The master's address on the veth pair, once it listens there. */
async function listeningAt(master: Started, net: OwnNetwork): Promise<string> {
  const port = await waitFor("the master to listen on the veth address", () => {
    const m = new RegExp(`listening on ${net.host.replace(/\./g, "\\.")}:(\\d+)`).exec(master.output());
    if (!m && master.child.exitCode !== null) throw new Error(`explore exited early:\n${master.output()}`);
    return m ? Number(m[1]) : undefined;
  }, 60_000);
  return `${net.host}:${port}`;
}

/** Cuts the worker's link until the master gives up on it and takes its tasks back, then heals it; how many went back. */
async function cutUntilTakenBack(net: OwnNetwork, master: Started): Promise<number> {
  net.cut();
  try {
    return await waitFor("the master to give up on the silent worker and take its tasks back", () => {
      const m = /(\d+) task\(s\) of \S+ went back to the front of the queue\n[^]*worker \S+ left \(silent for 60s\)/.exec(master.output());
      return m ? Number(m[1]) : undefined;
    }, 120_000, 100);
  } finally {
    net.heal();
  }
}

test("explore without the shared directory: the worker's link down past the master's patience while it holds a task, then up; its tasks go back, a worker started again ends the campaign with the single-host counts, each input committed once", async () => {
  const single = seeded();
  const e = seeded();
  const own = mkdtempSync(join("/var/tmp", "fuzzfleet-own-"));
  const net = ownNetwork(233);
  try {
    const r = single.run(["-j", "1", "--max-idle", "1", "-t", "10", ...TARGET_FILES], TARGET, { MAZE_DEPTH: DEPTH, RUNS: join(single.dir, "runs.log") });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const want = single.stats();
    assert.ok(want.observations > 20, `the maze explores something: ${want.observations}`);

    for (const f of ["maze.mjs", "maze-core.mjs", "t.sh"]) copyFileSync(join(e.dir, f), join(own, f));
    const runs = join(own, "runs.log");
    // A 2 s lease: the master drops a worker silent for twice that, and at least a minute.
    const master = e.start(["-j", "0", "--port", "0", "--bind", net.host, "--token", TOKEN, "--lease-ttl", "2", "--max-idle", "2", "-t", "10", ...TARGET_FILES], TARGET, { MAZE_DEPTH: DEPTH });
    const at = await listeningAt(master, net);

    const first = remoteExploreWorker(net, dirname(e.dir), own, at, TOKEN, { MAZE_DEPTH: DEPTH, RUNS: runs });
    await waitFor("the worker to have run a few inputs", () => (lines(runs).length >= 3 ? true : undefined), 60_000, 20);

    const back = await cutUntilTakenBack(net, master);
    assert.ok(back >= 1, "the worker held a task when its link went down");
    const executedBeforeCut = lines(runs).length;

    // Once the link is up the cut-off worker learns its master is gone: a lost master, exit 4.
    const lost = await first.result;
    assert.equal(lost.code, EXIT.runtime, first.output());

    const second = remoteExploreWorker(net, dirname(e.dir), own, at, TOKEN, { MAZE_DEPTH: DEPTH, RUNS: runs });
    const ended = await master.done;
    const rw = await second.result;
    assert.equal(ended.code, 0, master.output());
    assert.equal(rw.code, 0, second.output());
    assert.match(master.output(), /joined \(-j 1, 1 slot\(s\), from 10\.233\.\d+\.2:\d+\) {2}files: over the connection \(no shared directory\)/);

    const got = e.stats();
    for (const k of ["observations", "generated", "interesting", "invalid_results"] as const) assert.equal(got[k], want[k], `${k}: the fleet's count is the single host's`);
    const corpus = e.corpusFiles().sort();
    assert.deepEqual(corpus, single.corpusFiles().sort(), "the same corpus, byte for byte named");
    assert.deepEqual(campaignStateLeft(e.corpus), [], "no landed stage nor other state is left behind");

    // Every input ran; one ran twice only if the master took it back at the cut.
    const ran = lines(runs);
    assert.deepEqual([...new Set(ran)].sort(), corpus, "every input of the corpus was run");
    const again = ran.length - new Set(ran).size;
    assert.ok(again <= back, `${again} input(s) ran twice, no more than the ${back} task(s) taken back (${executedBeforeCut} runs before the cut)`);
  } finally {
    net.remove();
    rmSync(own, { recursive: true, force: true });
    single.cleanup();
    e.cleanup();
  }
});

/** Children landing on the master (below its staging directory), with their sizes so far. */
function landingChildren(root: string): { path: string; size: number }[] {
  const found: { path: string; size: number }[] = [];
  const walk = (dir: string, inStaging: boolean): void => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path, inStaging || e.name === "staging");
      else if (inStaging && e.isFile() && /^[0-9a-f]{64}$/.test(e.name)) {
        try {
          found.push({ path, size: statSync(path).size });
        } catch {
          // Settled or removed between the listing and the stat.
        }
      }
    }
  };
  walk(root, false);
  return found;
}

const BIG_CHILD = 4 * 2 ** 20;

test("explore without the shared directory: the worker's link down in the middle of a child's transfer, past the master's patience, then up; what landed is removed, the task runs again, the campaign ends with the single-host counts", async () => {
  // Each input: a 4 MiB child (the same bytes each time) and a child naming the input's size.
  const body = `sha256sum "$1" | cut -c1-64 >> "$RUNS"
head -c ${BIG_CHILD} /dev/zero | tr '\\0' y > "$SYMCC_OUTPUT_DIR/big"
wc -c < "$1" | tr -d ' ' > "$SYMCC_OUTPUT_DIR/size"`;
  const single = new ExploreDir();
  const e = new ExploreDir();
  for (const x of [single, e]) {
    x.seed("s", "s\n");
    x.script("t.sh", body);
  }
  const own = mkdtempSync(join("/var/tmp", "fuzzfleet-own-"));
  const net = ownNetwork(233);
  // 4 MB/s from the worker: a 4 MiB child (5.3 MiB in base64) takes over a second, in four puts.
  net.slowUplink("32mbit");
  try {
    const r = single.run(["-j", "1", "--max-idle", "1", "-t", "10"], ["./t.sh", "@@"], { RUNS: join(single.dir, "runs.log") });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const want = single.stats();

    copyFileSync(join(e.dir, "t.sh"), join(own, "t.sh"));
    const runs = join(own, "runs.log");
    const master = e.start(["-j", "0", "--port", "0", "--bind", net.host, "--token", TOKEN, "--lease-ttl", "2", "--max-idle", "2", "-t", "10"], ["./t.sh", "@@"]);
    const at = await listeningAt(master, net);

    const first = remoteExploreWorker(net, dirname(e.dir), own, at, TOKEN, { RUNS: runs });
    const partial = await waitFor(
      "a child to be landing in part on the master",
      () => landingChildren(e.dir).find((f) => f.size > 0 && f.size <= BIG_CHILD - 2 * 2 ** 20),
      60_000,
      20,
    );

    const back = await cutUntilTakenBack(net, master);
    assert.ok(back >= 1, "the worker held the task whose child was landing");
    assert.equal(existsSync(partial.path), false, "the child that landed in part is removed");
    assert.deepEqual(landingChildren(e.dir), [], "nothing of the cut-off worker's transfer is kept");

    const lost = await first.result;
    assert.equal(lost.code, EXIT.runtime, first.output());

    const second = remoteExploreWorker(net, dirname(e.dir), own, at, TOKEN, { RUNS: runs });
    const ended = await master.done;
    const rw = await second.result;
    assert.equal(ended.code, 0, master.output());
    assert.equal(rw.code, 0, second.output());

    const got = e.stats();
    for (const k of ["observations", "generated", "interesting", "invalid_results"] as const) assert.equal(got[k], want[k], `${k}: the fleet's count is the single host's`);
    const corpus = e.corpusFiles().sort();
    assert.deepEqual(corpus, single.corpusFiles().sort(), "the same corpus, byte for byte named");
    for (const h of corpus) assert.equal(sha256(readFileSync(join(e.corpus, h))), h, `${h.slice(0, 12)} holds its own bytes`);
    assert.deepEqual(campaignStateLeft(e.corpus), [], "no landed stage nor other state is left behind");

    const ran = lines(runs);
    assert.deepEqual([...new Set(ran)].sort(), corpus, "every input of the corpus was run");
    const again = ran.length - new Set(ran).size;
    assert.ok(again >= 1 && again <= back, `the task cut off mid-transfer ran again, and only what was taken back: ${again} input(s) ran twice, ${back} task(s) taken back`);
  } finally {
    net.remove();
    rmSync(own, { recursive: true, force: true });
    single.cleanup();
    e.cleanup();
  }
});
