// `failures --corpus` and `export --corpus` on a real explore campaign: the findings a run
// recorded (a crash and a hang, the crash hit by two inputs) read back by signature, as JSON, as a
// bundle with each input and its output tail, with control characters escaped; a directory that is
// no explore corpus and a sweep-only filter are refused with the fix.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { CLI } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { sha256 } from "../helpers/scratch.ts";

function cli(args: string[], cwd: string) {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Two inputs that abort with the same message, one that hangs, one that passes. */
function explored(): ExploreDir {
  const e = new ExploreDir();
  e.seed("a1", "abort one\n");
  e.seed("a2", "abort two\n");
  e.seed("h", "hang\n");
  e.seed("ok", "ok\n");
  const t = e.script(
    "t.sh",
    `case "$(cat "$1")" in\n  abort*) printf 'boom at 0x1234 \\033[31mred\\n' >&2; kill -ABRT $$ ;;\n  hang) sleep 60 ;;\nesac`,
  );
  const r = e.run(["-j", "2", "-t", "1s", "--max-idle", "1s"], [t, "@@"]);
  assert.equal(e.stats().observations, 4, r.stdout + r.stderr);
  return e;
}

test("failures --corpus lists an explore campaign's findings by signature; --json carries the same", () => {
  const e = explored();
  try {
    const text = cli(["failures", "--corpus", e.corpus], e.dir);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /2 signature\(s\), 3 input\(s\) \(2 crash\(es\), 1 hang\(s\)\)/);
    assert.match(text.stdout, /crash\s+signal 6 \| boom at <addr>/);
    assert.match(text.stdout, /hang\s+timeout/);
    assert.ok(text.stdout.includes(sha256("abort one\n").slice(0, 16)), text.stdout);
    assert.ok(!text.stdout.includes(sha256("ok\n").slice(0, 16)), "a passing input is no finding");
    const json = cli(["failures", "--corpus", e.corpus, "--json"], e.dir);
    const d = JSON.parse(json.stdout) as { totals: { inputs: number; signatures: number }; signatures: { signature: string; inputs: number; findings: { input_hash: string }[] }[] };
    assert.deepEqual(d.totals, { signatures: 2, inputs: 3, crashes: 2, hangs: 1, times_seen: 3, not_reproduced: 0 });
    assert.equal(d.signatures[0].inputs, 2, "the largest group first");
    assert.deepEqual(d.signatures[0].findings.map((f) => f.input_hash).sort(), [sha256("abort one\n"), sha256("abort two\n")].sort());
    const verbose = cli(["failures", "--corpus", e.corpus, "-v"], e.dir);
    assert.match(verbose.stdout, /\| boom at 0x1234 \\x1b\[31mred/, "the output tail is shown with its escape character escaped");
  } finally {
    e.cleanup();
  }
});

test("export --corpus bundles every finding with its input and output tail", () => {
  const e = explored();
  try {
    const out = join(e.dir, "bundle.txt");
    const r = cli(["export", "--corpus", e.corpus, "-o", out], e.dir);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /wrote .*bundle\.txt \(3 finding\(s\)/);
    const text = readFileSync(out, "utf8");
    assert.equal(text.match(/^===== FINDING /gm)?.length, 3);
    assert.ok(text.includes(`===== FINDING ${sha256("hang\n")}  hang (timeout)`), text);
    assert.match(text, /----- input  shown=1 of 1\nabort two\n/);
    assert.match(text, /----- output tail  shown=1 of 1\nboom at 0x1234 \\x1b\[31mred\n/);
    assert.ok(!text.includes("\x1b"), "no raw escape character in a bundle");
    assert.match(text, /end of export -- 3 finding\(s\)/);
  } finally {
    e.cleanup();
  }
});

test("--corpus refuses a directory no explore campaign ran in, and sweep-only filters", () => {
  const e = new ExploreDir();
  try {
    mkdirSync(e.corpus, { recursive: true });
    const none = cli(["failures", "--corpus", e.corpus], e.dir);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /no explore campaign ran here .*point --corpus at the -o directory of an explore campaign/);
    const missing = cli(["export", "--corpus", join(e.dir, "nope")], e.dir);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--corpus .*nope: not a directory/);
    const bucket = cli(["failures", "--corpus", e.corpus, "--bucket", "x"], e.dir);
    assert.equal(bucket.code, 2);
    assert.match(bucket.stderr, /--bucket filters a sweep's failures; with --corpus .* leave it out/);
  } finally {
    e.cleanup();
  }
});
