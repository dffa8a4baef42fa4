// A live explore master under a memory attack: peers without the token declare 4 MiB first
// frames over 400 connections (coming back soon after each refusal) and send 3,000 malformed
// frames, while an honest worker explores an endless chain beside them. Memory stays bounded,
// the worker keeps committing tasks, and the corpus holds nothing but the chain.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { CLI, waitFor } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { answerKind, besiege, flood, malformedFrames, memoryOf, sendOnce, unanswered } from "./attack.mjs";

const TOKEN = "hostile-explore-token-0123456789";
const DECLARERS = 400;
const MALFORMED = 3_000;
const MEMORY_LIMIT_MB = 150;
const RECONNECT_MS = 2000;

test("400 connections declaring 4 MiB and 3,000 malformed frames keep an explore master at or under 150 MB while an honest worker keeps committing tasks", async (t) => {
  const e = new ExploreDir();
  try {
    e.seed("s", "s");
    // Each input has one child, itself plus an "x": the frontier never ends.
    const target = e.script("chain.sh", `sleep 0.05; { cat "$1"; printf x; } > "$SYMCC_OUTPUT_DIR/child"`);
    const master = e.startWith(["explore", "-i", e.seeds, "-o", e.corpus, "-j", "0", "--port", "0", "--bind", "127.0.0.1", "--token", TOKEN, "--max-idle", "60", "-t", "5", "--", target, "@@"]);
    const port = await master.port();
    const pid = master.child.pid!;
    const worker = spawn(process.execPath, [CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", TOKEN], { cwd: e.dir, stdio: ["ignore", "pipe", "pipe"] });
    let wout = "";
    worker.stdout!.setEncoding("utf8").on("data", (d: string) => (wout += d));
    worker.stderr!.setEncoding("utf8").on("data", (d: string) => (wout += d));
    const workerDone = new Promise<number | null>((resolve) => worker.on("close", (code) => resolve(code)));
    const committed = () => wout.split("\n").filter((l) => l.endsWith("(committed)")).length;
    await waitFor("the honest worker's first commit", () => (committed() > 0 ? true : undefined), 60_000);
    const atRest = memoryOf(pid);

    const bodies = malformedFrames(TOKEN);
    const progress = [committed()];
    const attack = await besiege(port, pid, { declarers: DECLARERS, reconnectMs: RECONNECT_MS }, () =>
      flood(MALFORMED, 50, async (i) => {
        if (i === MALFORMED / 2) progress.push(committed());
        return sendOnce(port, bodies[i % bodies.length]!);
      }),
    );
    progress.push(committed());
    const { declared, result: malformed } = attack;
    const after = memoryOf(pid);

    master.child.kill("SIGINT");
    const m = await master.done;
    assert.equal(m.code, 6, master.output().slice(-3000));
    assert.equal(await workerDone, 0, wout.slice(-3000));

    const report = `at rest ${atRest.rssMB.toFixed(0)} MB; during the attack up to ${attack.rssMaxMB.toFixed(0)} MB RSS, peak (VmHWM) ${after.peakMB.toFixed(0)} MB`;
    assert.ok(after.peakMB <= MEMORY_LIMIT_MB, report);
    assert.ok(progress[0]! < progress[1]! && progress[1]! < progress[2]!, `committed tasks at the start, middle and end of the attack: ${progress.join(", ")}`);

    assert.deepEqual(unanswered(declared).slice(0, 3), [], "each declarer was refused with a reason or reset");
    assert.deepEqual(unanswered(malformed).slice(0, 3), [], "each malformed frame was refused with a reason or reset");
    assert.ok(declared.some((a) => answerKind(a) === "refused at accept"), "the cap on unauthenticated connections was reached");
    for (const a of declared.filter((x) => answerKind(x) === "refused")) assert.match(a.reply, /over the 8192-byte cap of a first frame/);

    const files = e.corpusFiles();
    assert.ok(files.length >= progress[2]!, `${files.length} corpus files`);
    for (const f of files) assert.match(readFileSync(join(e.corpus, f), "utf8"), /^sx*$/, "only the chain reached the corpus");
    t.diagnostic(`${report}; committed tasks ${progress.join(" -> ")}; ${declared.length} declarer and ${malformed.length} malformed connections`);
  } finally {
    e.cleanup();
  }
});
