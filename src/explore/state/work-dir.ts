// The hidden state of explore campaigns beside their corpus:
//
//   <corpus>/.fuzzfleet/                    the state directory (lock, token file, epochs)
//   <corpus>/.fuzzfleet/work-<epoch>/       one campaign: state.json, leases/, staging/, scratch/
//
// An epoch is 64 random hex digits. A new campaign creates its work directory with a durable
// state.json; --resume reopens one only if its state.json describes exactly that epoch and the
// shard count this version uses.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { HEX64 } from "../../core/message-checks.ts";
import { RuntimeFailure, UsageError } from "../../errors.ts";
import type { KeptOut } from "../../files/output-file.ts";
import { randomHex } from "../../util/random-hex.ts";
import { writeFileAtomic } from "./durable.ts";

/** Shards of the lease table (state.json records it; a resume must agree). */
export const SHARD_COUNT = 64;

const STATE_SCHEMA = "fuzzfleet-explore-state-v1";

export function stateDir(corpusDir: string): string {
  return join(corpusDir, ".fuzzfleet");
}

export function workDir(state: string, epoch: string): string {
  return join(state, `work-${epoch}`);
}

/** A new random epoch, or the one to resume (its state must exist and match). */
export function openEpoch(state: string, resume: string | null): string {
  if (resume === null) {
    const epoch = randomHex(32);
    const work = workDir(state, epoch);
    mkdirSync(work, { recursive: true });
    writeFileAtomic(join(work, "state.json"), JSON.stringify({ schema: STATE_SCHEMA, epoch, shard_count: SHARD_COUNT }) + "\n");
    return epoch;
  }
  if (!HEX64.test(resume)) throw new UsageError(`--resume wants the 64 lowercase hex characters of an epoch (got '${resume}')`);
  const file = join(workDir(state, resume), "state.json");
  let parsed: { schema?: unknown; epoch?: unknown; shard_count?: unknown };
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch {
    const known = existsSync(state) ? readdirSync(state).filter((n) => n.startsWith("work-")).map((n) => n.slice(5)) : [];
    throw new UsageError(`no explore state for epoch ${resume} (no ${file})${known.length ? `; known: ${known.join(", ")}` : ""}`);
  }
  if (parsed.epoch !== resume || parsed.shard_count !== SHARD_COUNT || parsed.schema !== STATE_SCHEMA) {
    throw new RuntimeFailure(`${file} does not describe epoch ${resume} with ${SHARD_COUNT} shards; refusing to resume on it`);
  }
  return resume;
}

/** Whether another master's epoch is visible here (a submaster must see the root's state). */
export function epochVisible(state: string, epoch: string): boolean {
  return existsSync(join(workDir(state, epoch), "state.json"));
}

/** Removes the state directory once no campaign's state is left in it. */
export function removeIfEmpty(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // Not empty (another epoch's state) or already gone.
  }
}

/** Where an explore campaign's export, report or statistics never land: its corpus and the state beside it. */
export function exploreKeptOut(corpusDir: string): KeptOut[] {
  return [
    { dir: corpusDir, what: "the corpus" },
    { dir: stateDir(corpusDir), what: "the campaign state" },
  ];
}
