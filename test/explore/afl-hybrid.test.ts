// The AFL++ hybrid loop end to end with the real afl-fuzz (Debian afl++, installed by .ci/run): a
// small C target built with afl-clang-fast; AFL++ fuzzes it as `-M main` while explore follows the
// instance's live queue/ (--follow) and exports what it finds into AFL's -o directory
// (--afl-sync); a second, short AFL++ run imports that export (AFL_IMPORT_FIRST). The explore
// target is a stand-in for a concolic executor: it writes the one child AFL++ does not find by
// itself (the input behind a six-byte magic prefix), which opens new coverage, so AFL++ keeps it.
// Bounded: about 15 s in all; local files only.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { waitFor } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";

const TARGET_C = `#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
  char buf[64] = {0};
  FILE *f = fopen(argv[1], "rb");
  if (!f) return 1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  if (n >= 6 && memcmp(buf, "MAGIC!", 6) == 0) { if (buf[6] == 'h') puts("deep"); puts("magic"); }
  if (buf[0] == 'a' && buf[1] == 'b') puts("ab");
  return 0;
}
`;

const AFL_ENV = {
  AFL_SKIP_CPUFREQ: "1",
  AFL_NO_UI: "1",
  AFL_NO_AFFINITY: "1",
  AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES: "1",
};

function afl(args: string[], env: NodeJS.ProcessEnv, cwd: string) {
  return spawn("afl-fuzz", args, { cwd, env: { ...process.env, ...AFL_ENV, ...env }, stdio: ["ignore", "pipe", "pipe"] });
}

function finished(child: ReturnType<typeof spawn>): Promise<{ code: number | null; out: string }> {
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, out })));
}

test("AFL++'s live queue feeds explore --follow, and explore's export is imported by afl-fuzz -M main", async () => {
  const e = new ExploreDir();
  try {
    writeFileSync(join(e.dir, "t.c"), TARGET_C);
    const cc = spawnSync("afl-clang-fast", ["-O1", "-o", "t", "t.c"], { cwd: e.dir, encoding: "utf8" });
    assert.equal(cc.status, 0, `afl-clang-fast (Debian afl++) must build the target: ${cc.error?.message ?? ""}${cc.stderr}`);
    const aflSeeds = join(e.dir, "afl-seeds");
    mkdirSync(aflSeeds);
    writeFileSync(join(aflSeeds, "s"), "hello\n");
    const out = join(e.dir, "afl-out");
    const queue = join(out, "main", "queue");

    // AFL++ fuzzes for 5 s; explore follows its queue while it grows, and some seconds longer.
    const first = finished(afl(["-M", "main", "-i", aflSeeds, "-o", out, "-V", "5", "--", "./t", "@@"], {}, e.dir));
    await waitFor("AFL++ to write its queue", () => (existsSync(queue) && readdirSync(queue).some((n) => n.startsWith("id:")) ? true : undefined), 30_000);
    const atStart = readdirSync(queue).filter((n) => n.startsWith("id:")).length;
    const gen = e.script("gen.sh", `case "$(head -c 6 "$1")" in MAGIC!) exit 0 ;; esac\n{ printf 'MAGIC!'; cat "$1"; } > "$SYMCC_OUTPUT_DIR/magic"`);
    const explore = e.startWith([
      "explore", "-i", queue, "-o", e.corpus, "--stats-json", e.statsPath,
      "--follow", "--afl-sync", out, "--corpus-mode", "0644", "-j", "1", "-t", "1", "--max-idle", "0.5", "--wall-timeout", "9",
      "--", gen, "@@",
    ]);
    const a = await first;
    assert.equal(a.code, 0, a.out);
    const r = await explore.done;
    assert.equal(r.code, 5, "followed until the wall budget\n" + explore.output());
    const inAflQueue = readdirSync(queue).filter((n) => n.startsWith("id:")).length;
    const s = e.stats();
    assert.equal(s.external_inputs, new Set(readdirSync(queue).filter((n) => n.startsWith("id:")).map((n) => readFileSync(join(queue, n), "latin1"))).size, "every queue entry, also those written after explore started, was admitted");
    assert.ok(inAflQueue >= atStart && s.elapsed_seconds >= 7, `followed the queue long past --max-idle 0.5 (${s.elapsed_seconds} s)`);
    assert.ok(s.interesting >= 1, explore.output());
    assert.deepEqual(readdirSync(e.corpus).filter((n) => n.startsWith(".") && n !== ".fuzzfleet"), [], "no temp file in the corpus AFL++ may read");
    const exported = readdirSync(join(out, "fuzzfleet", "queue"));
    // AFL++ may import an export while it still runs (a main instance syncs at its start): explore
    // then sees that input come back through AFL's queue, so it counts as external there.
    assert.ok(exported.length >= Math.max(1, s.interesting), `every new input exported: ${exported.join(" ")}\n${explore.output()}`);
    for (const name of exported) assert.ok(readFileSync(join(out, "fuzzfleet", "queue", name), "latin1").startsWith("MAGIC!"), `${name}: only explore's children, none of AFL's own`);
    for (const name of exported) assert.match(name, /^id:\d{6},src:fuzzfleet,sha256:[0-9a-f]{64}$/);

    // A short AFL++ run on the same -o imports the export before anything else.
    const second = await finished(afl(["-M", "main", "-i", aflSeeds, "-o", out, "-V", "2", "--", "./t", "@@"], { AFL_IMPORT_FIRST: "1", AFL_AUTORESUME: "1" }, e.dir));
    assert.equal(second.code, 0, second.out);
    // Imported now, or already during the first run (a resumed queue keeps the names in orig:…).
    const imported = readdirSync(queue).filter((n) => n.includes("sync:fuzzfleet"));
    assert.ok(imported.length >= 1, `AFL++ imported nothing from fuzzfleet: ${readdirSync(queue).join(" ")}\n${second.out}`);
    assert.ok(readFileSync(join(queue, imported[0]!), "latin1").startsWith("MAGIC!"));
  } finally {
    e.cleanup();
  }
});
