// Honest statistics with several masters: the root's executors line counts every slot of every
// master (each submaster's executors are counters of its statistics report), and a submaster honours
// --stats-json with its own view.
import assert from "node:assert/strict";
import { join } from "node:path";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { ExploreDir } from "../helpers/explore.ts";
import type { ExploreStats } from "../../src/explore/command/stats.ts";
import { campaignStateLeft } from "./leftovers.ts";

const TOKEN = "fleet-stats-test-token-0123456789";

test("root -j 2 and a submaster -j 3: the root counts 5 local slots; the submaster writes its own --stats-json", async () => {
  const e = new ExploreDir();
  try {
    for (let i = 0; i < 12; i++) e.seed(`s${i}`, `seed ${i}\n`);
    const common = ["--max-idle", "1", "-t", "5", "--token", TOKEN];
    const root = e.start(["--port", "0", "--bind", "127.0.0.1", "--masters", "2", "-j", "2", ...common], ["/bin/true"]);
    const port = await root.port();
    const subStats = join(e.dir, "sub-stats.json");
    const sub = e.startWith(["explore", "-i", e.seeds, "-o", e.corpus, "--join", `127.0.0.1:${port}`, "-j", "3", "--stats-json", subStats, ...common, "--", "/bin/true"]);
    const [r, s] = await Promise.all([root.done, sub.done]);
    assert.equal(r.code, 0, root.output());
    assert.equal(s.code, 0, sub.output());
    const st = e.stats() as ExploreStats & { role: string };
    assert.deepEqual(st.executors, { local_slots: 5, remote_workers: 0, total: 5 }, root.output());
    assert.match(root.output(), /executors: +5 \(5 local slot\(s\), 0 remote worker\(s\)\)/);
    assert.equal(st.role, "root");
    assert.equal(st.observations, 12);
    const mine = JSON.parse(readFileSync(subStats, "utf8")) as ExploreStats & { role: string; rank: number; ended: string };
    assert.deepEqual([mine.role, mine.rank, mine.masters], ["submaster", 1, 2]);
    assert.deepEqual(mine.executors, { local_slots: 3, remote_workers: 0, total: 3 });
    assert.equal(mine.observations, st.by_master["1"], "its own share of the work");
    assert.match(mine.ended, /^frontier exhausted/);
    assert.deepEqual(campaignStateLeft(e.corpus), [], "the executor reports went with the work directory");
  } finally {
    e.cleanup();
  }
});
