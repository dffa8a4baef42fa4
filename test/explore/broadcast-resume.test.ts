// A campaign of two masters under broadcast ownership in which one master dies between a commit
// fence and the completion, resumed with --resume: the commit redone (replayCommitting: the root
// at --resume, a submaster as it joins with its own table from the earlier session), like every
// other, is in the final statistics. Under broadcast each master runs the whole frontier in a table
// of its own, so each master's count is the single-host reference and the total twice that. Real
// processes on 127.0.0.1, the compiled CLI; the death comes from die-after-fence.mjs.
import assert from "node:assert/strict";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { processesMentioning, waitFor } from "../helpers/campaign.ts";
import { ExploreDir, type Started } from "../helpers/explore.ts";

const TOKEN = "broadcast-resume-token-0123456789";
const DIE_AFTER_FENCE = fileURLToPath(new URL("./die-after-fence.mjs", import.meta.url));
const FLAGS = ["-j", "1", "--max-idle", "1", "-t", "10", "--grace", "20"];
const DIES: NodeJS.ProcessEnv = { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import ${DIE_AFTER_FENCE}`.trim(), FUZZFLEET_TEST_DIE_AFTER_FENCE: "3" };

/** Each input of fewer than three lines gets two longer children and one child every such run writes alike. */
function target(e: ExploreDir): string[] {
  return [e.script("t.sh", 'test "$(wc -l < "$1")" -ge 3 && exit 0; { cat "$1"; echo a; } > "$SYMCC_OUTPUT_DIR/a"; { cat "$1"; echo b; } > "$SYMCC_OUTPUT_DIR/b"; echo same > "$SYMCC_OUTPUT_DIR/same"'), "@@"];
}

function seed(e: ExploreDir): void {
  for (const name of ["x", "y", "z"]) e.seed(name, `${name}\n`);
}

async function broadcastFleet(e: ExploreDir, extra: string[], env: { root?: NodeJS.ProcessEnv; sub?: NodeJS.ProcessEnv } = {}): Promise<{ root: Started; sub: Started }> {
  const t = target(e);
  const root = e.start(["--port", "0", "--bind", "127.0.0.1", "--masters", "2", "--ownership", "broadcast", "--token", TOKEN, ...FLAGS, ...extra], t, env.root);
  const port = await root.port();
  const sub = e.startWith(["explore", "-i", e.seeds, "-o", e.corpus, "--join", `127.0.0.1:${port}`, "--token", TOKEN, "--ownership", "broadcast", ...FLAGS, "--", ...t], env.sub);
  return { root, sub };
}

/** The single-host reference: the same seeds explored by one master in one session. */
function reference(): { observations: number; generated: number } {
  const ref = new ExploreDir();
  try {
    seed(ref);
    const r = ref.run(FLAGS, target(ref));
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const s = ref.stats();
    assert.deepEqual([s.observations, s.generated], [28, 36], "4 one-line inputs, 8 of two lines, 16 of three; 12 runs with 3 children");
    return { observations: s.observations, generated: s.generated };
  } finally {
    ref.cleanup();
  }
}

for (const dying of ["root", "submaster"] as const) {
  test(`broadcast ownership: a commit the ${dying} left committing when it died is redone at --resume and counted; each master counts the single-host reference`, async () => {
    const want = reference();
    const e = new ExploreDir();
    try {
      seed(e);
      const first = await broadcastFleet(e, [], dying === "root" ? { root: DIES } : { sub: DIES });
      const epoch = await waitFor("the epoch", () => /epoch ([0-9a-f]{64})/.exec(first.root.output())?.[1]);
      const [died, survivor] = dying === "root" ? [first.root, first.sub] : [first.sub, first.root];
      assert.equal((await died.done).signal, "SIGKILL", died.output());
      // A submaster that lost its root, or a root that lost a master under broadcast ownership: exit 70.
      assert.equal((await survivor.done).code, 70, survivor.output());
      for (const pid of processesMentioning(e.dir)) process.kill(pid, "SIGKILL");

      const again = await broadcastFleet(e, ["--resume", epoch]);
      const [root, sub] = await Promise.all([again.root.done, again.sub.done]);
      assert.equal(root.code, 0, again.root.output());
      assert.equal(sub.code, 0, again.sub.output());
      assert.match((dying === "root" ? again.root : again.sub).output(), /resumed: 1 interrupted commit\(s\) redone/);
      const s = e.stats();
      assert.deepEqual(s.by_master, { "0": want.observations, "1": want.observations }, again.root.output());
      assert.deepEqual([s.observations, s.generated], [2 * want.observations, 2 * want.generated]);
    } finally {
      e.cleanup();
    }
  });
}
