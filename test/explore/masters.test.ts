// Explore with several masters, as real processes on 127.0.0.1 sharing one corpus directory.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { campaignStateLeft } from "./leftovers.ts";
import { fileURLToPath } from "node:url";
import { owner } from "../../src/core/rendezvous.ts";
import { readLeaseRecordsNoWrite } from "../../src/explore/state/lease-journal.ts";
import { processesMentioning, waitFor } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { sha256 } from "../helpers/scratch.ts";

const TOKEN = "masters-test-token-0123456789";
const HOLD_FRAMES = fileURLToPath(new URL("../fixtures/explore/hold-frames.mjs", import.meta.url));

/** The root's environment with its COMMIT or final release held back (test/fixtures/explore/hold-frames.mjs). */
function holding(what: "COMMIT" | "RELEASE", ms: number): NodeJS.ProcessEnv {
  return { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import ${HOLD_FRAMES}`.trim(), [`FUZZFLEET_TEST_HOLD_${what}_MS`]: String(ms) };
}

interface Fleet {
  root: ReturnType<ExploreDir["start"]>;
  subs: ReturnType<ExploreDir["start"]>[];
}

/** Starts a root of `n` masters and n-1 submasters with the same command line. */
async function fleet(e: ExploreDir, n: number, extra: string[], target: string[], env: NodeJS.ProcessEnv = {}, rootEnv: NodeJS.ProcessEnv = {}): Promise<Fleet> {
  const root = e.start(["--port", "0", "--bind", "127.0.0.1", "--masters", String(n), "--token", TOKEN, ...extra], target, { ...env, ...rootEnv });
  const port = await root.port();
  const subs = [];
  for (let i = 1; i < n; i++) {
    // Submasters write no stats file of their own.
    const sub = e.startWith(["explore", "-i", e.seeds, "-o", e.corpus, "--join", `127.0.0.1:${port}`, "--token", TOKEN, ...extra, "--", ...target], env);
    subs.push(sub);
  }
  return { root, subs };
}

test("two masters x two slots: one seed is observed once, not twice", async () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "hello\n");
    const f = await fleet(e, 2, ["-j", "2", "--max-idle", "1", "-t", "5"], ["/bin/true"]);
    const [r, s] = await Promise.all([f.root.done, f.subs[0]!.done]);
    assert.equal(r.code, 0, f.root.output());
    assert.equal(s.code, 0, f.subs[0]!.output());
    const st = e.stats();
    assert.equal(st.observations, 1);
    assert.deepEqual(e.corpusFiles(), [sha256("hello\n")]);
    assert.deepEqual(campaignStateLeft(e.corpus), [], "no hidden state left but the ledger");
    assert.match(f.root.output(), /global quiescence committed by all masters/);
    assert.match(f.subs[0]!.output(), /voted YES — discovery frozen/);
  } finally {
    e.cleanup();
  }
});

test("two masters: 24 seeds give 24 observations split between the masters, and 24 corpus files", async () => {
  const e = new ExploreDir();
  try {
    for (let i = 0; i < 24; i++) e.seed(`s${i}`, `seed ${i}\n`);
    const f = await fleet(e, 2, ["-j", "2", "--max-idle", "1", "-t", "5"], ["/bin/true"]);
    const [r, s] = await Promise.all([f.root.done, f.subs[0]!.done]);
    assert.equal(r.code, 0, f.root.output());
    assert.equal(s.code, 0, f.subs[0]!.output());
    const st = e.stats();
    assert.equal(st.observations, 24);
    const expected0 = Array.from({ length: 24 }, (_, i) => sha256(`seed ${i}\n`)).filter((h) => owner(h, [0, 1]) === 0).length;
    assert.deepEqual(st.by_master, { "0": expected0, "1": 24 - expected0 }, "each master executed exactly the seeds it owns");
    assert.ok(expected0 > 0 && expected0 < 24);
    assert.equal(e.corpusFiles().length, 24);
    assert.match(f.root.output(), /analysis by master: +0=\d+, 1=\d+/);
  } finally {
    e.cleanup();
  }
});

test("two masters: 12 seeds emitting one shared child give 13 observations and 1 interesting; the child runs once", async () => {
  const e = new ExploreDir();
  try {
    for (let i = 0; i < 12; i++) e.seed(`s${i}`, `seed ${i}\n`);
    const log = join(e.dir, "executions.log");
    const target = e.script("t.sh", `cat >> "${log}"; echo >> "${log}"; echo shared-child > "$SYMCC_OUTPUT_DIR/out"`);
    const f = await fleet(e, 2, ["-j", "2", "--max-idle", "1", "-t", "5"], [target]);
    const [r, s] = await Promise.all([f.root.done, f.subs[0]!.done]);
    assert.equal(r.code, 0, f.root.output());
    assert.equal(s.code, 0, f.subs[0]!.output());
    const st = e.stats();
    assert.deepEqual([st.observations, st.generated, st.interesting, e.corpusFiles().length], [13, 13, 1, 13]);
    assert.equal(readFileSync(log, "utf8").split("\n").filter((l) => l === "shared-child").length, 1, "the child ran exactly once fleet-wide");
  } finally {
    e.cleanup();
  }
});

// A stalled master, and a killed one, with partitioned shares: test/explore/takeover-masters.test.ts.

test("broadcast ownership: a submaster SIGKILLed mid-campaign is reported by rank and the root exits 70 within the grace", async () => {
  const e = new ExploreDir();
  try {
    for (let i = 0; i < 12; i++) e.seed(`s${i}`, `seed ${i}\n`);
    const target = e.script("t.sh", "sleep 2");
    // (With rendezvous ownership its share would be taken over instead: takeover-masters.test.ts.)
    const f = await fleet(e, 2, ["-j", "1", "--max-idle", "1", "-t", "10", "--grace", "20", "--ownership", "broadcast"], [target]);
    const sub = f.subs[0]!;
    await waitFor("the campaign to run", () => (/voted|initial input/.test(sub.output()) ? true : undefined), 60_000);
    await new Promise((r) => setTimeout(r, 1000));
    const killedAt = Date.now();
    sub.child.kill("SIGKILL");
    const r = await f.root.done;
    const took = (Date.now() - killedAt) / 1000;
    assert.equal(r.code, 70, f.root.output());
    assert.match(f.root.output(), /master rank 1 \(\S+\) was lost: connection closed/);
    assert.ok(took < 20, `ended within the grace (${took.toFixed(1)} s)`);
    for (const pid of processesMentioning(e.dir)) process.kill(pid, "SIGKILL");
  } finally {
    e.cleanup();
  }
});

test("a submaster that never hears the root's final release exits 71 after --finalize-timeout", async () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "hello\n");
    const f = await fleet(e, 2, ["-j", "1", "--max-idle", "1", "-t", "5", "--finalize-timeout", "1"], ["/bin/true"], {}, holding("RELEASE", 6000));
    const sub = f.subs[0]!;
    const s = await sub.done;
    const subEndedAt = Date.now();
    assert.equal(s.code, 71, sub.output());
    assert.match(sub.output(), /the final rendezvous with the root timed out after 1s/);
    const r = await f.root.done;
    assert.ok(Date.now() - subEndedAt > 3000, "the submaster gave up while the root still held the release");
    assert.equal(r.code, 0, f.root.output());
    assert.equal(e.stats().observations, 1);
  } finally {
    e.cleanup();
  }
});

test("a root whose submasters do not all join gives up after --join-timeout, naming the count and the fix", async () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "hello\n");
    const root = e.start(["--port", "0", "--bind", "127.0.0.1", "--masters", "3", "--token", TOKEN, "--join-timeout", "1", "-j", "1", "--max-idle", "1"], ["/bin/true"]);
    const startedAt = Date.now();
    const r = await root.done;
    const took = (Date.now() - startedAt) / 1000;
    assert.equal(r.code, 4, root.output());
    assert.match(root.output(), /only 1 of 3 masters joined within 1s; start the others with --join, or lower --masters/);
    assert.ok(took < 15, `bounded by the join timeout (${took.toFixed(1)} s)`);
    assert.equal(e.corpusFiles().length, 0, "nothing was scheduled");
  } finally {
    e.cleanup();
  }
});

test("late work: a file dropped before PREPARE is explored; one dropped after a YES vote is left for the next campaign", async () => {
  const e = new ExploreDir();
  try {
    e.seed("first", "first\n");
    const f = await fleet(e, 2, ["-j", "1", "--max-idle", "3", "-t", "5"], ["/bin/true"], {}, holding("COMMIT", 3000));
    const sub = f.subs[0]!;
    const workDir = await waitFor("the campaign state", () => {
      const state = join(e.corpus, ".fuzzfleet");
      const w = existsSync(state) ? readdirSync(state).find((n) => n.startsWith("work-")) : undefined;
      return w ? join(state, w) : undefined;
    });
    await waitFor("the first seed to be committed", () => (leaseRecords(workDir).some((r) => r.status === "done") ? true : undefined), 60_000);
    assert.doesNotMatch(f.root.output(), /PREPARE/, "still inside the idle window");
    e.seed("second", "second\n");
    await waitFor("the submaster's YES vote", () => (/voted YES/.test(sub.output()) ? true : undefined), 60_000);
    writeFileSync(join(e.seeds, "third"), "third\n");
    const [r, s] = await Promise.all([f.root.done, sub.done]);
    assert.equal(r.code, 0, f.root.output());
    assert.equal(s.code, 0, sub.output());
    const st = e.stats();
    assert.equal(st.observations, 2, "first and second were explored");
    assert.equal(st.late_inputs, 1);
    assert.match(f.root.output(), /1 input file\(s\) arrived after the frontier was declared exhausted: left for the next campaign/);
    assert.ok(!e.corpusFiles().includes(sha256("third\n")), "the late file was not half-processed");
    assert.ok(e.corpusFiles().includes(sha256("second\n")));
  } finally {
    e.cleanup();
  }
});

interface LeaseRec {
  status: string;
  owner: string;
  steals: number;
}

function leaseRecords(workDir: string): LeaseRec[] {
  // The record files with every master's journal laid over them (several masters journal their shares).
  return readLeaseRecordsNoWrite(join(workDir, "leases")) as LeaseRec[];
}
