// The deterministic simulation of the lease table (lease-world.ts): a seeded scheduler drives
// simulated masters over each record store through crashes, stalls past the lease, delayed,
// duplicated and reordered results, failed writes and syncs, torn journal lines and power cuts,
// with every invariant checked after every step; partitioned shares also read through a shared
// file system's client caches whose reads without the lock may be outdated. A failure names the seed;
// `node --import tsx bench/explore-sim.mjs --store S --seed N --runs 1` replays it, and
// bench/explore-sim.mjs runs the long version. Deliberately broken stores show that it can fail.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { withFileLock } from "../../src/explore/state/file-lock.ts";
import { partitionDir, partitionLockPath, readPartition, setPartitionFileReader, writePartition, type PartitionRecord } from "../../src/explore/state/lease-store/partition-lease.ts";
import { PartitionClients, simulationRoot } from "./lease-world-stores.ts";
import { simulate, SimViolation, type SimOptions } from "./lease-world.ts";

const SEED = Number(process.env.FUZZFLEET_SIM_SEED ?? 20261204);

/** Runs seeded runs from `seed` until `steps` steps are done; the steps run, the commits made and the faults. */
function runUntil(o: Omit<SimOptions, "seed">, seed: number, steps: number): { steps: number; runs: number; commits: number; faults: Record<string, number> } {
  const total = { steps: 0, runs: 0, commits: 0, faults: {} as Record<string, number> };
  while (total.steps < steps) {
    const r = simulate({ ...o, seed: seed + total.runs });
    total.steps += r.steps;
    total.commits += r.commits;
    for (const [k, n] of Object.entries(r.faults)) total.faults[k] = (total.faults[k] ?? 0) + n;
    total.runs++;
  }
  return total;
}

/** The violation a run throws, with its fences (random per process) blanked out. */
function violationOf(o: SimOptions): string {
  try {
    simulate(o);
  } catch (err) {
    if (err instanceof SimViolation) return err.message.replace(/m[0-9]+:[0-9]+:[0-9]+:[0-9a-f]{16}/g, "<fence>");
    throw err;
  }
  assert.fail(`seed ${o.seed} ran without a violation`);
}

describe("lease table simulation", () => {
  it("10,000+ steps over the store in memory keep every invariant, and every content ends committed exactly once", () => {
    const r = runUntil({ kind: "memory", steps: 800 }, SEED, 10_000);
    assert.ok(r.steps >= 10_000, `${r.steps} steps in ${r.runs} runs`);
    assert.equal(r.commits, 40 * r.runs, "each run's 40 contents committed");
  });

  it("the shared record files and the journal, in a temporary directory, under the same scheduler", () => {
    for (const kind of ["shared-files", "journal"] as const) {
      const r = runUntil({ kind, steps: 600 }, SEED, 1_500);
      assert.equal(r.commits, 40 * r.runs, kind);
    }
  });

  it("partitioned shares in a temporary directory: crashes, stalls past the lease and torn journal lines, with takeovers; no takeover while a lease is live, quiescence only when nothing is left", () => {
    const r = runUntil({ kind: "partitioned", steps: 800 }, SEED, 2_500);
    assert.equal(r.commits, 40 * r.runs);
    // Seed 7 once caught a master that claimed in a share taken over a moment after it last read the share's record.
    const kept = simulate({ kind: "partitioned", seed: 7, steps: 800 });
    assert.equal(kept.commits, 40);
  });

  it("a partitioned store whose masters never check their share's generation (a stalled master wakes and goes on) is caught within the suite's budget", () => {
    let caught: string | null = null;
    for (let seed = SEED; caught === null && seed < SEED + 5; seed++) {
      try {
        simulate({ kind: "partitioned", seed, steps: 800, broken: "no-generation-check" });
      } catch (err) {
        if (!(err instanceof SimViolation)) throw err;
        caught = err.message;
      }
    }
    assert.ok(caught !== null, "forty seeds ran without a violation");
    assert.match(caught, /stale fence|committed twice|stolen|answered renewed|claimed content/);
    assert.match(caught, /--store partitioned .*--broken no-generation-check/);
  });

  it("a shared file system's client answers a read without the share's lock from its copy while that is younger than the bound, and a read under the lock afresh", () => {
    const dir = mkdtempSync(join(simulationRoot(), "fuzzfleet-lease-clients-"));
    let now = 1_000;
    const clients = new PartitionClients(300, () => now, () => 0);
    setPartitionFileReader(clients.read);
    try {
      mkdirSync(partitionDir(dir));
      const v1: PartitionRecord = { schema: 1, rank: 0, epoch: "e", generation: 1, holder: "a", heartbeat: 1_000, journal: "" };
      const v2 = { ...v1, generation: 2, holder: "b", heartbeat: 1_100 };
      const v3 = { ...v1, generation: 3, holder: "c", heartbeat: 1_100 };
      writePartition(dir, v1);
      assert.deepEqual(clients.as(1, () => readPartition(dir, 0)), v1, "a first read fills the copy");
      now += 100;
      writePartition(dir, v2);
      assert.deepEqual(clients.as(1, () => readPartition(dir, 0)), v1, "100 ms later: the copy");
      assert.deepEqual(readPartition(dir, 0), v2, "the simulation's own read: the file");
      assert.deepEqual(clients.as(2, () => readPartition(dir, 0)), v2, "another client has no copy");
      const locked = withFileLock(partitionLockPath(dir, 0), 1_000, () => clients.as(1, () => readPartition(dir, 0)));
      assert.deepEqual(locked, v2, "under the lock: afresh");
      writePartition(dir, v3);
      now += 299;
      assert.deepEqual(clients.as(1, () => readPartition(dir, 0)), v2, "299 ms after the locked read: its copy");
      now += 1;
      assert.deepEqual(clients.as(1, () => readPartition(dir, 0)), v3, "300 ms after it: afresh");
      assert.equal(clients.staleAnswers, 2);
    } finally {
      setPartitionFileReader(null);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("partitioned shares whose reads without the lock may be outdated (a client's copy up to 200 ms, then up to a whole lease, old) keep every invariant, and no master claims in a share it lost", () => {
    for (const staleReadsMs of [200, 1_000]) {
      const r = runUntil({ kind: "partitioned", steps: 800, staleReadsMs }, SEED, 3_000);
      assert.equal(r.commits, 40 * r.runs, `${staleReadsMs} ms`);
      assert.ok((r.faults["stale-read"] ?? 0) > 100, `${staleReadsMs} ms: outdated answers served: ${JSON.stringify(r.faults)}`);
    }
    // Seed 1 once caught a claim in a share taken over: the record, read fresh, named this master
    // but its lease had run out, and the share was taken before the claim.
    assert.equal(simulate({ kind: "partitioned", seed: 1, steps: 800, staleReadsMs: 200 }).commits, 40);
  });

  it("a partitioned store whose commit check trusts a possibly outdated read instead of reading its share's record under the lock is caught within the suite's budget", () => {
    let caught: string | null = null;
    // A claim renews a share whose lease is half spent, so a woken master often learns of the
    // takeover before it commits: the window this variant opens is narrow, and takes more seeds.
    for (let seed = SEED; caught === null && seed < SEED + 40; seed++) {
      try {
        simulate({ kind: "partitioned", seed, steps: 2_000, broken: "stale-commit-check" });
      } catch (err) {
        if (!(err instanceof SimViolation)) throw err;
        caught = err.message;
      }
    }
    assert.ok(caught !== null, "forty seeds ran without a violation");
    assert.match(caught, /under the stale fence|committed twice|stolen/);
    assert.match(caught, /--store partitioned .*--broken stale-commit-check/);
  });

  it("a store whose masters read their own stale copies (ignoring each other's fences) is caught, and the seed replays the same violation", () => {
    const o: SimOptions = { kind: "memory", seed: SEED, steps: 800, broken: "stale-cache" };
    const first = violationOf(o);
    assert.match(first, new RegExp(`seed ${SEED}\\) violated at step [0-9]+: `));
    assert.match(first, /stolen|committed twice|stale fence/);
    assert.match(first, new RegExp(`replay: node --import tsx bench/explore-sim\\.mjs --store memory --seed ${SEED} --runs 1 --steps 800 --contents 40 --broken stale-cache`));
    assert.equal(violationOf(o), first, "the same seed, the same violation at the same step");
  });

  it("a store that publishes children before their commit fence is durable is caught", () => {
    let caught: string | null = null;
    for (let seed = SEED; caught === null && seed < SEED + 5; seed++) {
      try {
        simulate({ kind: "memory", seed, steps: 800, durability: "fence", broken: "unsynced-fence" });
      } catch (err) {
        if (!(err instanceof SimViolation)) throw err;
        caught = err.message;
      }
    }
    assert.ok(caught !== null, "forty seeds ran without a violation");
    assert.match(caught, /publishes the children of content [0-9]+ while its fence .* is not durable|a power cut lost the commit/);
  });
});
