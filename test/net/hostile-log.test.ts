// What hostile peers can do to a live coordinator's log: nothing. Their bytes and host names
// reach it escaped, so an escape sequence cannot drive the operator's terminal and a newline
// cannot forge a line; thousands of refusals cost a bounded number of lines, each refusal either
// written or counted in a summary.
import assert from "node:assert/strict";
import { test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, distributedTable, startCoordinator, waitFor } from "../helpers/campaign.ts";
import { campaignToken, fakeWorker, frameBytes } from "../helpers/wire.ts";
import { answerKind, flood, sendOnce } from "./attack.mjs";

const FLOOD = 3000;

test("an escape sequence or a newline in a refused body or a worker's host name never reaches the log raw; thousands of refusals cost a bounded number of lines with the suppressed counts", async (t) => {
  const c = new Campaign({ extra: distributedTable() });
  try {
    const coord = await startCoordinator(c, ["--for", "10m"]);
    const token = campaignToken(c.outDir);

    const body = "x\x1b[2J\x1b[H\nREFUSED forged by the body";
    const bodyAnswer = await sendOnce(coord.port, Buffer.concat([Buffer.from(`${Buffer.byteLength(body)}\n`), Buffer.from(body)]));
    assert.equal(answerKind(bodyAnswer), "refused");
    const refusal = JSON.parse(bodyAnswer.reply.slice(bodyAnswer.reply.indexOf("\n") + 1)) as { reason: string };
    assert.match(refusal.reason, /^frame body is not JSON \(.*x\\x1b\[2J/, "the reason sent back is escaped too");

    const evil = await fakeWorker(coord.port, token, "evil\nREFUSED forged by the host\x1b]0;pwned\x07");
    const label = `evil\\x0aREFUSED forged by the host\\x1b]0;pwned\\x07#${evil.workerId}`;
    await waitFor("the evil worker's join line", () => (coord.output().includes(`worker ${label} joined`) ? true : undefined));
    evil.conn.destroy();
    await waitFor("the evil worker's leave line", () => (coord.output().includes(`worker ${label} left`) ? true : undefined));

    const answers = await flood(FLOOD, 50, () => sendOnce(coord.port, frameBytes({ type: "status", token: "not-the-token", json: false })));
    coord.child.kill("SIGINT");
    const rc = await coord.result;
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    const out = rc.stdout + rc.stderr;
    const lines = out.split("\n");

    assert.ok(!/[\x00-\x08\x0b-\x1f\x7f]/.test(out), "no control character but newlines in the whole log");
    assert.deepEqual(lines.filter((l) => /^(\[[\d:]+\] )?REFUSED forged/.test(l)), [], "no forged line");
    assert.match(out, /REFUSED 127\.0\.0\.1:\d+ — frame body is not JSON \(.*x\\x1b\[2J\\x1b\[H\\x0aR/, "V8 quotes the start of the body");
    assert.equal(c.one<{ host: string }>("SELECT host FROM worker").host, "evil\\x0aREFUSED forged by the host\\x1b]0;pwned\\x07", "the store keeps the printable name");

    // Every refusal is written or counted: the body, then the flood.
    const shown = lines.filter((l) => /REFUSED 127\.0\.0\.1:\d+ — /.test(l)).length;
    const shownAtAccept = lines.filter((l) => /REFUSED 127\.0\.0\.1:\d+ at accept — /.test(l)).length;
    const counted = (re: RegExp) => lines.reduce((n, l) => n + Number(re.exec(l)?.[1] ?? 0), 0);
    const suppressed = counted(/REFUSED (\d+) more connection\(s\) within 10s, not logged one by one/);
    const suppressedAtAccept = counted(/REFUSED (\d+) more connection\(s\) at accept within 10s/);
    const kinds = answers.map(answerKind);
    assert.equal(kinds.filter((k) => k === "never connected").length, 0);
    assert.equal(shown + suppressed + shownAtAccept + suppressedAtAccept, FLOOD + 1, "each refusal once, written or counted");
    assert.ok(suppressed > FLOOD / 2, `most refusals were counted, not written (${suppressed})`);
    const refusalLines = lines.filter((l) => /REFUSED/.test(l)).length;
    assert.ok(refusalLines <= 60, `${refusalLines} refusal lines for ${FLOOD + 1} refusals`);
    t.diagnostic(`${refusalLines} refusal lines: ${shown} shown + ${suppressed} counted, at accept ${shownAtAccept} shown + ${suppressedAtAccept} counted`);
  } finally {
    c.cleanup();
  }
});
