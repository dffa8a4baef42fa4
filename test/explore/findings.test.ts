// Findings of explore campaigns: runs that end by a signal, a sanitizer's error exit or the
// timeout are recorded once per commit in the hidden findings store (never in the public corpus),
// grouped by signature, shown in the statistics, and still there for the next campaign, which
// runs only content not explored before.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it, test } from "node:test";
import { DEFAULT_BUDGETS } from "../../src/explore/state/corpus.ts";
import { classifyRun, FindingsStore, normaliseLine, signatureOf, type RunFinding } from "../../src/explore/state/findings.ts";
import { LeaseTable } from "../../src/explore/state/lease-table.ts";
import { ExploreMaster } from "../../src/explore/master/master.ts";
import { ExploreDir, writeSeed } from "../helpers/explore.ts";
import { scratchDirs, sha256 } from "../helpers/scratch.ts";
import { campaignStateLeft } from "./leftovers.ts";

const { freshDir } = scratchDirs("findings");

const crash = (tail: string, signal = 6): RunFinding => ({ kind: "crash", signal, exit_code: null, stderr_tail: tail });

describe("classifying a run and its signature", () => {
  it("a signal, a timeout and a sanitizer's error exit are findings; an ordinary exit code or an interruption is not", () => {
    const none = () => "";
    assert.deepEqual(classifyRun({ outcome: "complete", exitCode: null, signal: "SIGSEGV" }, () => "x"), { kind: "crash", signal: 11, exit_code: null, stderr_tail: "x" });
    assert.equal(classifyRun({ outcome: "timeout", exitCode: null, signal: "SIGTERM" }, none)?.kind, "hang");
    assert.equal(classifyRun({ outcome: "complete", exitCode: 1, signal: null }, () => "rejected\n"), null);
    assert.equal(classifyRun({ outcome: "complete", exitCode: 0, signal: null }, none), null);
    assert.equal(classifyRun({ outcome: "interrupted", exitCode: null, signal: "SIGTERM" }, none), null);
    const asan = "==42==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000011\n";
    assert.deepEqual(classifyRun({ outcome: "complete", exitCode: 1, signal: null }, () => asan), { kind: "crash", signal: null, exit_code: 1, stderr_tail: asan });
  });

  it("groups by the sanitizer's SUMMARY and top frames, else by signal and the last line with numbers normalised", () => {
    const report = (addr: string, fn: string) =>
      `==7==ERROR: AddressSanitizer: SEGV on unknown address ${addr}\n    #0 0x4f1a2b in ${fn} /src/t.c:12:3\n    #1 0x4f1c00 in main /src/t.c:40\n` +
      `SUMMARY: AddressSanitizer: SEGV /src/t.c:12:3 in ${fn}\n==7==ABORTING\n`;
    const a = signatureOf({ kind: "crash", signal: null, exit_code: 1, stderr_tail: report("0x000000000010", "parse") });
    assert.equal(a, "AddressSanitizer: SEGV /src/t.c:<n>:<n> in parse | parse | main");
    assert.equal(signatureOf({ kind: "crash", signal: null, exit_code: 1, stderr_tail: report("0x7ffd00", "parse") }), a, "another address, the same bug");
    assert.notEqual(signatureOf({ kind: "crash", signal: null, exit_code: 1, stderr_tail: report("0x10", "emit") }), a);
    assert.equal(signatureOf(crash("start\nboom at 0x1f2e step 31\n\n")), "signal 6 | boom at <addr> step <n>");
    assert.equal(signatureOf(crash("boom at 0xdead step 7")), signatureOf(crash("boom at 0x1f2e step 31")));
    assert.notEqual(signatureOf(crash("boom", 11)), signatureOf(crash("boom", 6)));
    assert.equal(signatureOf({ kind: "hang", signal: null, exit_code: null, stderr_tail: "" }), "timeout");
    assert.equal(normaliseLine("pid 1234 at 0xABCDEF, id deadbeef00"), "pid <n> at <addr>, id <hex>");
  });
});

describe("FindingsStore", () => {
  it("records an input once per fence: a replayed fence changes nothing, a new one counts again", () => {
    const store = new FindingsStore(join(freshDir(), "findings"));
    const h = sha256("crashing input");
    assert.equal(store.record(h, "fence-1", crash("boom 1"), new Date(1000), "0123456789ab"), "new");
    assert.equal(store.record(h, "fence-1", crash("boom 1"), new Date(2000), "0123456789ab"), "already");
    assert.equal(store.record(h, "fence-2", crash("boom 2"), new Date(3000), "0123456789ab"), "again");
    const [r, ...rest] = store.list();
    assert.deepEqual(rest, []);
    assert.equal(r.times_seen, 2);
    assert.equal(r.first_seen, new Date(1000).toISOString());
    assert.equal(r.last_seen, new Date(3000).toISOString());
    assert.equal(r.stderr_tail, "boom 1", "the first tail is kept");
  });

  it("never reads a record through a symlink and passes over records that do not validate", () => {
    const dir = join(freshDir(), "findings");
    const store = new FindingsStore(dir);
    store.record(sha256("a"), "f", crash("a"), new Date(), "0123456789ab");
    const elsewhere = join(freshDir(), "planted.json");
    writeFileSync(elsewhere, readFileSync(join(dir, `${sha256("a")}.json`)));
    symlinkSync(elsewhere, join(dir, `${sha256("b")}.json`));
    writeFileSync(join(dir, `${sha256("c")}.json`), "{not json");
    assert.deepEqual(store.list().map((r) => r.input_hash), [sha256("a")]);
  });
});

/** A target that aborts, segfaults, hangs, fails like a sanitizer, or writes one child that aborts again. */
function crashingTarget(e: ExploreDir): string[] {
  e.seed("ok", "ok\n");
  e.seed("abort", "abort one\n");
  e.seed("segv", "segv\n");
  e.seed("hang", "hang\n");
  e.seed("asan", "asan\n");
  e.seed("reject", "reject\n");
  const t = e.script(
    "t.sh",
    `case "$(cat "$1")" in
  ok) printf 'abort two\\n' > "$SYMCC_OUTPUT_DIR/c1"; printf 'reject\\n' > "$SYMCC_OUTPUT_DIR/c2" ;;
  abort*) echo "boom at 0x$$ step $$" >&2; kill -ABRT $$ ;;
  segv) printf 'segfault\\033[31m red\\n' >&2; kill -SEGV $$ ;;
  hang) echo waiting >&2; sleep 60 ;;
  asan) echo "==$$==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6020" >&2
        echo "    #0 0x4f1a2b in parse /src/t.c:12:3" >&2
        echo "SUMMARY: AddressSanitizer: heap-buffer-overflow /src/t.c:12:3 in parse" >&2; exit 1 ;;
  reject) echo "not a record" >&2; exit 1 ;;
esac`,
  );
  return [t, "@@"];
}

test("crashes and hangs are recorded once, grouped, kept out of the corpus, and carried over; the next campaign runs only new content", () => {
  const e = new ExploreDir();
  try {
    const target = crashingTarget(e);
    // Every run is counted in a log (the same target, so the same build, in both campaigns).
    const log = join(e.dir, "runs.log");
    writeFileSync(target[0]!, readFileSync(target[0]!, "utf8").replace("#!/bin/sh\n", `#!/bin/sh\necho run >> "${log}"\n`));
    const r = e.run(["-j", "2", "-t", "1", "--max-idle", "1"], target);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const s = e.stats();
    assert.equal(s.observations, 7, "six seeds and one new child");
    assert.equal(s.generated, 2);
    assert.equal(s.interesting, 1, "'reject' was a seed already");
    assert.equal(s.redundant, 1);
    assert.deepEqual([s.findings.crashes, s.findings.hangs], [4, 1]);
    const bySig = Object.fromEntries(s.findings.groups.map((g) => [g.signature, g.inputs.sort()]));
    assert.deepEqual(bySig, {
      "signal 6 | boom at <addr> step <n>": [sha256("abort one\n"), sha256("abort two\n")].sort(),
      "signal 11 | segfault\u001b[<n>m red": [sha256("segv\n")],
      "timeout | waiting": [sha256("hang\n")],
      "AddressSanitizer: heap-buffer-overflow /src/t.c:<n>:<n> in parse | parse": [sha256("asan\n")],
    });
    for (const f of s.findings.inputs) assert.equal(f.times_seen, 1, `${f.input_hash} recorded once`);
    assert.equal(s.findings.inputs.find((f) => f.input_hash === sha256("asan\n"))?.exit_code, 1);
    assert.match(r.stdout, /findings: +4 crash\(es\), 1 hang\(s\) under 4 signature\(s\)/);
    assert.match(r.stdout, /segfault\\x1b\[31m red/, "the tail is escaped when printed");
    assert.ok(!r.stdout.includes("\u001b"), "no raw escape reaches the terminal");
    // The findings live in the hidden state directory, never among the public corpus files.
    assert.equal(e.corpusFiles().length, 7);
    assert.equal(readdirSync(join(e.corpus, ".fuzzfleet", "findings")).filter((n) => n.endsWith(".json")).length, 5);
    assert.deepEqual(campaignStateLeft(e.corpus), []);

    // A second campaign on the same corpus with the same target: nothing is run again, nothing counted as new.
    writeFileSync(log, "");
    e.seed("new", "abort three\n");
    const again = e.run(["-j", "2", "-t", "1", "--max-idle", "1"], target);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    const s2 = e.stats();
    assert.equal(s2.skipped_explored, 7);
    assert.match(again.stdout, /already explored: +7 skipped/);
    assert.equal(s2.observations, 1, "only the new seed ran");
    assert.equal(readFileSync(log, "utf8"), "run\n");
    assert.equal(s2.interesting, 0, "inputs already in the corpus are not new");
    assert.equal(s2.findings.crashes, 5, "the earlier findings are still there, with the new one");
    assert.equal(s2.findings.recorded_this_session, 1);
    assert.deepEqual(s2.findings.inputs.map((f) => f.times_seen), [1, 1, 1, 1, 1, 1], "nothing recorded twice");
    assert.equal(s2.findings.groups.find((g) => g.signature.startsWith("signal 6"))?.count, 3);
  } finally {
    e.cleanup();
  }
});

function master(corpusDir: string, inputDir: string, dir: string, fresh: boolean): ExploreMaster {
  return new ExploreMaster({
    corpusDir,
    inputDir,
    stagingRoot: join(dir, `staging-${fresh}`),
    leases: new LeaseTable({ root: join(dir, `leases-${fresh}`), durability: "fence" }),
    epoch: (fresh ? "f" : "e").repeat(64),
    rank: 0,
    ranks: [0],
    ownership: "rendezvous",
    budgets: DEFAULT_BUDGETS,
    build: "0123456789ab",
    timeoutSeconds: 5,
    leaseTtlMs: 60_000,
    wallNow: () => Date.now(),
    log: () => {},
    fresh,
  });
}

test("content in an earlier epoch's ledger is skipped and counted, unless the master runs fresh; the epoch's own ledger never skips", () => {
  const dir = freshDir();
  const inputDir = join(dir, "in");
  const corpusDir = join(dir, "corpus");
  mkdirSync(inputDir);
  mkdirSync(join(corpusDir, ".fuzzfleet", "explored"), { recursive: true });
  writeSeed(join(inputDir, "a"), "a\n");
  writeSeed(join(inputDir, "b"), "b\n");
  const ledger = (epoch: string) => join(corpusDir, ".fuzzfleet", "explored", `${epoch}-r0.log`);
  writeFileSync(ledger("0".repeat(64)), `${sha256("a\n")} 0123456789ab\nnot-a-hash\n${sha256("b")} 0123456789ab`);
  // The resumed epoch's own ledger lists b: its lease table, not the ledger, decides for it.
  writeFileSync(ledger("e".repeat(64)), `${sha256("b\n")} 0123456789ab\n`);
  const m = master(corpusDir, inputDir, dir, false);
  m.admitInputs();
  assert.equal(m.pendingCount, 1, "only b is queued");
  assert.equal(m.explored.skippedCount, 1);
  assert.equal(m.counters.skippedExplored, 1);
  const f = master(corpusDir, inputDir, dir, true);
  f.admitInputs();
  assert.equal(f.pendingCount, 2, "--fresh runs everything again");
  assert.equal(f.explored.skippedCount, 0);
  assert.ok(existsSync(join(corpusDir, ".fuzzfleet", `work-${"e".repeat(64)}`, "preexisting")));
});
