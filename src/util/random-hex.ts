// Random names and nonces as lowercase hex, drawn from a pool refilled 4 KiB at a time. Temporary
// file names, stage ids and fencing-token nonces are made several times per explore task, and one
// getrandom call each was a measurable share of a trivial task's cost. The bytes are the same
// CSPRNG output randomBytes gives; only the refills are batched.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";

const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let offset = 0;

/** `bytes` random bytes (at most 4096) as 2 × bytes lowercase hex digits. */
export function randomHex(bytes: number): string {
  assert.ok(Number.isSafeInteger(bytes) && bytes >= 1 && bytes <= POOL_BYTES, `randomHex: bytes must be an integer from 1 to ${POOL_BYTES} (got ${bytes})`);
  if (offset + bytes > pool.length) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  offset += bytes;
  return pool.toString("hex", offset - bytes, offset);
}
