// The session summary says "pending minimization" once, with the count the store holds at the
// end: the session's own unshrunk counts go stale as minimize units run during the session, and
// printing them under the same words showed two different pending counts three lines apart.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { Campaign, PLANTED } from "../helpers/campaign.ts";

const gen = JSON.stringify(PLANTED);
const generator = `[generator]
command = ["node", ${gen}, "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"]
identity = [${JSON.stringify(PLANTED.replace(/planted\.mjs$/, "*.mjs"))}]
check = ["node", ${gen}, "--check", "--seeds", "{seeds}", "--json"]
minimize = ["node", ${gen}, "--minimize", "--seeds", "{seeds}", "--out", "{out}", "--jobs", "{jobs}"]
`;

describe("one pending-minimization count in the session summary", () => {
  const c = new Campaign({ defaults: { max_shrinks: 1, chunk_minutes: 0.05 }, costMs: 1, generator, extra: "[minimize]\nshare = 1\nbatch = 16\n" });
  after(() => c.cleanup());

  test("while minimize units ran, the summary names one pending count and it is the store's", () => {
    const r = c.cli(["run", "--for", "8s"]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /minimized: +[\d,]+ find\(s\) in [\d,]+ unit\(s\)/, "minimize units ran during the session");
    const summary = r.stdout.slice(r.stdout.indexOf("\nsession "));
    const said = [...summary.matchAll(/([\d,]+) find\(s\) pending minimization/g)].map((m) => Number(m[1]!.replace(/,/g, "")));
    const totals = (JSON.parse(c.cli(["failures", "--json"]).stdout) as { totals: { pending_finds: number } }).totals;
    // Minimization may drain the queue before the end: then no pending count at all.
    assert.deepEqual(said, totals.pending_finds > 0 ? [totals.pending_finds] : [], summary);
    assert.ok((summary.match(/pending minimization/g) ?? []).length <= 1, summary);
  });
});
