// The session summary and the exit code speak of distinct failures: a session whose finds are all
// pending minimization (or hits of known distinct failures) exits 0 and says so, with its new
// pending finds counted apart; exit 1 is owed for a newly distinct (or reopened) failure, and for a
// find under a signature the campaign never saw before, without waiting for its minimization.
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { after, describe, test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign } from "../helpers/campaign.ts";

interface Totals {
  distinct: number;
  pending_finds: number;
}

function signatures(c: Campaign): Set<string> {
  const db = new Database(c.dbPath, { readonly: true, fileMustExist: true });
  try {
    return new Set((db.prepare("SELECT DISTINCT signature FROM failure").all() as { signature: string }[]).map((r) => r.signature));
  } finally {
    db.close();
  }
}

describe("a second planted run that adds only finds pending minimization", () => {
  // No minimizer and a low shrink cap: every chunk leaves finds unshrunk. The second run shrinks
  // nothing ([defaults] are not part of the generation), so all it finds is pending.
  const c = new Campaign({ defaults: { max_shrinks: 3, chunk_minutes: 0.05 }, costMs: 1 });
  after(() => c.cleanup());

  test("prints 0 newly distinct, counts its new pending finds apart, and exits 1 only for a signature never seen before", () => {
    const first = c.cli(["run", "--for", "10s"]);
    assert.equal(first.code, 1, first.stdout + first.stderr);
    assert.equal(first.code, exitOwed(c, first.stdout));
    const before = JSON.parse(c.cli(["failures", "--json"]).stdout) as { totals: Totals };
    assert.ok(before.totals.distinct >= 1 && before.totals.pending_finds >= 1, JSON.stringify(before.totals));
    const known = signatures(c);

    c.writeConfig({ defaults: { max_shrinks: 0, chunk_minutes: 0.05 }, costMs: 1 });
    const second = c.cli(["run", "--for", "6s"]);
    const after = JSON.parse(c.cli(["failures", "--json"]).stdout) as { totals: Totals };
    assert.equal(after.totals.distinct, before.totals.distinct, "nothing newly distinct");
    assert.ok(after.totals.pending_finds > before.totals.pending_finds, "the second run added pending finds");
    const m = /failures: +0 newly distinct; ([\d,]+) new unshrunk find\(s\), not distinct failures until minimized/.exec(second.stdout);
    assert.ok(m, second.stdout);
    assert.equal(Number(m[1]!.replace(/,/g, "")), after.totals.pending_finds - before.totals.pending_finds, "the new pending finds, counted once");
    const fresh = [...signatures(c)].filter((s) => !known.has(s));
    if (fresh.length === 0) {
      assert.doesNotMatch(second.stdout, /signature never seen before/);
      assert.equal(second.code, 0, `nothing newly distinct and no new signature: exit 0\n${second.stdout}${second.stderr}`);
    } else {
      assert.match(second.stdout, new RegExp(`\\(${fresh.length} under a signature never seen before: exit 1\\)`));
      assert.equal(second.code, 1, `a signature never seen before: exit 1\n${second.stdout}${second.stderr}`);
    }
    assert.equal(second.code, exitOwed(c, second.stdout));
    assert.match(second.stdout, /open failures: .* distinct; [\d,]+ find\(s\) pending minimization in [\d,]+ signature\(s\)/);
  });
});

describe("a first run whose finds are all pending minimization", () => {
  const c = new Campaign({ defaults: { max_shrinks: 0, chunk_minutes: 0.05 }, costMs: 1 });
  after(() => c.cleanup());

  test("exits 1 at once for its signatures never seen before, though none of them is a distinct failure yet", () => {
    const r = c.cli(["run", "--for", "6s"]);
    const totals = (JSON.parse(c.cli(["failures", "--json"]).stdout) as { totals: Totals }).totals;
    assert.equal(totals.distinct, 0, "nothing was minimized");
    assert.ok(totals.pending_finds >= 1, JSON.stringify(totals));
    const seen = signatures(c).size;
    assert.match(r.stdout, new RegExp(`failures: +0 newly distinct; [\\d,]+ new unshrunk find\\(s\\), not distinct failures until minimized \\(${seen} under a signature never seen before: exit 1\\)`));
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.equal(r.code, exitOwed(c, r.stdout));
  });
});
