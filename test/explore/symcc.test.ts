// A real SymCC-built target (test/fixtures/symcc: tlv-symcc with its QSYM runtime) explored to
// exhaustion: the exact counts of a plain serial breadth-first exploration (its README), the two
// planted crashes and the hang found under three distinct signatures, carry-over to a second
// campaign, and the same counts with two masters. Needs Debian's libz3-4.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ROOT } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import type { ExploreStats } from "../../src/explore/command/stats.ts";

const FIXTURE = join(ROOT, "test/fixtures/symcc");
const TARGET = join(FIXTURE, "tlv-symcc");
const TOKEN = "symcc-test-token-0123456789";
// The README's reference figures.
const RUNS = 2450;
const GENERATED = 7471;
// Longer than any ordinary run on a loaded machine; the hang costs one of them.
const RUN_ARGS = ["-t", "10", "--max-idle", "1"];
const LIMIT_MS = 30 * 60_000;

function requireRuntime(): void {
  const ldd = spawnSync("ldd", [TARGET], { encoding: "utf8" });
  assert.equal(ldd.status, 0, `ldd ${TARGET} failed: ${ldd.stderr}`);
  assert.doesNotMatch(ldd.stdout, /libz3\.so\.4 => not found/, "the SymCC fixture needs Z3's library: install it with `apt-get install -y libz3-4`");
  assert.match(ldd.stdout, /libsymcc-rt\.so => \S*test\/fixtures\/symcc\/libsymcc-rt\.so/, "tlv-symcc must load the runtime beside it");
}

function seeded(): ExploreDir {
  const e = new ExploreDir();
  for (const n of readdirSync(join(FIXTURE, "seeds"))) e.seed(n, readFileSync(join(FIXTURE, "seeds", n)));
  return e;
}

/** What to print when a count differs: every scalar figure of the campaign and how it ended. */
function context(s: ExploreStats, stdout: string): string {
  const scalars = Object.fromEntries(Object.entries(s).filter(([, v]) => typeof v !== "object" || v === null));
  return `${JSON.stringify(scalars)}\nfindings: ${JSON.stringify(s.findings.groups)}\n${stdout.slice(-4000)}`;
}

/** The planted bugs: one SIGABRT, one SIGSEGV, one hang, each its own signature. */
function checkFindings(s: ExploreStats): void {
  const f = s.findings;
  assert.deepEqual(
    f.inputs.map((i) => [i.kind, i.signal]).sort(),
    [["crash", 11], ["crash", 6], ["hang", null]].sort(),
    `the two crashes and the hang: ${JSON.stringify(f.groups, null, 1)}`,
  );
  assert.equal(new Set(f.inputs.map((i) => i.signature)).size, 3, "three distinct signatures");
  assert.equal(f.groups.length, 3);
  assert.ok(f.inputs.every((i) => i.times_seen === 1), "each recorded once");
  assert.ok(f.inputs.every((i) => !i.stderr_tail.includes(FIXTURE) && !i.signature.includes("/scratch/")), "no machine path in a signature");
}

test("tlv-symcc explored to exhaustion: the reference counts, two crashes and a hang under three signatures; a second campaign skips everything", { timeout: LIMIT_MS }, () => {
  requireRuntime();
  const e = seeded();
  try {
    const r = e.run(["-j", "2", ...RUN_ARGS], [TARGET, "@@"], {}, LIMIT_MS);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const s = e.stats();
    assert.equal(s.observations, RUNS, context(s, r.stdout));
    assert.equal(s.generated, GENERATED, context(s, r.stdout));
    assert.equal(s.external_inputs, 2);
    assert.equal(s.interesting, RUNS - 2);
    assert.equal(s.redundant, GENERATED - (RUNS - 2));
    assert.equal(e.corpusFiles().length, RUNS);
    checkFindings(s);

    const again = e.run(["-j", "2", ...RUN_ARGS], [TARGET, "@@"], {}, LIMIT_MS);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    const s2 = e.stats();
    assert.equal(s2.observations, 0, "nothing runs again");
    assert.equal(s2.skipped_explored, RUNS);
    assert.match(again.stdout, new RegExp(`already explored: +${RUNS} skipped`));
    assert.equal(s2.interesting, 0);
    checkFindings(s2);
  } finally {
    e.cleanup();
  }
});

test("tlv-symcc with two masters: the same counts, split between them, and the same three findings", { timeout: LIMIT_MS }, async () => {
  requireRuntime();
  const e = seeded();
  try {
    const extra = ["-j", "1", ...RUN_ARGS, "--token", TOKEN];
    const root = e.start(["--port", "0", "--bind", "127.0.0.1", "--masters", "2", ...extra], [TARGET, "@@"]);
    const port = await root.port();
    const sub = e.startWith(["explore", "-i", e.seeds, "-o", e.corpus, "--join", `127.0.0.1:${port}`, ...extra, "--", TARGET, "@@"]);
    const [a, b] = await Promise.all([root.done, sub.done]);
    assert.equal(a.code, 0, root.output());
    assert.equal(b.code, 0, sub.output());
    const s = e.stats();
    assert.equal(s.observations, RUNS, context(s, root.output()));
    assert.equal(s.generated, GENERATED, context(s, root.output()));
    assert.equal(s.masters, 2);
    assert.ok((s.by_master["0"] ?? 0) > 0 && (s.by_master["1"] ?? 0) > 0, `both masters committed: ${JSON.stringify(s.by_master)}`);
    checkFindings(s);
  } finally {
    e.cleanup();
  }
});
