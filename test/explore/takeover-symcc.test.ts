// The real SymCC-built target (test/fixtures/symcc) explored by two masters, one SIGKILLed
// mid-campaign — the submaster, then the root: its share is taken over (the root's with its role)
// and the campaign ends with the reference counts of a plain serial exploration (the fixture's
// README) and its three findings. Needs Debian's libz3-4.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ROOT, waitFor } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";

const FIXTURE = join(ROOT, "test/fixtures/symcc");
const TARGET = join(FIXTURE, "tlv-symcc");
const TOKEN = "takeover-symcc-token-0123456789";
const RUNS = 2450;
const GENERATED = 7471;

for (const killed of ["submaster", "root"] as const) {
  test(`tlv-symcc with two masters, the ${killed} SIGKILLed mid-campaign: its share is taken over; the reference counts and the three findings`, { timeout: 30 * 60_000 }, async () => {
    const ldd = spawnSync("ldd", [TARGET], { encoding: "utf8" });
    assert.doesNotMatch(ldd.stdout, /not found/, "the SymCC fixture needs Z3's library: install it with `apt-get install -y libz3-4`");
    const e = new ExploreDir();
    const kill: (() => void)[] = [];
    try {
      for (const n of readdirSync(join(FIXTURE, "seeds"))) e.seed(n, readFileSync(join(FIXTURE, "seeds", n)));
      const extra = ["-j", "1", "-t", "10", "--max-idle", "1", "--lease-ttl", "3", "--token", TOKEN];
      const root = e.start(["--port", "0", "--bind", "127.0.0.1", "--masters", "2", ...extra], [TARGET, "@@"]);
      const port = await root.port();
      const subStats = join(e.dir, "stats-sub.json");
      const sub = e.startWith(["explore", "-i", e.seeds, "-o", e.corpus, "--join", `127.0.0.1:${port}`, "--stats-json", subStats, ...extra, "--", TARGET, "@@"]);
      kill.push(() => sub.child.kill("SIGKILL"), () => root.child.kill("SIGKILL"));
      await waitFor("a fifth of the corpus", () => (e.corpusFiles().length >= 500 ? true : undefined), 10 * 60_000, 50);
      const [victim, survivor] = killed === "root" ? [root, sub] : [sub, root];
      victim.child.kill("SIGKILL");
      const [v, s] = await Promise.all([victim.done, survivor.done]);
      assert.equal(v.signal, "SIGKILL");
      assert.equal(s.code, 0, survivor.output().slice(-4000));
      assert.match(survivor.output(), new RegExp(`took over the share of rank ${killed === "root" ? 0 : 1} \\(generation 2\\)`));
      if (killed === "root") assert.match(survivor.output(), /took over the root's role with the share of rank 0/);
      const st = killed === "root" ? (JSON.parse(readFileSync(subStats, "utf8")) as ReturnType<typeof e.stats>) : e.stats();
      assert.deepEqual({ observations: st.observations, generated: st.generated }, { observations: RUNS, generated: GENERATED }, survivor.output().slice(-4000));
      assert.deepEqual(st.findings.inputs.map((i) => [i.kind, i.signal]).sort(), [["crash", 11], ["crash", 6], ["hang", null]].sort());
      assert.equal(new Set(st.findings.inputs.map((i) => i.signature)).size, 3);
    } finally {
      for (const k of kill) k();
      e.cleanup();
    }
  });
}
