// Schema 1 -> 2 on a store written by schema-1 fuzzfleet: test/fixtures/store/v1-planted.db is the
// store a 12-second `fuzzfleet run` of the init template (max_shrinks = 2, chunk_minutes = 0.05,
// jobs = 1) left with the schema-1 code: 30 failure rows, 2 of them shrunk, 39 hits. After the
// migration every row has its signature, every unshrunk row is a find pending minimization, and the
// reports count 2 distinct failures plus 28 pending finds, whose hits add up to the same 39.
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { openStore } from "../../src/store/db.ts";
import { openSweepStore } from "../../src/store/sqlite/index.ts";
import { SCHEMA_VERSION } from "../../src/store/migrations.ts";
import { failuresData } from "../../src/sweep/views/failures.ts";
import { statusData } from "../../src/sweep/views/status.ts";

const fixture = join(import.meta.dirname, "..", "fixtures", "store", "v1-planted.db");
const root = mkdtempSync(join(tmpdir(), "fuzzfleet-migrate-"));
after(() => rmSync(root, { recursive: true, force: true }));

test("a schema-1 store opens read-only with a clear message, then a writer migrates it in place", () => {
  const path = join(root, "a.db");
  copyFileSync(fixture, path);
  assert.throws(() => openStore(path, { readonly: true }), new RegExp(`schema version 1, this fuzzfleet reads ${SCHEMA_VERSION}; a writing command \\('fuzzfleet run'\\) upgrades it`));
  const db = openStore(path);
  try {
    assert.equal(db.pragma("user_version", { simple: true }), SCHEMA_VERSION);
    const rows = db.prepare("SELECT id, bucket, message, shrunk, hits, signature, minimize_state, merged_into FROM failure ORDER BY id").all() as {
      id: number;
      bucket: string;
      message: string;
      shrunk: number;
      hits: number;
      signature: string | null;
      minimize_state: string | null;
      merged_into: number | null;
    }[];
    assert.equal(rows.length, 30, "no row is lost or added");
    assert.equal(rows.reduce((n, r) => n + r.hits, 0), 39, "hits are kept");
    for (const r of rows) {
      assert.ok(r.signature?.startsWith(`${r.bucket}: `), `row ${r.id} has a signature: ${r.signature}`);
      assert.doesNotMatch(r.signature!, /\d/, "numbers are normalised away");
      assert.equal(r.minimize_state, r.shrunk === 1 ? null : "pending", `row ${r.id}: unshrunk means pending minimization`);
      assert.equal(r.merged_into, null);
    }
    assert.equal(rows.filter((r) => r.shrunk === 0).length, 28);
    // Failure seeds still belong to their rows.
    const seeds = db.prepare("SELECT COUNT(*) AS n FROM failure_seed").get() as { n: number };
    assert.equal(seeds.n, 39);
  } finally {
    db.close();
  }
  const reader = openSweepStore(path, { readonly: true });
  try {
    const f = failuresData(reader, root, { state: "all", bucket: null, allGenerations: false });
    assert.equal(f.failures.length, 2, "only the minimized rows are distinct failures");
    assert.equal(f.totals.pending_finds, 28);
    assert.equal(f.totals.distinct_hits + f.totals.pending_hits, 39, "distinct and pending hits add up to every failing seed");
    assert.equal(f.totals.hits, 39);
    // crash messages name two idioms ('dup; drop' and 'swap; swap'): at most one signature each, plus the other buckets.
    const signatures = new Set(f.pending.map((g) => g.signature));
    assert.ok(signatures.size < 28, `pending finds group into few signatures (${[...signatures].join(" | ")})`);
    const s = statusData(reader, { genHashNow: null, appBuildNow: null, outDir: root });
    assert.deepEqual(s.failure_totals, f.totals, "status and failures count the same");
    assert.equal(s.minimize.pending, 28);
    assert.equal(s.quarantine_reasons.reduce((n, g) => n + g.count, 0), s.totals.quarantine, "old quarantine is counted, as 'no reason recorded'");
    assert.ok(s.quarantine_reasons.every((g) => g.reason === "no reason recorded"));
  } finally {
    reader.close();
  }
});
