// The seats of a master that took over a lost root's role: only the submasters expected back may
// sit, each at its own rank, once; the ones that never sat are named.
import assert from "node:assert/strict";
import { test } from "node:test";
import { RejoinSeats } from "../../src/core/join-roster.ts";

const EPOCH = "e".repeat(64);

test("only an expected rank may rejoin, asking for itself, once; its roster names every rank of the campaign", () => {
  const seats = new RejoinSeats([0, 1, 2, 3], [2, 3], 1, EPOCH);
  assert.match(seats.noSeat(null)!, /rank 1 leads this campaign since its root was lost: only its masters rejoin, each asking for its own rank/);
  assert.match(seats.noSeat(0)!, /rank 0 is not expected back \(expected: 2, 3\)/);
  assert.match(seats.noSeat(1)!, /rank 1 is not expected back/);
  assert.deepEqual(seats.absent, [2, 3]);
  const took = seats.take("hostC", 3);
  assert.ok("rank" in took);
  assert.equal(took.rank, 3);
  assert.equal(took.line, "master hostC rejoined as rank 3 (1 of 2 expected)");
  assert.deepEqual(seats.roster(3), { type: "roster", epoch: EPOCH, rank: 3, ranks: [0, 1, 2, 3] });
  assert.deepEqual(seats.take("hostD", 3), { refused: "rank 3 has rejoined already (from hostC)" });
  assert.deepEqual(seats.absent, [2]);
  seats.close(30_000);
  assert.match(seats.noSeat(2)!, /had 30s to rejoin after the root was lost; this one is too late and was dropped from the vote/);
  assert.deepEqual(seats.absent, [2]);
});

test("the leader is never among the ranks expected back", () => {
  assert.throws(() => new RejoinSeats([0, 1, 2], [1, 2], 1, EPOCH), /the leader \(rank 1\) does not rejoin itself/);
});
