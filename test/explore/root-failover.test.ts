// The root's role moves with its share, as real processes on 127.0.0.1 sharing one corpus: a root
// SIGKILLed mid-campaign has its share taken over like any master's, and the master that took it
// leads from then on — the others rejoin it, it decides quiescence and gathers the statistics —
// so the campaign ends with exactly one master's counts and nothing run twice.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { waitFor } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { assertTakenOverInTime, attachWorker, executions, loggedCampaign as campaign } from "./fault-campaign.ts";
import type { ExploreStats } from "../../src/explore/command/stats.ts";

const TOKEN = "root-failover-test-token-01234";
const TTL_S = 2;
const cleanups: (() => void)[] = [];

/**
 * A root and n-1 submasters, each submaster serving one remote worker on its own port; without
 * `served`, the submasters serve none and have no port (as launched ranks run).
 */
async function masters(e: ExploreDir, n: number, target: string, served = true) {
  const common = ["-j", "1", "--max-idle", "2", "-t", "10", "--lease-ttl", String(TTL_S), "--grace", "60", "--token", TOKEN];
  const root = e.start(["--port", "0", "--bind", "127.0.0.1", "--masters", String(n), ...common], [target]);
  const port = await root.port();
  const subs = Array.from({ length: n - 1 }, (_, i) => {
    const stats = join(e.dir, `stats-sub${i}.json`);
    const own = served ? ["--port", "0", "--bind", "127.0.0.1"] : [];
    const p = e.startWith(["explore", "-i", e.seeds, "-o", e.corpus, "--join", `127.0.0.1:${port}`, ...own, "--stats-json", stats, ...common, "--", target]);
    return { ...p, stats };
  });
  const workers = served ? await Promise.all(subs.map(async (s) => attachWorker(e.dir, await s.port(), TOKEN))) : [];
  const stop = () => {
    for (const p of [root, ...subs]) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
    for (const w of workers) if (w.child.exitCode === null) w.child.kill("SIGKILL");
  };
  return { root, subs, workers, stop };
}

function counts(st: ExploreStats) {
  return { observations: st.observations, generated: st.generated, interesting: st.interesting, redundant: st.redundant };
}

test("two masters: the root SIGKILLed mid-campaign; the submaster takes over its share and its role and ends the campaign with one master's counts", async () => {
  const e = new ExploreDir();
  try {
    const { log, target } = campaign(e, 12);
    const f = await masters(e, 2, target);
    cleanups.push(f.stop);
    await waitFor("a few runs", () => (executions(log).length >= 4 ? true : undefined), 60_000);
    f.root.child.kill("SIGKILL");
    const sub = f.subs[0]!;
    const [r, s] = await Promise.all([f.root.done, sub.done]);
    assert.equal(r.signal, "SIGKILL");
    assert.equal(s.code, 0, sub.output());
    assert.equal(await f.workers[0]!.done, 0, f.workers[0]!.output());
    const st = JSON.parse(readFileSync(sub.stats, "utf8")) as ExploreStats & { role: string };
    assert.equal(st.role, "root", "the submaster that took over the role writes the fleet's statistics");
    assert.deepEqual(counts(st), { observations: 24, generated: 12, interesting: 12, redundant: 0 });
    // A run under way on the killed root is run again by its taker (it was only leased): every
    // input ran, and each is counted once.
    assert.equal(new Set(executions(log)).size, 24, "every input ran");
    assertTakenOverInTime(sub.output(), 0, TTL_S);
    assert.match(sub.output(), /took over the root's role with the share of rank 0 \(generation 2\).*, alone/);
    assert.match(sub.output(), /global quiescence committed by all masters/);
  } finally {
    for (const c of cleanups.splice(0)) c();
    e.cleanup();
  }
});

test("three masters: the root SIGKILLed mid-campaign; one submaster takes over its role, the other rejoins it, and both end with one master's counts", async () => {
  const e = new ExploreDir();
  try {
    const { log, target } = campaign(e, 18);
    const f = await masters(e, 3, target);
    cleanups.push(f.stop);
    await waitFor("a few runs", () => (executions(log).length >= 4 ? true : undefined), 60_000);
    f.root.child.kill("SIGKILL");
    const [r, ...subs] = await Promise.all([f.root.done, ...f.subs.map((s) => s.done)]);
    assert.equal(r.signal, "SIGKILL");
    for (const [i, s] of subs.entries()) assert.equal(s.code, 0, f.subs[i]!.output());
    for (const w of f.workers) assert.equal(await w.done, 0, w.output());
    const leaders = f.subs.filter((s) => /took over the root.s role with the share/.test(s.output()));
    assert.equal(leaders.length, 1, "exactly one master leads after the root");
    const leader = leaders[0]!;
    const other = f.subs.find((s) => s !== leader)!;
    assert.match(other.output(), /rejoined the campaign under rank \d, which took over the root's role/);
    assert.match(leader.output(), /rejoined as rank \d/);
    const st = JSON.parse(readFileSync(leader.stats, "utf8")) as ExploreStats & { role: string };
    assert.equal(st.role, "root");
    assert.deepEqual(counts(st), { observations: 36, generated: 18, interesting: 18, redundant: 0 });
    assert.equal(new Set(executions(log)).size, 36, "every input ran");
  } finally {
    for (const c of cleanups.splice(0)) c();
    e.cleanup();
  }
});

test("three masters whose submasters have no port: the one that takes over the root's role listens on a port of its own, where the other rejoins it", async () => {
  const e = new ExploreDir();
  try {
    const { log, target } = campaign(e, 18);
    const f = await masters(e, 3, target, false);
    cleanups.push(f.stop);
    await waitFor("both submasters joined", () => (f.subs.every((s) => /rank \d of 3 masters/.test(s.output())) ? true : undefined), 60_000);
    await waitFor("a few runs", () => (executions(log).length >= 4 ? true : undefined), 60_000);
    f.root.child.kill("SIGKILL");
    const [r, ...subs] = await Promise.all([f.root.done, ...f.subs.map((s) => s.done)]);
    assert.equal(r.signal, "SIGKILL");
    for (const [i, s] of subs.entries()) assert.equal(s.code, 0, f.subs[i]!.output());
    const leader = f.subs.find((s) => /took over the root's role with the share/.test(s.output()))!;
    assert.ok(leader, f.subs.map((s) => s.output()).join("\n---\n"));
    const at = /leading from (127\.0\.0\.1):(\d+), expecting rank \d back/.exec(leader.output());
    assert.ok(at, leader.output());
    const other = f.subs.find((s) => s !== leader)!;
    assert.match(other.output(), /rejoined the campaign under rank \d, which took over the root's role/);
    const st = JSON.parse(readFileSync(leader.stats, "utf8")) as ExploreStats & { role: string };
    assert.deepEqual(counts(st), { observations: 36, generated: 18, interesting: 18, redundant: 0 });
    assert.equal(new Set(executions(log)).size, 36, "every input ran");
  } finally {
    for (const c of cleanups.splice(0)) c();
    e.cleanup();
  }
});

test("a root stopped past the grace keeps its share and its role: the submaster that lost it gives up after the lease time and the join timeout, and the root, woken, ends the campaign alone", async () => {
  const e = new ExploreDir();
  try {
    const { log, target } = campaign(e, 12);
    const common = ["-j", "1", "--max-idle", "2", "-t", "10", "--lease-ttl", String(TTL_S), "--grace", "2", "--join-timeout", "3", "--token", TOKEN];
    const root = e.start(["--port", "0", "--bind", "127.0.0.1", "--masters", "2", ...common], [target]);
    const port = await root.port();
    const sub = e.startWith(["explore", "-i", e.seeds, "-o", e.corpus, "--join", `127.0.0.1:${port}`, ...common, "--", target]);
    cleanups.push(() => {
      for (const p of [root, sub]) if (p.child.exitCode === null && p.child.signalCode === null) (p.child.kill("SIGCONT"), p.child.kill("SIGKILL"));
    });
    await waitFor("a few runs", () => (executions(log).length >= 4 ? true : undefined), 60_000);
    root.child.kill("SIGSTOP");
    const s = await sub.done;
    assert.equal(s.code, 70, sub.output());
    assert.match(sub.output(), /the master leading the campaign \(rank 0\) was lost: silent for more than 2s/);
    assert.match(sub.output(), /the root master was lost and no master took over its role within 5s/);
    assert.doesNotMatch(sub.output(), /took over the share of rank 0/, "a stopped root keeps its share: its journal lock is held");
    root.child.kill("SIGCONT");
    const r = await root.done;
    assert.equal(r.code, 0, root.output());
    assert.match(root.output(), /took over the share of rank 1 \(generation 2\)/);
    assert.deepEqual(counts(e.stats()), { observations: 24, generated: 12, interesting: 12, redundant: 0 });
    assert.equal(new Set(executions(log)).size, 24, "every input ran");
  } finally {
    for (const c of cleanups.splice(0)) c();
    e.cleanup();
  }
});
