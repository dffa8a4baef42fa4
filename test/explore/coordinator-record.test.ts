// Where the master that took over a lost root's role listens: written whole, read back, and a file
// that is not such a record (torn, planted, a symbolic link) named as a problem, never trusted.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { coordinatorPath, readCoordinator, writeCoordinator } from "../../src/explore/state/coordinator-record.ts";

test("a leader record is read back as written; none is null", () => {
  const dir = mkdtempSync(join(tmpdir(), "ff-coord-"));
  try {
    assert.deepEqual(readCoordinator(dir), { record: null, problem: null });
    writeCoordinator(dir, { rank: 2, generation: 3, host: "10.0.0.2", port: 7001 });
    assert.deepEqual(readCoordinator(dir), { record: { rank: 2, generation: 3, host: "10.0.0.2", port: 7001 }, problem: null });
    assert.throws(() => writeCoordinator(dir, { rank: 0, generation: 1, host: "h", port: 1 }), /too_small/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a torn, foreign or linked record is a problem with its path, and no record", () => {
  const dir = mkdtempSync(join(tmpdir(), "ff-coord-"));
  try {
    const path = coordinatorPath(dir);
    writeFileSync(path, '{"rank": 2, "generation"');
    assert.deepEqual(readCoordinator(dir), { record: null, problem: `${path} is not JSON` });
    writeFileSync(path, JSON.stringify({ rank: 2, generation: 3, host: "h", port: 70000 }));
    const far = readCoordinator(dir);
    assert.equal(far.record, null);
    assert.match(far.problem!, /is no leader record/);
    writeFileSync(path, JSON.stringify({ rank: 2, generation: 3, host: "h", port: 7001, extra: 1 }));
    assert.equal(readCoordinator(dir).record, null);
    rmSync(path);
    const elsewhere = join(dir, "elsewhere.json");
    writeFileSync(elsewhere, JSON.stringify({ rank: 2, generation: 3, host: "h", port: 7001 }));
    symlinkSync(elsewhere, path);
    const linked = readCoordinator(dir);
    assert.equal(linked.record, null);
    assert.match(linked.problem!, /symbolic link|symlink/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
