// An explore campaign's token: a serving master keeps it in CORPUS_DIR/.fuzzfleet/fuzzfleet.token
// (0600, never through a symlink), its banner names the file and not the secret, workers and
// submasters find it there in whichever order they start, and it goes with the hidden state after
// a clean end. Real processes and sockets on 127.0.0.1.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { campaignStateLeft } from "./leftovers.ts";
import { CLI, freePort, waitFor } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";

const tokenFileOf = (e: ExploreDir) => join(e.corpus, ".fuzzfleet", "fuzzfleet.token");

function startWorker(e: ExploreDir, args: string[]) {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: e.dir, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  const done = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  return { child, output: () => out, done };
}

test("a worker started before an explore master waits for its token file, then runs tasks beside one started from the banner", { timeout: 180_000 }, async () => {
  const e = new ExploreDir();
  try {
    for (let i = 0; i < 8; i++) e.seed(`s${i}`, `seed ${i}\n`);
    const target = e.script("slow.sh", "sleep 0.3");
    const port = await freePort();
    const file = tokenFileOf(e);
    const early = startWorker(e, ["worker", "--master", `127.0.0.1:${port}`, "--token-file", file, "--wait", "2m"]);
    await waitFor("the early worker to wait", () => (early.output().includes(`no campaign token yet: waiting up to 2m00s for ${file}`) ? true : undefined));

    const master = e.start(["-j", "0", "--port", String(port), "--bind", "127.0.0.1", "--max-idle", "2", "-t", "5"], [target, "@@"]);
    const banner = await waitFor("the banner's worker command", () => /fuzzfleet (worker --master .*)$/m.exec(master.output())?.[1]);
    assert.equal(banner, `worker --master 127.0.0.1:${port} --token-file ${file} -j 1`);
    const token = readFileSync(file, "utf8").trim();
    assert.match(token, /^[0-9a-f]{32}$/);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const late = startWorker(e, banner.split(" "));
    const cmdline = readFileSync(`/proc/${late.child.pid}/cmdline`, "utf8");
    assert.ok(cmdline.includes(file) && !cmdline.includes(token), "the worker's command line names the file, not the secret");

    const [m, codeEarly, codeLate] = await Promise.all([master.done, early.done, late.done]);
    assert.equal(m.code, 0, master.output());
    assert.equal(codeEarly, 0, early.output());
    assert.equal(codeLate, 0, late.output());
    assert.ok(!master.output().includes(token), "the master never prints its secret");
    assert.equal(early.output().split("no campaign token yet").length - 1, 1, "the wait is announced once");
    assert.match(early.output(), /\(committed\)/, "the early worker ran tasks");
    assert.match(late.output(), /attached to 127\.0\.0\.1:\d+ as #\d+ \(explore session/);
    assert.equal(e.stats().observations, 8);
    assert.deepEqual(campaignStateLeft(e.corpus), [], "the token file went with the hidden state");
  } finally {
    e.cleanup();
  }
});

test("submasters started before and after their root find its token in the shared state directory; nobody prints it", { timeout: 180_000 }, async () => {
  const e = new ExploreDir();
  try {
    for (let i = 0; i < 6; i++) e.seed(`s${i}`, `seed ${i}\n`);
    const port = await freePort();
    const file = tokenFileOf(e);
    const same = ["-j", "1", "--max-idle", "1", "-t", "5", "--", "/bin/true"];
    const join_ = ["explore", "-i", e.seeds, "-o", e.corpus, "--join", `127.0.0.1:${port}`, ...same];
    const early = e.startWith(join_);
    await waitFor("the early submaster to wait", () => (early.output().includes(`no campaign token yet: waiting up to 1m00s for ${file} (the root master writes it`) ? true : undefined));

    const root = e.start(["--port", String(port), "--bind", "127.0.0.1", "--masters", "3", ...same.slice(0, -2)], ["/bin/true"]);
    await waitFor("the root to wait for masters", () => (root.output().includes("more master(s)") ? true : undefined));
    assert.match(root.output(), new RegExp(`waiting for 2 more master\\(s\\): fuzzfleet explore … --join <this host>:${port} \\(the token is read from ${file}\\)`));
    const token = readFileSync(file, "utf8").trim();
    const late = e.startWith(join_);

    const [r, a, b] = await Promise.all([root.done, early.done, late.done]);
    assert.equal(r.code, 0, root.output());
    assert.equal(a.code, 0, early.output());
    assert.equal(b.code, 0, late.output());
    assert.equal(e.stats().observations, 6);
    for (const m of [root, early, late]) assert.ok(!m.output().includes(token), "no master prints the secret");
    assert.doesNotMatch(late.output(), /no campaign token yet/, "the late submaster found the token at once");
    assert.deepEqual(campaignStateLeft(e.corpus), [], "no hidden state, token included, after the clean end");
  } finally {
    e.cleanup();
  }
});

test("an explore master refuses an empty FUZZFLEET_TOKEN and a short --token before serving, and so does a submaster", () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "a\n");
    const serve = ["--port", "0", "--bind", "127.0.0.1", "--max-idle", "1"];
    const empty = e.run(serve, ["/bin/true"], { FUZZFLEET_TOKEN: "" });
    assert.equal(empty.code, 2, empty.stdout + empty.stderr);
    assert.match(empty.stderr, /^fuzzfleet: FUZZFLEET_TOKEN is empty; a token is 8 to 256 visible ASCII characters/);
    const short = e.run([...serve, "--token", "1234567"], ["/bin/true"]);
    assert.equal(short.code, 2, short.stdout + short.stderr);
    assert.match(short.stderr, /^fuzzfleet: the token given with --token has 7 characters;/);
    const spaced = e.run([...serve, "--token", "two words here"], ["/bin/true"]);
    assert.equal(spaced.code, 2);
    assert.match(spaced.stderr, /holds a space/);
    for (const r of [empty, short, spaced]) assert.doesNotMatch(r.stdout, /listening on/);
    const sub = e.run(["--join", "127.0.0.1:1", "--token", "short"], ["/bin/true"]);
    assert.equal(sub.code, 2, sub.stdout + sub.stderr);
    assert.match(sub.stderr, /the token given with --token has 5 characters/);
    assert.ok(!existsSync(tokenFileOf(e)), "no token file was made instead");
  } finally {
    e.cleanup();
  }
});

test("a token from FUZZFLEET_TOKEN stays out of the banner and out of the corpus; one from --token is shown, since it is on the command line already", { timeout: 120_000 }, async () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "a\n");
    const secret = "env-secret-0123456789";
    const fromEnv = e.start(["-j", "1", "--port", "0", "--bind", "127.0.0.1", "--max-idle", "1"], ["/bin/true"], { FUZZFLEET_TOKEN: secret });
    assert.equal((await fromEnv.done).code, 0, fromEnv.output());
    assert.match(fromEnv.output(), /fuzzfleet worker --master 127\.0\.0\.1:\d+ -j 1 {2}\(with this master's FUZZFLEET_TOKEN in the environment\)\n/);
    assert.ok(!fromEnv.output().includes(secret));
    assert.deepEqual(campaignStateLeft(e.corpus), [], "no token file was written");

    const flag = "flag-secret-0123456789";
    const fromFlag = e.start(["-j", "1", "--port", "0", "--bind", "127.0.0.1", "--max-idle", "1", "--token", flag], ["/bin/true"]);
    assert.equal((await fromFlag.done).code, 0, fromFlag.output());
    assert.match(fromFlag.output(), new RegExp(`fuzzfleet worker --master 127\\.0\\.0\\.1:\\d+ --token ${flag} -j 1`));
  } finally {
    e.cleanup();
  }
});

test("an explore master refuses a token file planted as a symlink, and writes nothing through it", () => {
  const e = new ExploreDir();
  try {
    e.seed("a", "a\n");
    const state = join(e.corpus, ".fuzzfleet");
    mkdirSync(state, { recursive: true });
    const elsewhere = join(e.dir, "elsewhere.token");
    writeFileSync(elsewhere, "attacker-known-token\n", { mode: 0o600 });
    symlinkSync(elsewhere, tokenFileOf(e));
    const r = e.run(["--port", "0", "--bind", "127.0.0.1", "--max-idle", "1"], ["/bin/true"]);
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.equal(r.stderr, `fuzzfleet: ${tokenFileOf(e)} is a symbolic link; a token file is never followed through a link: replace it with the file itself\n`);
    assert.doesNotMatch(r.stdout, /listening on/);
    assert.ok(lstatSync(tokenFileOf(e)).isSymbolicLink(), "the link is left for the user to inspect");
    assert.equal(readFileSync(elsewhere, "utf8"), "attacker-known-token\n");
    assert.ok(!existsSync(join(state, "fuzzfleet.lock")), "the lock was released");
  } finally {
    e.cleanup();
  }
});
