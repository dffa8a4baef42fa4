// The AFL++ sync directory (`explore --afl-sync DIR`) is pinned at every export, not only checked
// at the start: its queue/ and .incoming/ swapped for symlinks in the middle of a --follow
// campaign stop the exports, and nothing is written where the links point. Ids in queue/ are
// AFL's (id: and 6 to 10 digits, 32-bit): a planted entry with any other id is ignored and
// counted, and the exports go on with numeric ids.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { MAX_AFL_ID, parseQueueName } from "../../src/explore/command/afl-export.ts";
import { waitFor } from "../helpers/campaign.ts";
import { ExploreDir, writeSeed } from "../helpers/explore.ts";
import { sha256 } from "../helpers/scratch.ts";

/** A target that writes "<input>-child" as its one child for an input that has no "-child" yet. */
function childOnce(e: ExploreDir): string[] {
  return [e.script("child.sh", `case "$(cat "$1")" in *-child*) exit 0 ;; esac\nprintf '%s-child' "$(cat "$1")" > "$SYMCC_OUTPUT_DIR/c"`), "@@"];
}

const exportName = (id: number, content: string) => `id:${String(id).padStart(6, "0")},src:fuzzfleet,sha256:${sha256(content)}`;

test("parseQueueName takes AFL's ids only: 6 to 10 digits, at most 2^32 - 1; anything else named id: is malformed", () => {
  const h = "ab".repeat(32);
  assert.deepEqual(parseQueueName(`id:000007,src:fuzzfleet,sha256:${h}`), { id: 7, hash: h });
  assert.deepEqual(parseQueueName("id:000012,time:0,execs:0,orig:seed"), { id: 12, hash: null });
  assert.deepEqual(parseQueueName(`id:${MAX_AFL_ID}`), { id: MAX_AFL_ID, hash: null });
  assert.deepEqual(parseQueueName(`id:000001,sha256:${h.slice(1)}`), { id: 1, hash: null }, "a short hash is no hash");
  for (const bad of [`id:99999999999999999999999,src:x,sha256:${"0".repeat(64)}`, `id:${MAX_AFL_ID + 1}`, "id:12", "id:0000x1", "id:-00001", "id:1e+23,src:x", "id:", "id:０００００１"]) {
    assert.equal(parseQueueName(bad), "malformed", bad);
  }
  assert.equal(parseQueueName(".state"), "not-an-id");
  assert.equal(parseQueueName("README"), "not-an-id");
});

test("--afl-sync: a planted queue entry with a huge id is ignored and counted; exports keep numeric ids, across campaigns", () => {
  const e = new ExploreDir();
  try {
    const sync = join(e.dir, "afl-out");
    const queue = join(sync, "fuzzfleet", "queue");
    mkdirSync(queue, { recursive: true });
    const planted = `id:99999999999999999999999,src:x,sha256:${"0".repeat(64)}`;
    writeFileSync(join(queue, planted), "planted");
    const earlier = `id:000004,src:fuzzfleet,sha256:${"1".repeat(64)}`;
    writeFileSync(join(queue, earlier), "earlier");
    e.seed("a", "a");
    e.seed("b", "b");
    const r = e.run(["--afl-sync", sync, "-j", "1", "--max-idle", "0.5"], childOnce(e));
    assert.equal(r.code, 0, r.stdout + r.stderr);
    // Exported in hash order, after the largest valid id.
    const [first, second] = [sha256("a-child") < sha256("b-child") ? "a-child" : "b-child", sha256("a-child") < sha256("b-child") ? "b-child" : "a-child"];
    assert.deepEqual(readdirSync(queue).sort(), [earlier, exportName(5, first), exportName(6, second), planted].sort());
    assert.equal(readFileSync(join(queue, exportName(5, first)), "utf8"), first);
    assert.match(r.stdout, /--afl-sync: .*fuzzfleet\/queue\/id:99999999999999999999999,src:x,sha256:0+ has no AFL id \(id: and 6 to 10 digits, at most 4294967295\): ignored/);
    assert.match(r.stdout, /^ {2}exported 2 new input\(s\) to .*afl-out\/fuzzfleet\/queue \(AFL\+\+ syncs them as the instance 'fuzzfleet'\); 1 queue entry without a valid AFL id ignored$/m);

    e.seed("c", "c");
    const again = e.run(["--afl-sync", sync, "-j", "1", "--max-idle", "0.5"], childOnce(e));
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.ok(readdirSync(queue).includes(exportName(7, "c-child")), readdirSync(queue).join("\n"));
    assert.equal(readdirSync(queue).length, 5);
    assert.deepEqual(readdirSync(join(sync, "fuzzfleet", ".incoming")), []);
  } finally {
    e.cleanup();
  }
});

test("--afl-sync during --follow: queue/ and .incoming/ swapped for symlinks stop the exports, nothing is written where they point", async () => {
  const e = new ExploreDir();
  try {
    const sync = join(e.dir, "afl-out");
    const queue = join(sync, "fuzzfleet", "queue");
    const incoming = join(sync, "fuzzfleet", ".incoming");
    e.seed("a", "a");
    const run = e.start(["--follow", "--afl-sync", sync, "-j", "1", "-t", "1", "--max-idle", "0.3", "--wall-timeout", "120"], childOnce(e));
    await waitFor("the first export", () => (existsSync(queue) && readdirSync(queue).length === 1 ? true : undefined), 60_000);
    assert.deepEqual(readdirSync(queue), [exportName(0, "a-child")]);

    const otherQueue = join(e.dir, "other-queue");
    const otherIncoming = join(e.dir, "other-incoming");
    mkdirSync(otherQueue);
    mkdirSync(otherIncoming);
    renameSync(queue, join(e.dir, "old-queue"));
    symlinkSync(otherQueue, queue);
    rmSync(incoming, { recursive: true });
    symlinkSync(otherIncoming, incoming);
    // A new input: its child is explored, and its export is refused.
    writeSeed(join(e.seeds, "b"), "b");
    await waitFor("the refused export", () => (/--afl-sync: .*\/fuzzfleet\/queue is a symbolic link to '.*other-queue'; nothing is followed through a symlink; nothing is exported until it is a plain directory again$/m.test(run.output()) ? true : undefined), 60_000);
    assert.ok(e.corpusFiles().includes(sha256("b-child")), "the child exists: its export was attempted");
    run.child.kill("SIGINT");
    const r = await run.done;
    assert.equal(r.code, 6, `stopped by the signal\n${run.output()}`);
    assert.match(run.output(), /^ {2}exported 1 new input\(s\) to .*; \d+ export\(s\) refused, nothing written \(last: .*fuzzfleet\/queue is a symbolic link to '.*other-queue'; nothing is followed through a symlink\)$/m);
    assert.equal(run.output().match(/nothing is exported until it is a plain directory again/g)?.length, 1, "the refusal is said once");
    assert.deepEqual(readdirSync(otherQueue), [], "nothing written through the queue link");
    assert.deepEqual(readdirSync(otherIncoming), [], "nothing written through the .incoming link");
    assert.deepEqual(readdirSync(join(e.dir, "old-queue")), [exportName(0, "a-child")]);
  } finally {
    e.cleanup();
  }
});
