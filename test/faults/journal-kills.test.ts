// A lone explore master journals its lease transitions and commits its remote workers' results a
// batch at a time.
// SIGKILLed at random moments and resumed until its frontier is exhausted, it must lose no
// committed content, publish no child without its parent's commit fence, and run no content
// again once its task was done.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { LeaseTable, type LeaseRecord } from "../../src/explore/state/lease-table.ts";
import { JOURNAL_FILE } from "../../src/explore/state/lease-journal.ts";
import { CLI, waitFor } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { sha256 } from "../helpers/scratch.ts";

const LENGTH = 10;
const SEEDS = 12;

const TOKEN = "journal-kills-token-0123456789abcdef";

/**
 * Runs the master (-j 0) with one remote worker (--slots 2, so that results are committed in
 * batches) until the master exits or is SIGKILLed after `killAfterMs` (null: never); the worker is
 * then stopped too.
 */
async function session(e: ExploreDir, n: number, resume: string | null, killAfterMs: number | null) {
  const extra = ["-j", "0", "--port", "0", "--bind", "127.0.0.1", "--token", TOKEN, "--max-idle", "1", "-t", "10", ...(resume ? ["--resume", resume] : [])];
  const env = { ...process.env, SESSION: String(n), RUNLOG: join(e.dir, "runs.log") };
  const child = spawn(process.execPath, [CLI, ...e.args(extra, [join(e.dir, "grow.sh"), "@@"])], { cwd: e.dir, env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (out += d));
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("close", (code, signal) => resolve({ code, signal })));
  const timer = killAfterMs === null ? null : setTimeout(() => child.kill("SIGKILL"), killAfterMs);
  let worker: ReturnType<typeof spawn> | null = null;
  const port = await Promise.race([
    waitFor("the master to listen", () => /listening on 127\.0\.0\.1:(\d+)/.exec(out)?.[1], 60_000).catch(() => null),
    done.then(() => null),
  ]);
  if (port !== null) {
    worker = spawn(process.execPath, [CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", TOKEN, "--slots", "2", "-j", "1", "--wait", "5"], { cwd: e.dir, env, stdio: "ignore" });
  }
  const end = await done;
  if (timer) clearTimeout(timer);
  if (worker && worker.exitCode === null) {
    const gone = new Promise((r) => worker!.once("exit", r));
    // A clean end stops the worker itself; after a SIGKILL of the master it would wait to reconnect.
    if (end.signal === "SIGKILL") worker.kill("SIGTERM");
    await gone;
  }
  return { ...end, out };
}

/** The lease records as the next opener sees them (a journal the killed master left is absorbed). */
function recordsOf(leases: string): LeaseRecord[] {
  return new LeaseTable({ root: leases }).snapshot();
}

test("a lone master SIGKILLed at random moments and resumed: no committed content lost, no child without its fence, nothing done runs again", { timeout: 240_000 }, async () => {
  const e = new ExploreDir();
  try {
    for (let i = 0; i < SEEDS; i++) e.seed(`s${i}`, `s${String(i).padStart(2, "0")}`);
    // One child per run, the input plus one byte, until the input is LENGTH bytes long; every run
    // is logged with its session and the input's hash.
    e.script(
      "grow.sh",
      `h=$(sha256sum "$1" | cut -c1-64); echo "$SESSION $h" >> "$RUNLOG"\n` +
        `n=$(wc -c < "$1"); if [ "$n" -lt ${LENGTH} ]; then { cat "$1"; printf x; } > "$SYMCC_OUTPUT_DIR/child"; fi`,
    );
    let epoch: string | null = null;
    const doneAfter: Set<string>[] = [];
    let journalsSeen = 0;
    let finished = false;
    for (let n = 1; n <= 12 && !finished; n++) {
      const last = n === 12;
      const r = await session(e, n, epoch, last ? null : 300 + Math.floor(Math.random() * 900));
      const state = join(e.corpus, ".fuzzfleet");
      // The epoch of the campaign, once its state exists (a kill during startup leaves none yet).
      epoch ??= existsSync(state) ? (readdirSync(state).find((d) => d.startsWith("work-") && existsSync(join(state, d, "state.json")))?.slice(5) ?? null) : null;
      if (r.signal !== "SIGKILL") {
        assert.equal(r.code, 0, r.out);
        finished = true;
        break;
      }
      if (epoch === null) {
        doneAfter.push(new Set());
        continue;
      }
      const leases = join(state, `work-${epoch}`, "leases");
      if (!existsSync(leases)) {
        doneAfter.push(new Set());
        continue;
      }
      if (readdirSync(leases).some((f) => JOURNAL_FILE.test(f))) journalsSeen++;
      const records = recordsOf(leases);
      assert.ok(!readdirSync(leases).some((f) => JOURNAL_FILE.test(f)), "the journal was absorbed into the record files");
      const corpus = new Set(e.corpusFiles());
      const fenced = new Set<string>();
      for (const rec of records) {
        if (rec.status === "leased" || !rec.commit) continue;
        for (const h of rec.commit.hashes) fenced.add(h);
        // A done task's children are public, and each holds the bytes its name says.
        if (rec.status === "done") for (const h of rec.commit.hashes) assert.ok(corpus.has(h), `child ${h.slice(0, 12)} of done ${rec.id.slice(0, 12)} is public`);
      }
      for (const h of corpus) {
        assert.equal(sha256(readFileSync(join(e.corpus, h))), h, `corpus object ${h.slice(0, 12)} holds its bytes`);
        const isSeed = [...Array(SEEDS).keys()].some((i) => sha256(`s${String(i).padStart(2, "0")}`) === h);
        assert.ok(isSeed || fenced.has(h), `child ${h.slice(0, 12)} is public only after its parent passed the commit fence`);
      }
      doneAfter.push(new Set(records.filter((x) => x.status === "done").map((x) => x.id)));
    }
    assert.ok(finished, "the campaign finished within twelve sessions");
    assert.ok(journalsSeen > 0, "at least one kill left a journal behind (the journaled path was exercised)");
    // Every content of the frontier is in the corpus: 12 seeds, each grown to LENGTH bytes.
    assert.equal(e.corpusFiles().length, SEEDS * (LENGTH - 2), "the whole frontier, no content lost");
    // A content done when session k was killed never runs in a later session.
    const runs = readFileSync(join(e.dir, "runs.log"), "utf8").trim().split("\n").map((l) => l.split(" "));
    for (const [k, done] of doneAfter.entries()) {
      for (const [session, hash] of runs) {
        if (Number(session) > k + 1 && done.has(hash)) assert.fail(`${hash.slice(0, 12)} was done when session ${k + 1} was killed, yet ran in session ${session}`);
      }
    }
    const s = e.stats();
    assert.equal(s.observations, SEEDS * (LENGTH - 2), "each content committed exactly once");
  } finally {
    e.cleanup();
  }
});
