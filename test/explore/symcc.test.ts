// A real SymCC-built target (test/fixtures/symcc: tlv-symcc with its QSYM runtime) explored to
// exhaustion: the exact counts of a plain serial breadth-first exploration (its README), the two
// planted crashes and the hang found under three distinct signatures, carry-over to a second
// campaign, and the same counts with two masters. Needs Debian's libz3-4.
//
// The target's children depend on its input only while no solver check outlives QSYM's wall-clock
// timeout (fixture README): a count that differs says which of that and a fuzzfleet miscount it was.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ExploreDir } from "../helpers/explore.ts";
import type { ExploreStats } from "../../src/explore/command/stats.ts";
import { FIXTURE, longestCheck, requireRuntime, runDirect, SOLVER_TIMEOUT_US, TARGET } from "./symcc-fixture.ts";

const TOKEN = "symcc-test-token-0123456789";
// The README's reference figures.
const RUNS = 2450;
const GENERATED = 7471;
// Longer than any ordinary run on a loaded machine; the hang costs one of them.
const RUN_ARGS = ["-t", "10", "--max-idle", "1"];
const LIMIT_MS = 30 * 60_000;
// SHA-256 of the reference exploration's unique contents: their hashes, sorted, one per line.
const REFERENCE_CONTENTS = "6056fb5c5f6f243cf291c0d5d7d9716f27f2b7017af833175be0a2aca535d301";

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

/**
 * Why the campaign's counts differ from the reference, from what outlives it: whether it explored
 * the reference's contents, what the target writes when run directly on each of them (the sum
 * fuzzfleet must have counted if every run wrote what a direct one does), and every finding with
 * the longest solver check its output tail shows (a run the timeout killed may have had one that
 * timed out, and written other children).
 */
function explainCounts(e: ExploreDir, s: ExploreStats): string {
  const contents = e.corpusFiles();
  const digest = createHash("sha256").update(contents.map((h) => `${h}\n`).join("")).digest("hex");
  let direct = 0;
  const timedOut: string[] = [];
  for (const h of contents) {
    const r = runDirect(join(e.corpus, h), join(e.dir, "direct-out"));
    direct += r.children.length;
    if (longestCheck(r.log) >= SOLVER_TIMEOUT_US) timedOut.push(h);
  }
  const findings = s.findings.inputs.map((f) => `${f.kind} ${f.input_hash.slice(0, 12)} signal ${f.signal} longest solver check ${(longestCheck(f.stderr_tail) / 1e6).toFixed(3)} s`);
  return [
    `the campaign's ${contents.length} contents ${digest === REFERENCE_CONTENTS ? "are" : "are NOT"} the reference's`,
    `run directly on each of them, the target writes ${direct} children (the campaign counted ${s.generated}); direct runs with a solver check >= 10 s: ${timedOut.length ? timedOut.join(", ") : "none"}`,
    `findings: ${findings.join("; ")}`,
  ].join("\n");
}

/** Nothing when the counts are the reference's; else every figure of the campaign and what explains the difference. */
function whyCountsDiffer(e: ExploreDir, s: ExploreStats, output: string): string {
  if (s.observations === RUNS && s.generated === GENERATED) return "";
  return `${context(s, output)}\n${explainCounts(e, s)}`;
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
    const why = whyCountsDiffer(e, s, r.stdout);
    assert.equal(s.observations, RUNS, why);
    assert.equal(s.generated, GENERATED, why);
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
    const why = whyCountsDiffer(e, s, root.output());
    assert.equal(s.observations, RUNS, why);
    assert.equal(s.generated, GENERATED, why);
    assert.equal(s.masters, 2);
    assert.ok((s.by_master["0"] ?? 0) > 0 && (s.by_master["1"] ?? 0) > 0, `both masters committed: ${JSON.stringify(s.by_master)}`);
    checkFindings(s);
  } finally {
    e.cleanup();
  }
});
