// resweep checks each seed with the args of the lane that swept it. One failure collects seeds
// from every lane whose finds reduce to its minimized input; checking them all with the args of
// the lane of the first find would test other programs and could close a failure that still fails.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { loadConfig } from "../../src/config/load.ts";
import { campaignPaths } from "../../src/config/paths.ts";
import { laneIdentity } from "../../src/config/schema.ts";
import { openStore } from "../../src/store/db.ts";
import { addFailureSeed, insertFailure } from "../../src/store/failures.ts";
import { insertGeneration } from "../../src/store/generations.ts";
import { insertLane } from "../../src/store/lanes.ts";
import { insertSession } from "../../src/store/sessions.ts";
import { insertChunk } from "../../src/store/chunks.ts";
import { resweepCommand } from "../../src/sweep/session/resweep.ts";
import { generationHash } from "../../src/config/identity.ts";

// A check command that fails every seed checked with the args of a lane named in FAILING_LANES,
// and logs each invocation as "<lane> <seeds>" to CHECK_LOG.
const CHECK = `import { appendFileSync } from "node:fs";
const argv = process.argv.slice(2);
const seeds = argv[0].split(",").map(Number);
const lane = argv[argv.indexOf("--lane") + 1];
appendFileSync(process.env.CHECK_LOG, lane + " " + argv[0] + "\\n");
const failing = (process.env.FAILING_LANES ?? "").split(",");
for (const seed of seeds) console.log(JSON.stringify({ seed, bucket: failing.includes(lane) ? "crash" : "ok" }));
`;

interface Forged {
  dir: string;
  /** First found in lane a; hit again by seed 1003 of lane b. */
  mixed: number;
  /** First found in lane b; its only seed has no recorded chunk. */
  orphan: number;
}

function forge(root: string, name: string): Forged {
  const dir = join(root, name);
  mkdirSync(dir);
  writeFileSync(join(dir, "gen.mjs"), "// the generator is never run here\n");
  writeFileSync(join(dir, "check.mjs"), CHECK);
  writeFileSync(
    join(dir, "fuzzfleet.toml"),
    `[generator]
command = ["node", "gen.mjs", "{seed_from}", "{count}", "{out}"]
identity = ["gen.mjs"]
check = ["node", "check.mjs", "{seeds}"]
[lanes.a]
base_seed = 1
args = ["--lane", "a"]
[lanes.b]
base_seed = 1000
args = ["--lane", "b"]
`,
  );
  const config = loadConfig(join(dir, "fuzzfleet.toml"));
  const paths = campaignPaths({ config: config.path });
  const db = openStore(paths.dbPath);
  try {
    const gen = insertGeneration(db, generationHash(config), "initial");
    const [a, b] = config.lanes.map((l) => insertLane(db, gen, l.name, laneIdentity(l), l.baseSeed)) as [number, number];
    const session = insertSession(db, { generationId: gen, requestedSeconds: 60, appBuild: null, transport: "local", host: "h", port: null });
    const chunkA = insertChunk(db, { sessionId: session, laneId: a, seedFrom: 1, seedTo: 100, appBuild: null, status: "running", workerId: null });
    const chunkB = insertChunk(db, { sessionId: session, laneId: b, seedFrom: 1000, seedTo: 1099, appBuild: null, status: "running", workerId: null });
    const failure = (laneId: number, key: string, seed: number) =>
      insertFailure(db, {
        generationId: gen,
        laneId,
        dedupKey: key,
        bucket: "crash",
        signature: "crash: planted",
        seed,
        shrunk: true,
        message: null,
        repro: null,
        artifactDir: "failures/x",
        appBuild: null,
      });
    const mixed = failure(a, "k1", 5);
    addFailureSeed(db, mixed, 5, chunkA);
    addFailureSeed(db, mixed, 7, chunkA);
    addFailureSeed(db, mixed, 1003, chunkB);
    const orphan = failure(b, "k2", 1050);
    addFailureSeed(db, orphan, 1050, null);
    return { dir, mixed, orphan };
  } finally {
    db.close();
  }
}

async function resweep(f: Forged, failingLanes: string): Promise<{ states: Record<number, string>; checks: string[]; output: string[] }> {
  const log = join(f.dir, "checks.log");
  writeFileSync(log, "");
  const saved = { CHECK_LOG: process.env.CHECK_LOG, FAILING_LANES: process.env.FAILING_LANES };
  process.env.CHECK_LOG = log;
  process.env.FAILING_LANES = failingLanes;
  const output: string[] = [];
  try {
    const code = await resweepCommand({
      paths: campaignPaths({ config: join(f.dir, "fuzzfleet.toml") }),
      id: null,
      jobs: 1,
      forceUnlock: false,
      verbose: true,
      write: (line) => output.push(line),
    });
    assert.equal(code, 0);
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
  const db = openStore(join(f.dir, "fuzzfleet.db"), { readonly: true });
  try {
    const rows = db.prepare("SELECT id, state FROM failure").all() as { id: number; state: string }[];
    return {
      states: Object.fromEntries(rows.map((r) => [r.id, r.state])),
      checks: readFileSync(log, "utf8").trim().split("\n").sort(),
      output,
    };
  } finally {
    db.close();
  }
}

describe("resweep across lanes", () => {
  const root = mkdtempSync(join(tmpdir(), "fuzzfleet-resweep-lanes-"));
  after(() => rmSync(root, { recursive: true, force: true }));

  test("each seed is checked with the args of the lane whose chunk recorded it; a seed without a chunk uses the failure's lane", async () => {
    const f = forge(root, "grouping");
    const r = await resweep(f, "");
    assert.deepEqual(r.checks, ["a 5,7", "b 1003,1050"]);
  });

  test("a failure still failing in a lane other than its first find's stays open", async () => {
    const f = forge(root, "still");
    const r = await resweep(f, "b");
    assert.deepEqual(r.states, { [f.mixed]: "open", [f.orphan]: "open" });
    assert.ok(r.output.includes(`  still failing  #${f.mixed} crash seeds 1003`), r.output.join("\n"));
    assert.ok(r.output.includes("0 fixed, 2 still open"), r.output.join("\n"));
    assert.ok(r.output.indexOf("0 fixed, 2 still open") < r.output.indexOf(`  still failing  #${f.mixed} crash seeds 1003`), "the summary comes first");
  });

  test("a failure is fixed only when its seeds pass in every lane", async () => {
    const f = forge(root, "fixed");
    const r = await resweep(f, "");
    assert.deepEqual(r.states, { [f.mixed]: "fixed", [f.orphan]: "fixed" });
    assert.ok(r.output.includes(`  FIXED          #${f.mixed} crash (3 seeds now clean)`), r.output.join("\n"));
    assert.ok(r.output.includes("2 fixed, 0 still open"), r.output.join("\n"));
  });
});
