// Highest-random-weight (rendezvous) owner of a content hash among the masters of an explore
// campaign. Every master computes the same owner from the hash and the rank list alone, with no
// routing table; adding a master moves only the keys the new master wins. This is placement
// only: two masters may still race for one hash, and the fenced lease decides who runs it.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { HEX64 } from "./message-checks.ts";

/** Domain separation for the score; changing it remaps every key, so it is versioned. */
export const OWNER_DOMAIN = "fuzzfleet-owner-v1";

const CONTENT_HASH = HEX64;

/**
 * The score of `rank` for `hash`: the first 128 bits of
 * SHA-256(OWNER_DOMAIN NUL hash NUL decimal(rank)), as 32 lowercase hex characters. Equal-length
 * hex strings compare like the big-endian integers they spell.
 */
export function ownerScore(hash: string, rank: number): string {
  assertContentHash(hash);
  assertRank(rank);
  return createHash("sha256")
    .update(`${OWNER_DOMAIN}\0${hash}\0${rank}`, "ascii")
    .digest("hex")
    .slice(0, 32);
}

/**
 * The rank with the highest score for `hash`; among equal scores the lowest rank wins.
 * Duplicates and order in `ranks` do not matter. Throws on a hash that is not 64 lowercase hex,
 * on a rank that is not a non-negative integer, and on an empty rank list.
 */
export function owner(hash: string, ranks: readonly number[]): number {
  assertContentHash(hash);
  assert.ok(ranks.length > 0, "owner needs at least one master rank");
  for (const rank of ranks) assertRank(rank);
  const unique = [...new Set(ranks)].sort((a, b) => a - b);
  let best = unique[0];
  let bestScore = ownerScore(hash, best);
  for (const rank of unique.slice(1)) {
    const score = ownerScore(hash, rank);
    // Strictly greater: ranks are visited in ascending order, so a tie keeps the lower rank.
    if (score > bestScore) {
      best = rank;
      bestScore = score;
    }
  }
  return best;
}

function assertContentHash(hash: string): void {
  assert.ok(
    typeof hash === "string" && CONTENT_HASH.test(hash),
    `a content hash must be 64 lowercase hex characters, got ${JSON.stringify(hash)}`,
  );
}

function assertRank(rank: number): void {
  assert.ok(Number.isSafeInteger(rank) && rank >= 0, `a master rank must be a non-negative integer, got ${String(rank)}`);
}
