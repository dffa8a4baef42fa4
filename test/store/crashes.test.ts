// What a start after a crash does to the rows a dead process left behind: only 'running'
// sessions and chunks still in flight change; everything that ended keeps its status.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { abortLostChunks, insertChunk, markChunkComplete, markChunkEnded } from "../../src/store/chunks.ts";
import { openStore } from "../../src/store/db.ts";
import { insertGeneration } from "../../src/store/generations.ts";
import { insertLane } from "../../src/store/lanes.ts";
import { endSession, insertSession, markCrashedSessions } from "../../src/store/sessions.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-crashes-"));
after(() => rmSync(root, { recursive: true, force: true }));

test("sessions left running become crashed with no end time; chunks left in flight become aborted:lost", () => {
  const db = openStore(join(root, "a.db"));
  try {
    const gen = insertGeneration(db, "ab".repeat(32), "initial");
    const lane = insertLane(db, gen, "a", "{}", 1);
    const session = (mode: "local" | "distributed") =>
      insertSession(db, { generationId: gen, requestedSeconds: 60, appBuild: null, transport: mode, host: "h", port: null });
    const done = session("local");
    endSession(db, done, "done");
    const deadRun = session("local");
    const deadCoordinator = session("distributed");
    const chunk = (s: number, from: number, status: "running" | "leased") =>
      insertChunk(db, { sessionId: s, laneId: lane, seedFrom: from, seedTo: from + 9, appBuild: null, status, workerId: null });
    const complete = chunk(done, 1, "running");
    markChunkComplete(db, complete, 1, { clean: 10, finds: 0, quarantine: 0, unshrunk: 0 });
    const reissued = chunk(deadCoordinator, 11, "leased");
    markChunkEnded(db, reissued, "reissued", null);
    chunk(deadRun, 21, "running");
    chunk(deadCoordinator, 31, "leased");

    assert.deepEqual(markCrashedSessions(db), [deadRun, deadCoordinator]);
    assert.equal(abortLostChunks(db), 2);
    assert.deepEqual(db.prepare("SELECT id, status, ended_at IS NULL AS open FROM session ORDER BY id").all(), [
      { id: done, status: "done", open: 0 },
      { id: deadRun, status: "crashed", open: 1 },
      { id: deadCoordinator, status: "crashed", open: 1 },
    ]);
    assert.deepEqual(
      (db.prepare("SELECT status, ended_at FROM chunk ORDER BY id").all() as { status: string; ended_at: string | null }[]).map((c) => [
        c.status,
        c.ended_at === null,
      ]),
      [
        ["complete", false],
        ["reissued", false],
        ["aborted:lost", true],
        ["aborted:lost", true],
      ],
    );
    assert.deepEqual(markCrashedSessions(db), [], "idempotent");
    assert.equal(abortLostChunks(db), 0);
  } finally {
    db.close();
  }
});
