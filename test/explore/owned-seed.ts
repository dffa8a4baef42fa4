// A master of rank 0 of two, serving its share from a lease directory that another table can take
// over, with one seed it owns waiting in its input directory and the wall clock injected: for the
// tests of what a lost share does to the counts (rerun-count, stats-after-stall).
import { mkdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { owner } from "../../src/core/rendezvous.ts";
import { DEFAULT_BUDGETS } from "../../src/explore/defaults.ts";
import type { ExecuteSetup } from "../../src/explore/executor/execute.ts";
import type { ExploreMaster } from "../../src/explore/master/master.ts";
import { LeaseTable } from "../../src/explore/state/lease-table.ts";
import { loneMaster } from "../helpers/explore.ts";
import { sha256 } from "../helpers/scratch.ts";

export interface OwnedSeed {
  dir: string;
  corpusDir: string;
  leasesRoot: string;
  leases: LeaseTable;
  master: ExploreMaster;
  /** The wall clock the master and its table read (ms); move it forward to let a lease expire. */
  clock: { now: number };
  /** A slot's execution set-up: simulate mode, whose children depend only on the input. */
  setup: (slot: string) => ExecuteSetup;
}

export function ownedSeedMaster(dir: string, ttlMs: number): OwnedSeed {
  const inputDir = join(dir, "in");
  const corpusDir = join(dir, "corpus");
  mkdirSync(inputDir);
  mkdirSync(corpusDir);
  // A content rank 0 owns, so that it claims it.
  let n = 0;
  while (owner(sha256(`seed ${n}\n`), [0, 1]) !== 0) n++;
  writeFileSync(join(inputDir, "seed"), `seed ${n}\n`);
  const old = new Date(Date.now() - 3600_000);
  utimesSync(join(inputDir, "seed"), old, old);
  const clock = { now: Date.now() };
  const leasesRoot = join(dir, "leases");
  const leases = new LeaseTable({ root: leasesRoot, durability: "fence" });
  const master = loneMaster({ dir, corpusDir, inputDir }, { leases, ranks: [0, 1], leaseTtlMs: ttlMs, wallNow: () => clock.now });
  const setup = (slot: string): ExecuteSetup => ({
    corpusDir,
    stageRoot: master.stageRoot(slot),
    target: ["/bin/true", "@@"],
    targetCwd: dir,
    simulate: true,
    budgets: DEFAULT_BUDGETS,
    scratchRoot: join(dir, "scratch", slot),
  });
  return { dir, corpusDir, leasesRoot, leases, master, clock, setup };
}
