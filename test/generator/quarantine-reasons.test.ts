// Quarantine keeps its reason: quarantine/why/<name> is read per file (never through a symlink),
// counted per reason, recorded with the chunk, and an "inconclusive:" reason is told apart from
// an invalid test.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ingestChunk } from "../../src/sweep/generator/ingest.ts";
import { markChunkComplete } from "../../src/store/chunks.ts";
import { quarantineGroups } from "../../src/store/quarantine.ts";
import { ingestBench } from "../sweep/ingest-fixture.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-qreason-"));
after(() => rmSync(root, { recursive: true, force: true }));

test("reasons are counted per file and grouped; inconclusive ones are marked; a symlinked reason is not followed", () => {
  const bench = ingestBench(root);
  const t = bench.chunk(1, 100);
  const q = join(t.scratch, "quarantine");
  mkdirSync(join(q, "why"), { recursive: true });
  writeFileSync(join(root, "secret"), "inconclusive: read through a link\n");
  const files: Record<string, string | null> = {
    "1.c": "inconclusive: reference binary ran over 10s\nsecond line ignored\n",
    "2.c": "inconclusive: reference binary ran over 10s\n",
    "3.c": "stack underflow\n",
    "4.c": null, // no reason file
  };
  for (const [name, why] of Object.entries(files)) {
    writeFileSync(join(q, name), "int main(void) { return 0; }\n");
    if (why !== null) writeFileSync(join(q, "why", name), why);
  }
  writeFileSync(join(q, "5.c"), "x\n");
  symlinkSync(join(root, "secret"), join(q, "why", "5.c"));
  const r = ingestChunk(bench.store, t);
  assert.equal(r.quarantine, 5);
  assert.deepEqual(
    [...r.quarantineReasons].sort((a, b) => a.reason.localeCompare(b.reason)),
    [
      { reason: "no reason given", inconclusive: false, count: 2 },
      { reason: "reference binary ran over 10s", inconclusive: true, count: 2 },
      { reason: "stack underflow", inconclusive: false, count: 1 },
    ],
  );
  markChunkComplete(bench.db, t.chunkId, 1, { clean: 95, finds: 0, quarantine: r.quarantine, unshrunk: 0 });
  assert.deepEqual(quarantineGroups(bench.db, t.generationId), [
    { reason: "no reason given", inconclusive: false, count: 2 },
    { reason: "reference binary ran over 10s", inconclusive: true, count: 2 },
    { reason: "stack underflow", inconclusive: false, count: 1 },
  ]);
  // Replayed (a commit that failed), the chunk's rows end the same, not doubled.
  ingestChunk(bench.store, t);
  assert.equal(quarantineGroups(bench.db, t.generationId).reduce((n, g) => n + g.count, 0), 5);
  bench.db.close();
});
