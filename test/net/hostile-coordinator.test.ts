// A live coordinator under a memory attack: peers without the token declare 4 MiB first frames
// over 400 connections (coming back soon after each refusal) and send 3,000 malformed frames,
// while an honest worker sweeps beside them. Memory stays bounded, the worker keeps completing
// chunks, and the store holds nothing but the worker's work. (bench/hostile.mjs measures the
// same attack at 10,000 malformed frames.)
import assert from "node:assert/strict";
import { test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, coverageViolations, distributedTable, start, startCoordinator, waitFor } from "../helpers/campaign.ts";
import { campaignToken } from "../helpers/wire.ts";
import { answerKind, besiege, flood, malformedFrames, memoryOf, sendOnce, unanswered, type Answer } from "./attack.mjs";

const DECLARERS = 400;
const MALFORMED = 3_000;
const MEMORY_LIMIT_MB = 150;
/** A refused declarer comes back after this long. */
const RECONNECT_MS = 2000;

test("400 connections declaring 4 MiB and 3,000 malformed frames keep the coordinator at or under 150 MB while an honest worker keeps completing chunks", async (t) => {
  const c = new Campaign({ extra: distributedTable(), costMs: 1, defaults: { chunk_minutes: 0.02, bootstrap_seeds: 50 } });
  try {
    const coord = await startCoordinator(c, ["--for", "10m"]);
    const pid = coord.child.pid!;
    const worker = start(c, ["worker", "--master", `127.0.0.1:${coord.port}`, "-j", "1"]);
    const completed = () => c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE status = 'complete'").n;
    await waitFor("the honest worker's first chunk", () => (completed() > 0 ? true : undefined), 60_000);
    const atRest = memoryOf(pid);

    const bodies = malformedFrames(campaignToken(c.outDir));
    const progress = [completed()];
    const attack = await besiege(coord.port, pid, { declarers: DECLARERS, reconnectMs: RECONNECT_MS }, () =>
      flood(MALFORMED, 50, async (i) => {
        if (i === MALFORMED / 2) progress.push(completed());
        return sendOnce(coord.port, bodies[i % bodies.length]!);
      }),
    );
    progress.push(completed());
    const { declared, result: malformed } = attack;
    const after = memoryOf(pid);

    coord.child.kill("SIGINT");
    const [rc, rw] = await Promise.all([coord.result, worker.result]);
    assert.equal(rc.code, exitOwed(c, rc.stdout), `the coordinator ended as its session owes (exit ${rc.code})\n${rc.stdout.slice(-3000)}\n${rc.stderr}`);
    assert.equal(rw.code, 0, rw.stdout + rw.stderr);

    const report = `at rest ${atRest.rssMB.toFixed(0)} MB; during the attack up to ${attack.rssMaxMB.toFixed(0)} MB RSS, peak (VmHWM) ${after.peakMB.toFixed(0)} MB`;
    assert.ok(after.peakMB <= MEMORY_LIMIT_MB, report);
    assert.ok(progress[0]! < progress[1]! && progress[1]! < progress[2]!, `completed chunks at the start, middle and end of the attack: ${progress.join(", ")}`);

    const kinds = (answers: Answer[]) => {
      const n: Record<ReturnType<typeof answerKind>, number> = { "refused at accept": 0, refused: 0, "never connected": 0, "no reply": 0 };
      for (const a of answers) n[answerKind(a)]++;
      return n;
    };
    const d = kinds(declared);
    assert.ok(declared.length >= DECLARERS);
    assert.deepEqual(unanswered(declared).slice(0, 3), [], `every declarer let in was refused with a reason or reset: ${JSON.stringify(d)}`);
    assert.ok(d["refused at accept"] > 0, `the cap on unauthenticated connections was reached: ${JSON.stringify(d)}`);
    for (const a of declared.filter((x) => answerKind(x) === "refused")) assert.match(a.reply, /over the 8192-byte cap of a first frame/);
    const m = kinds(malformed);
    assert.deepEqual(unanswered(malformed).slice(0, 3), [], `every malformed frame let in was refused with a reason or reset: ${JSON.stringify(m)}`);
    // Refusals at accept are counted, and written once per 10 s window.
    const lines = rc.stdout.split("\n");
    const shownAtAccept = lines.filter((l) => /REFUSED 127\.0\.0\.1:\d+ at accept — /.test(l)).length;
    const countedAtAccept = lines.reduce((n, l) => n + Number(/REFUSED (\d+) more connection\(s\) at accept within 10s/.exec(l)?.[1] ?? 0), 0);
    const seenAtAccept = d["refused at accept"] + m["refused at accept"];
    assert.ok(shownAtAccept + countedAtAccept >= seenAtAccept && shownAtAccept + countedAtAccept <= seenAtAccept + d["no reply"] + m["no reply"]);
    const windows = Math.ceil(attack.seconds / 10) + 1;
    assert.ok(shownAtAccept <= windows, `${shownAtAccept} lines for refusals at accept in ${attack.seconds.toFixed(0)} s`);
    t.diagnostic(`${report}; completed chunks ${progress.join(" -> ")}; declarers ${JSON.stringify(d)}; malformed ${JSON.stringify(m)}`);

    assert.deepEqual(
      c.query<{ host: string }>("SELECT host FROM worker").map((w) => w.host).length,
      1,
      "the only worker on record is the honest one",
    );
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM chunk WHERE status = 'complete' AND worker_id != (SELECT MIN(id) FROM worker)").n, 0);
    assert.deepEqual(coverageViolations(c), []);
  } finally {
    c.cleanup();
  }
});
