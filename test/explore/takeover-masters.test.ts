// Partitioned masters under faults, as real processes on 127.0.0.1 sharing one corpus: a master
// SIGKILLed mid-campaign has its share taken over (logged with how long it was silent and how long
// the takeover took) and the campaign ends with the counts of one master alone; a master SIGSTOPped
// past its lease keeps its share (its journal lock is held) and, woken, finishes it.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { waitFor } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { assertTakenOverInTime, attachWorker, executions, loggedCampaign as campaign } from "./fault-campaign.ts";

const TOKEN = "takeover-test-token-0123456789";
const TTL_S = 2;
const cleanups: (() => void)[] = [];

function partition(corpus: string, rank: number): { holder: string; generation: number; heartbeat: number } | undefined {
  const state = join(corpus, ".fuzzfleet");
  const work = existsSync(state) ? readdirSync(state).find((n) => n.startsWith("work-")) : undefined;
  if (work === undefined) return undefined;
  const path = join(state, work, "leases", "partitions", `r${rank}.json`);
  try {
    return JSON.parse(readFileSync(path, "utf8")) as { holder: string; generation: number; heartbeat: number };
  } catch {
    return undefined;
  }
}

async function masters(e: ExploreDir, n: number, target: string) {
  const common = ["-j", "2", "--max-idle", "2", "-t", "10", "--lease-ttl", String(TTL_S), "--grace", "60", "--token", TOKEN];
  const root = e.start(["--port", "0", "--bind", "127.0.0.1", "--masters", String(n), ...common], [target]);
  const port = await root.port();
  const subs = Array.from({ length: n - 1 }, () => e.startWith(["explore", "-i", e.seeds, "-o", e.corpus, "--join", `127.0.0.1:${port}`, ...common, "--", target]));
  // One remote worker on the root, beside the local slots.
  const worker = attachWorker(e.dir, port, TOKEN);
  // Ranks are given in join order: each submaster's from its banner.
  const ranked = await Promise.all(subs.map((sub) => waitFor("a submaster's rank", () => Number(/rank (\d+) of \d+ masters/.exec(sub.output())?.[1]) || undefined, 60_000).then((rank) => ({ rank, sub }))));
  const byRank = (rank: number) => ranked.find((x) => x.rank === rank)!.sub;
  const stop = () => {
    // Whatever a failed test left running: woken, then killed.
    for (const p of [root, ...subs]) if (p.child.exitCode === null && p.child.signalCode === null) (p.child.kill("SIGCONT"), p.child.kill("SIGKILL"));
    if (worker.child.exitCode === null) worker.child.kill("SIGKILL");
  };
  return { root, subs, byRank, stop, worker };
}

test("two masters and a remote worker: a submaster SIGKILLed mid-campaign has its share taken over; the counts are one master's alone", async () => {
  const e = new ExploreDir();
  try {
    const { log, target } = campaign(e, 12);
    const f = await masters(e, 2, target);
    cleanups.push(f.stop);
    await waitFor("a few runs", () => (executions(log).length >= 4 ? true : undefined), 60_000);
    f.subs[0]!.child.kill("SIGKILL");
    const [r, s] = await Promise.all([f.root.done, f.subs[0]!.done]);
    assert.equal(s.signal, "SIGKILL");
    assert.equal(r.code, 0, f.root.output());
    assert.equal(await f.worker.done, 0, f.worker.output());
    const st = e.stats();
    assert.deepEqual({ observations: st.observations, generated: st.generated, interesting: st.interesting, redundant: st.redundant }, { observations: 24, generated: 12, interesting: 12, redundant: 0 });
    assert.equal(new Set(executions(log)).size, 24, "every input ran");
    assert.match(f.root.output(), /master rank 1 .* was lost: .*its share is taken over once its lease expires/);
    assertTakenOverInTime(f.root.output(), 1, TTL_S);
    assert.match(f.root.output(), /took over the share of rank 1 \(generation 2\) .*takeover took [0-9.]+ ms/);
    assert.equal(partition(e.corpus, 1), undefined, "the campaign's state is removed after a clean end");
  } finally {
    for (const c of cleanups.splice(0)) c();
    e.cleanup();
  }
});

test("three masters: one SIGKILLed, one SIGSTOPped past its lease then SIGCONTinued; the campaign ends with one master's counts", async () => {
  const e = new ExploreDir();
  try {
    const { log, target } = campaign(e, 18);
    const f = await masters(e, 3, target);
    cleanups.push(f.stop);
    const [r1, r2] = [f.byRank(1), f.byRank(2)];
    await waitFor("a few runs", () => (executions(log).length >= 4 ? true : undefined), 60_000);
    r2.child.kill("SIGKILL");
    r1.child.kill("SIGSTOP");
    // Stopped past its lease: its heartbeat is older than the TTL.
    const stopped = await waitFor("rank 1's lease to lapse", () => {
      const p = partition(e.corpus, 1);
      return p && Date.now() - p.heartbeat > TTL_S * 1000 + 500 ? p : undefined;
    }, 60_000);
    await waitFor("rank 2's share taken over", () => (/took over the share of rank 2/.test(f.root.output()) ? true : undefined), 120_000).catch((err: Error) => {
      throw new Error(`${err.message}\nroot:\n${f.root.output()}\nrank 1:\n${r1.output()}`);
    });
    assert.equal(partition(e.corpus, 1)!.generation, stopped.generation, "a stopped master's share is not taken: its journal lock is held");
    r1.child.kill("SIGCONT");
    const [r, s1, s2] = await Promise.all([f.root.done, r1.done, r2.done]);
    assert.equal(s2.signal, "SIGKILL");
    assert.equal(r.code, 0, f.root.output());
    assert.equal(s1.code, 0, r1.output());
    const st = e.stats();
    assert.deepEqual({ observations: st.observations, generated: st.generated, interesting: st.interesting, redundant: st.redundant }, { observations: 36, generated: 18, interesting: 18, redundant: 0 });
    assert.equal(new Set(executions(log)).size, 36);
    assert.doesNotMatch(f.root.output(), /took over the share of rank 1/);
  } finally {
    for (const c of cleanups.splice(0)) c();
    e.cleanup();
  }
});
