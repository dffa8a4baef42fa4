// The rendezvous owner: deterministic, balanced, minimal remapping, strict about its inputs.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { owner, ownerScore } from "../../src/core/rendezvous.ts";

const HASHES = Array.from({ length: 600 }, (_, i) => createHash("sha256").update(`seed-${i}`).digest("hex"));

test("the owner is a pure function of the hash and the rank set", () => {
  const first = HASHES.map((h) => owner(h, [0, 1, 2]));
  const second = HASHES.map((h) => owner(h, [0, 1, 2]));
  assert.deepEqual(first, second);
  assert.ok(first.every((r) => r === 0 || r === 1 || r === 2));
});

test("the owner is the rank with the highest 128-bit score of the domain-separated digest", () => {
  const h = HASHES[7];
  const expected = (rank: number) =>
    createHash("sha256").update(`fuzzfleet-owner-v1\0${h}\0${rank}`).digest().subarray(0, 16).readBigUInt64BE(0);
  const scores = [0, 1, 2].map((r) => ({ r, hi: expected(r), hex: ownerScore(h, r) }));
  for (const s of scores) assert.equal(BigInt(`0x${s.hex.slice(0, 16)}`), s.hi);
  const best = scores.reduce((a, b) => (BigInt(`0x${b.hex}`) > BigInt(`0x${a.hex}`) ? b : a));
  assert.equal(owner(h, [0, 1, 2]), best.r);
});

test("three masters each own between 150 and 250 of 600 hashes", () => {
  const counts = [0, 0, 0];
  for (const h of HASHES) counts[owner(h, [0, 1, 2])]++;
  for (const c of counts) assert.ok(c >= 150 && c <= 250, `unbalanced split ${counts.join("/")}`);
  assert.equal(counts[0] + counts[1] + counts[2], 600);
});

test("adding master 3 moves keys only to master 3", () => {
  let moved = 0;
  for (const h of HASHES) {
    const before = owner(h, [0, 1, 2]);
    const after = owner(h, [0, 1, 2, 3]);
    if (after !== before) {
      assert.equal(after, 3, `hash ${h} moved from ${before} to ${after}`);
      moved++;
    }
  }
  assert.ok(moved > 0, "the new master must win some keys");
});

test("duplicate and unordered rank lists give the same owner", () => {
  for (const h of HASHES.slice(0, 100)) {
    const canonical = owner(h, [0, 1, 2]);
    assert.equal(owner(h, [2, 0, 1]), canonical);
    assert.equal(owner(h, [1, 1, 2, 0, 2, 0]), canonical);
  }
  assert.equal(owner(HASHES[0], [5, 5, 5]), 5);
});

test("an invalid hash, a bad rank or an empty rank list throws", () => {
  const h = HASHES[0];
  assert.throws(() => owner(h.toUpperCase(), [0, 1]), /64 lowercase hex/);
  assert.throws(() => owner(h.slice(1), [0, 1]), /64 lowercase hex/);
  assert.throws(() => owner(`${h.slice(1)}g`, [0, 1]), /64 lowercase hex/);
  assert.throws(() => owner(h, [0, -1]), /non-negative integer/);
  assert.throws(() => owner(h, [0, 1.5]), /non-negative integer/);
  assert.throws(() => owner(h, [0, Number.NaN]), /non-negative integer/);
  assert.throws(() => owner(h, []), /at least one master rank/);
});
