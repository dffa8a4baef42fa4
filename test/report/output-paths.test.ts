// Every file fuzzfleet writes for the user at a path the user named, through the real CLI:
// `export -o` (a sweep's failures and an explore campaign's findings), `report -o` and `explore
// --stats-json`. A symlink or a hard link at the destination is replaced, never written through;
// a FIFO is refused at once (opening it would block until a reader came); a path inside the
// corpus or the failure artifacts is refused; a dangling symlink or a missing directory is one
// line and exit 2, never a stack trace.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, linkSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Campaign, CLI } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";

/** Long enough for any of these commands; a FIFO opened for writing would block past it. */
const HANG_MS = 20_000;

function mkfifo(path: string): void {
  const r = spawnSync("mkfifo", [path], { encoding: "utf8" });
  assert.equal(r.status, 0, `mkfifo ${path}: ${r.stderr}`);
}

/** Exit 2 with exactly one line on stderr, no stack trace, and not killed by the hang timeout. */
function oneLineRefusal(r: { code: number | null; stderr: string; signal?: NodeJS.Signals | null }, why: RegExp): void {
  assert.equal(r.signal ?? null, null, `the command hung until the ${HANG_MS} ms timeout killed it`);
  assert.equal(r.code, 2, r.stderr);
  const lines = r.stderr.split("\n").filter((l) => l !== "");
  assert.equal(lines.length, 1, `one line:\n${r.stderr}`);
  assert.match(lines[0]!, why);
  assert.doesNotMatch(r.stderr, /unexpected error|\n\s+at /, "no stack trace");
}

/** Names in `dir` that are temporary files of an output write. */
function tempsIn(dir: string): string[] {
  return readdirSync(dir).filter((n) => n.startsWith(".") && n.endsWith(".tmp"));
}

describe("export -o and report -o on a swept campaign", () => {
  const c = new Campaign();
  before(() => assert.equal(c.cli(["run", "--for", "5s"]).code, 1, "the planted generator finds failures"));
  after(() => c.cleanup());

  test("export -o onto a symlink replaces the link with the bundle; the link's target is unchanged", () => {
    const victim = join(c.dir, "victim.txt");
    writeFileSync(victim, "keep me\n");
    const out = join(c.dir, "bundle-link.txt");
    symlinkSync(victim, out);
    const r = c.cli(["export", "-o", out], { timeoutMs: HANG_MS });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(readFileSync(victim, "utf8"), "keep me\n");
    assert.ok(lstatSync(out).isFile(), "the link was replaced by a regular file");
    assert.match(readFileSync(out, "utf8"), /^fuzzfleet failure export\n[\s\S]*end of export -- \d+ failure\(s\)/);
    assert.deepEqual(tempsIn(c.dir), []);
  });

  test("export -o onto a hard link writes a new file; the other name keeps its content", () => {
    const linked = join(c.dir, "linked.txt");
    writeFileSync(linked, "the other name\n");
    const out = join(c.dir, "bundle-hard.txt");
    linkSync(linked, out);
    const r = c.cli(["export", "-o", out], { timeoutMs: HANG_MS });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(readFileSync(linked, "utf8"), "the other name\n");
    assert.equal(lstatSync(linked).nlink, 1, "the link between the two names is gone");
    assert.match(readFileSync(out, "utf8"), /^fuzzfleet failure export\n/);
  });

  test("export -o onto a FIFO is refused at once with one line (exit 2), nothing opened", () => {
    const fifo = join(c.dir, "bundle.fifo");
    mkfifo(fifo);
    const r = c.cli(["export", "-o", fifo], { timeoutMs: HANG_MS });
    oneLineRefusal(r, /^fuzzfleet: -o .*bundle\.fifo is a FIFO; the export is written as a regular file: choose a file path \(nothing was opened\)$/);
    assert.ok(lstatSync(fifo).isFIFO());
    assert.equal(r.stdout, "");
  });

  test("export -o inside the failure artifacts is refused; nothing is written there", () => {
    const failures = join(c.outDir, "failures");
    const before = readdirSync(failures).sort();
    const r = c.cli(["export", "-o", join(failures, "bundle.txt")], { timeoutMs: HANG_MS });
    oneLineRefusal(r, /^fuzzfleet: -o .*fuzzfleet-out\/failures\/bundle\.txt lies in the failure artifacts .*; choose a path outside it$/);
    assert.deepEqual(readdirSync(failures).sort(), before);
  });

  test("export -o and report -o naming the store, or a report inside the failure artifacts, are refused; the store is unchanged", () => {
    const before = readFileSync(c.dbPath);
    const onStore = c.cli(["export", "-o", c.dbPath], { timeoutMs: HANG_MS });
    oneLineRefusal(onStore, /^fuzzfleet: -o .*fuzzfleet\.db lies in the store .*; choose a path outside it$/);
    assert.ok(readFileSync(c.dbPath).equals(before), "the store was not replaced");
    const reportInArtifacts = c.cli(["report", "-o", join(c.outDir, "failures", "plots")], { timeoutMs: HANG_MS });
    oneLineRefusal(reportInArtifacts, /^fuzzfleet: -o .*fuzzfleet-out\/failures\/plots lies in the failure artifacts .*; choose a path outside it$/);
    assert.ok(!existsSync(join(c.outDir, "failures", "plots")));
  });

  test("export -o in a directory that is missing or a dangling symlink is one line, exit 2", () => {
    const missing = c.cli(["export", "-o", join(c.dir, "no-such-dir", "bug.txt")], { timeoutMs: HANG_MS });
    oneLineRefusal(missing, /^fuzzfleet: -o .*no-such-dir\/bug\.txt: .*no-such-dir does not exist; create the directory first or choose another path for -o$/);
    symlinkSync(join(c.dir, "nowhere"), join(c.dir, "dangling-dir"));
    const dangling = c.cli(["export", "-o", join(c.dir, "dangling-dir", "bug.txt")], { timeoutMs: HANG_MS });
    oneLineRefusal(dangling, /^fuzzfleet: -o .*dangling-dir\/bug\.txt: .*dangling-dir is a symbolic link to '.*nowhere' that leads to no directory; /);
    assert.ok(!existsSync(join(c.dir, "nowhere")), "nothing was created through the link");
  });

  test("report -o over an index.html that is a hard link writes a new file; the other name keeps its content", () => {
    const dir = join(c.dir, "report-hard");
    mkdirSync(dir);
    const linked = join(c.dir, "linked-page.html");
    writeFileSync(linked, "not a report\n");
    linkSync(linked, join(dir, "index.html"));
    const r = c.cli(["report", "-o", dir], { timeoutMs: HANG_MS });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(readFileSync(linked, "utf8"), "not a report\n");
    assert.match(readFileSync(join(dir, "index.html"), "utf8"), /^<!doctype html>/i);
    assert.deepEqual(tempsIn(dir), []);
  });

  test("report -o with a symlinked index.html replaces the link; its target is unchanged", () => {
    const dir = join(c.dir, "report-link");
    mkdirSync(dir);
    const victim = join(c.dir, "victim-page.html");
    writeFileSync(victim, "keep\n");
    symlinkSync(victim, join(dir, "index.html"));
    const r = c.cli(["report", "-o", dir], { timeoutMs: HANG_MS });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(readFileSync(victim, "utf8"), "keep\n");
    assert.ok(lstatSync(join(dir, "index.html")).isFile());
  });

  test("report -o with a FIFO as index.html is refused at once with one line (exit 2)", () => {
    const dir = join(c.dir, "report-fifo");
    mkdirSync(dir);
    mkfifo(join(dir, "index.html"));
    const r = c.cli(["report", "-o", dir], { timeoutMs: HANG_MS });
    oneLineRefusal(r, /^fuzzfleet: -o .*report-fifo\/index\.html is a FIFO; the report is written as a regular file/);
  });

  test("report -o naming a dangling symlink is one line, exit 2, no stack trace; nothing is created through it", () => {
    const link = join(c.dir, "report-dangling");
    symlinkSync(join(c.dir, "report-target"), link);
    const r = c.cli(["report", "-o", link], { timeoutMs: HANG_MS });
    oneLineRefusal(r, /^fuzzfleet: -o .*report-dangling: .*report-dangling is a symbolic link to '.*report-target' that leads to no directory; /);
    assert.ok(!existsSync(join(c.dir, "report-target")));
  });
});

describe("export -o and --stats-json of an explore campaign", () => {
  const e = new ExploreDir();
  const crash = [e.script("crash.sh", `grep -q boom "$1" && kill -SEGV $$\nexit 0`), "@@"];
  before(() => {
    e.seed("ok", "ok");
    e.seed("boom", "boom");
    const r = e.run(["-j", "1", "--max-idle", "0.5"], crash);
    assert.equal(r.code, 0, r.stdout + r.stderr);
  });
  after(() => e.cleanup());

  function cli(args: string[]) {
    // SIGKILL: a campaign blocked in a write never runs its SIGTERM handler.
    const r = spawnSync(process.execPath, [CLI, ...args], { cwd: e.dir, encoding: "utf8", timeout: HANG_MS, killSignal: "SIGKILL" });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr, signal: r.signal };
  }

  function corpusTree(): string[] {
    return readdirSync(e.corpus, { recursive: true }).map(String).sort();
  }

  test("export --corpus C -o C/x is refused; the corpus is unchanged", () => {
    const before = corpusTree();
    for (const out of [join(e.corpus, "bundle.txt"), join(e.corpus, ".fuzzfleet", "bundle.txt")]) {
      const r = cli(["export", "--corpus", e.corpus, "-o", out]);
      oneLineRefusal(r, /^fuzzfleet: -o .* lies in the corpus .*corpus, which fuzzfleet never writes the export into; choose a path outside it$/);
    }
    assert.deepEqual(corpusTree(), before);
  });

  test("export --corpus -o onto a symlink replaces the link; the target is unchanged", () => {
    const victim = join(e.dir, "victim.txt");
    writeFileSync(victim, "keep\n");
    const out = join(e.dir, "findings.txt");
    symlinkSync(victim, out);
    const r = cli(["export", "--corpus", e.corpus, "-o", out]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(readFileSync(victim, "utf8"), "keep\n");
    assert.match(readFileSync(out, "utf8"), /===== FINDING /);
  });

  test("--stats-json onto a symlink replaces the link with the statistics; the target is unchanged", () => {
    const victim = join(e.dir, "victim-stats.txt");
    writeFileSync(victim, "keep\n");
    const stats = join(e.dir, "stats-link.json");
    symlinkSync(victim, stats);
    const r = cli(["explore", "-i", e.seeds, "-o", e.corpus, "--stats-json", stats, "--fresh", "-j", "1", "--max-idle", "0.5", "--", ...crash]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(readFileSync(victim, "utf8"), "keep\n");
    assert.ok(lstatSync(stats).isFile());
    assert.equal((JSON.parse(readFileSync(stats, "utf8")) as { observations: number }).observations, 2);
  });

  test("--stats-json onto a FIFO or inside the corpus is refused before the campaign runs (exit 2, one line)", () => {
    const fifo = join(e.dir, "stats.fifo");
    mkfifo(fifo);
    const before = corpusTree();
    const args = (stats: string) => ["explore", "-i", e.seeds, "-o", e.corpus, "--stats-json", stats, "--fresh", "-j", "1", "--max-idle", "0.5", "--", ...crash];
    oneLineRefusal(cli(args(fifo)), /^fuzzfleet: --stats-json .*stats\.fifo is a FIFO; the statistics file is written as a regular file/);
    oneLineRefusal(cli(args(join(e.corpus, "stats.json"))), /^fuzzfleet: --stats-json .*corpus\/stats\.json lies in the corpus /);
    assert.deepEqual(corpusTree(), before, "nothing ran");
  });
});
