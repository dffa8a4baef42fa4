// The campaign token stays out of an explore campaign's targets and findings: a target's
// environment never holds it, and a target that prints it anyway (it read the token file) and
// crashes leaves "[redacted]" in its finding's output tail and signature, wherever the finding
// is shown: the statistics, `failures --corpus --json` and the `export --corpus` bundle. A
// --token-file is read (never created, never removed); a missing one is refused before anything runs.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { CLI } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { sha256 } from "../helpers/scratch.ts";

const TOKEN = "explore-secret-token-0123456789";
const TEST = { timeout: 120_000 };

function cli(e: ExploreDir, args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: e.dir, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test("a target never sees the token of the master's environment; the user's variables it does", TEST, () => {
  const e = new ExploreDir();
  try {
    e.seed("one", "1\n");
    const seen = join(e.dir, "seen.env");
    const target = e.script("dump-env.sh", `env > ${JSON.stringify(seen)}`);
    const r = e.run(["-j", "1", "--max-idle", "0.5", "-t", "5"], [target, "@@"], { FUZZFLEET_TOKEN: TOKEN, FUZZFLEET_SCRAPE_TOKEN: `scrape-${TOKEN}`, USER_MARK: "kept" });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const env = readFileSync(seen, "utf8");
    assert.match(env, /^USER_MARK=kept$/m);
    assert.match(env, /^SYMCC_INPUT_FILE=/m);
    assert.doesNotMatch(env, /FUZZFLEET_TOKEN|FUZZFLEET_SCRAPE_TOKEN/);
    assert.ok(!env.includes(TOKEN));
  } finally {
    e.cleanup();
  }
});

test("a target that prints the token and crashes: every view of its finding says [redacted]; the --token-file is kept", TEST, () => {
  const e = new ExploreDir();
  try {
    const file = join(e.dir, "campaign.token");
    writeFileSync(file, TOKEN + "\n", { mode: 0o600 });
    e.seed("crash", "crash\n");
    e.seed("ok", "ok\n");
    // It reads the secret the way any program of the same user could, prints it last, and dies.
    const target = e.script("leak.sh", `case "$(cat "$1")" in\n  crash) echo "dumping secrets" >&2; echo "token=$(cat ${JSON.stringify(file)})" >&2; kill -SEGV $$ ;;\nesac`);
    const r = e.run(["-j", "1", "--port", "0", "--bind", "127.0.0.1", "--token-file", file, "--max-idle", "0.5", "-t", "5"], [target, "@@"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.ok(r.stdout.includes(`token from ${file}`), r.stdout);
    assert.ok(r.stdout.includes(`--token-file ${file}`), "the banner tells workers which file to pass");
    assert.ok(!(r.stdout + r.stderr).includes(TOKEN));
    assert.equal(readFileSync(file, "utf8"), TOKEN + "\n", "the user's token file is neither replaced nor removed");

    const hash = sha256("crash\n");
    const s = e.stats();
    assert.deepEqual(
      s.findings.inputs.map((f) => [f.input_hash, f.kind, f.signal, f.stderr_tail, f.signature]),
      [[hash, "crash", 11, "dumping secrets\ntoken=[redacted]\n", "signal 11 | token=[redacted]"]],
    );
    const failures = cli(e, ["failures", "--corpus", e.corpus, "--json"]);
    assert.equal(failures.code, 0, failures.stderr);
    assert.ok(!failures.stdout.includes(TOKEN), failures.stdout);
    const data = JSON.parse(failures.stdout) as { signatures: { signature: string; findings: { input_hash: string; stderr_tail: string }[] }[] };
    assert.deepEqual(
      data.signatures.map((g) => [g.signature, g.findings.map((f) => [f.input_hash, f.stderr_tail])]),
      [["signal 11 | token=[redacted]", [[hash, "dumping secrets\ntoken=[redacted]\n"]]]],
    );
    const bundle = join(e.dir, "bundle.txt");
    const exported = cli(e, ["export", "--corpus", e.corpus, "-o", bundle]);
    assert.equal(exported.code, 0, exported.stderr);
    const text = readFileSync(bundle, "utf8");
    assert.ok(text.includes("token=[redacted]"), text);
    assert.ok(!text.includes(TOKEN), text);
  } finally {
    e.cleanup();
  }
});

test("explore --token-file naming no file is refused before anything runs, and nothing is created there", TEST, () => {
  const e = new ExploreDir();
  try {
    e.seed("one", "1\n");
    const ran = join(e.dir, "ran");
    const missing = join(e.dir, "no-such.token");
    const r = e.run(["-j", "1", "--port", "0", "--bind", "127.0.0.1", "--token-file", missing, "--max-idle", "0.5"], [e.script("t.sh", `touch ${JSON.stringify(ran)}`), "@@"]);
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.match(r.stderr, new RegExp(`fuzzfleet: no campaign token: the token file ${missing} does not exist \\(a file given with --token-file is read, never created\\); check the path, or give the token in FUZZFLEET_TOKEN`));
    assert.equal(existsSync(missing), false);
    assert.equal(existsSync(ran), false, "no target ran");
    assert.equal(existsSync(e.corpus), false, "no corpus, state or lock was created");
  } finally {
    e.cleanup();
  }
});
