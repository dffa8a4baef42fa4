// A bug resweep closed while finds of it still waited for minimization: minimizing those finds
// later lands them on the fixed failure, which reopens it (the session exits 1). The console says
// so where it happens, on the minimize unit's line, not only in the summary.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { Campaign, PLANTED } from "../helpers/campaign.ts";

const gen = JSON.stringify(PLANTED);
// The minimizer always sees the planted bugs (`env -u PLANTED_FIX`), the sweep only when unfixed.
const generator = `[generator]
command = ["node", ${gen}, "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"]
identity = [${JSON.stringify(PLANTED.replace(/planted\.mjs$/, "*.mjs"))}]
check = ["node", ${gen}, "--check", "--seeds", "{seeds}", "--json"]
minimize = ["env", "-u", "PLANTED_FIX", "node", ${gen}, "--minimize", "--seeds", "{seeds}", "--out", "{out}", "--jobs", "{jobs}"]
`;

describe("a fixed failure reopened by minimizing its old pending finds", () => {
  // share = 0 with one busy lane: no minimize unit runs in the first session, so finds stay pending.
  const options = (share: number) => ({ defaults: { max_shrinks: 1, chunk_minutes: 0.05 }, costMs: 1, generator, extra: `[minimize]\nshare = ${share}\nbatch = 64\n` });
  const c = new Campaign(options(0));
  after(() => c.cleanup());

  test("the minimize unit's line says 'reopened', the summary agrees, and the session exits 1", () => {
    const first = c.cli(["run", "--for", "5s"]);
    assert.equal(first.code, 1, first.stderr);
    const fix = c.cli(["resweep"], { env: { PLANTED_FIX: "crash" } });
    assert.equal(fix.code, 0, fix.stderr);
    const fixed = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE state = 'fixed'").n;
    assert.ok(fixed >= 1, "resweep closed the crash failures");
    const pending = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE bucket = 'crash' AND minimize_state = 'pending' AND state = 'open'").n;
    assert.ok(pending >= 1, "crash finds pending minimization stay open");

    // The sweep no longer meets the crash: only minimization can reopen it.
    c.writeConfig(options(1));
    const second = c.cli(["run", "--for", "10s"], { env: { PLANTED_FIX: "crash" } });
    assert.equal(second.code, 1, `a reopened failure alerts\n${second.stdout}\n${second.stderr}`);
    const reopened = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE state = 'open' AND minimize_state IS NULL AND bucket = 'crash'").n;
    assert.ok(reopened >= 1);
    const lines = second.stdout.split("\n").filter((l) => /minimized \S+ finds \(unit \d+\): .*\d+ reopened/.test(l));
    assert.ok(lines.length >= 1, `a minimize line says reopened:\n${second.stdout}`);
    const onLines = lines.reduce((n, l) => n + Number(/(\d+) reopened/.exec(l)![1]), 0);
    assert.match(second.stdout, new RegExp(`REOPENED: +${onLines} failure\\(s\\) marked fixed were hit again`));
  });
});
