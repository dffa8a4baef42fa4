// The terminal view of `run`: under a real pseudo-terminal (util-linux `script`) the live view
// is redrawn in place, shows the chunk in hand with its progress, and is gone from the screen
// once the final summary is printed. The screen is rebuilt from the bytes by a small terminal
// model (the cursor moves and erases log-update writes), so "in place" is what a user would see.
// Without a terminal, one status line every --status-every. The in-chunk finds counter reads
// failures/ safely.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { findsSoFar } from "../../src/sweep/views/chunk-progress.ts";
import { exitForSummary } from "../helpers/books.ts";
import { Campaign, CLI } from "../helpers/campaign.ts";

/** The screen a terminal shows after `bytes`: text, CR, LF, cursor up (CSI n A), column (CSI n G), erase line (CSI 2K / K). */
function screen(bytes: string): string[] {
  const lines: string[] = [""];
  let row = 0;
  let col = 0;
  const put = (ch: string) => {
    const line = lines[row]!.padEnd(col);
    lines[row] = line.slice(0, col) + ch + line.slice(col + 1);
    col++;
  };
  for (let i = 0; i < bytes.length; i++) {
    const ch = bytes[i]!;
    if (ch === "\x1b") {
      const m = /^\x1b\[(\??)(\d*)([A-Za-z])/.exec(bytes.slice(i, i + 16));
      assert.ok(m, `an escape sequence the model knows at byte ${i}: ${JSON.stringify(bytes.slice(i, i + 10))}`);
      i += m[0].length - 1;
      if (m[1] === "?") continue; // cursor visibility, synchronized output
      const n = m[2] === "" ? 1 : Number(m[2]);
      if (m[3] === "A") row = Math.max(0, row - n);
      else if (m[3] === "G") col = n - 1;
      else if (m[3] === "K") lines[row] = m[2] === "2" ? "" : lines[row]!.slice(0, col);
      else assert.fail(`unexpected CSI ${m[0]}`);
    } else if (ch === "\r") col = 0;
    else if (ch === "\n") {
      row++;
      if (row === lines.length) lines.push("");
    } else put(ch);
  }
  return lines.map((l) => l.trimEnd());
}

describe("run's terminal view", () => {
  const c = new Campaign({ lanes: { small: 'base_seed = 1\nargs = ["--size", "small"]' }, costMs: 3 });
  after(() => c.cleanup());

  test("on a terminal it redraws in place, shows in-chunk progress and leaves only the summary", () => {
    const cmd = `stty cols 160 rows 50; exec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} --config ${JSON.stringify(c.configPath)} run --for 8s`;
    const r = spawnSync("script", ["-qfec", cmd, "/dev/null"], { cwd: c.dir, env: { ...process.env, ...c.env }, encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 1, `exit 1: new failures\n${r.stdout}\n${r.stderr}`);
    const raw = r.stdout;
    const redraws = raw.split("\x1b[1A").length - 1;
    assert.ok(redraws >= 4, `the live view was redrawn in place (cursor up ${redraws} times)`);
    const progress = [...raw.matchAll(/chunk {4}\[[#.]{24}\] small [\d,]+\.\.[\d,]+ {2}(\d+)% of ~\d+s expected \(\d+s(?:, \d+s over)?\) {2}finds so far (\d+)/g)];
    assert.ok(progress.length >= 2, "the chunk in hand is drawn with its progress");
    assert.ok(progress.some((m) => Number(m[1]) > 0), "progress moves inside a chunk");
    const shown = screen(raw);
    assert.deepEqual(shown.filter((l) => /^ {2}(chunk|session) {2}/.test(l)), [], "no live line is left on the screen");
    const starts = shown.filter((l) => /^\[\d\d:\d\d:\d\d\] small +seeds 1\.\.100 \(n=100\)/.test(l));
    assert.equal(starts.length, 1, "the first chunk's line is on the screen once");
    const done = shown.findIndex((l) => /^session 1 done — /.test(l));
    assert.ok(done > 0, `the summary is on the screen\n${shown.join("\n")}`);
    assert.match(shown.slice(done).join("\n"), /lane cursors:\n {2}small +[\d,]+ covered/);
    assert.match(shown.filter((l) => l !== "").at(-1)!, /^\(saved as .*session-0001\.txt\)$/, "the summary ends the output");
  });

  test("without a terminal: plain lines, and a status line every --status-every", () => {
    const r = c.cli(["run", "--for", "7s", "--status-every", "2s"]);
    assert.equal(r.code, exitForSummary(r.stdout), r.stdout + r.stderr);
    assert.doesNotMatch(r.stdout, /\x1b/, "no escape codes in a log");
    const status = r.stdout.split("\n").filter((l) => /^\[\d\d:\d\d:\d\d\] status: /.test(l));
    assert.ok(status.length >= 2, `a status line every 2 s (got ${status.length})\n${r.stdout}`);
    assert.match(status.join("\n"), /status: (small [\d,]+\.\.[\d,]+ {2}\d+% of ~\d+s expected \(\d+s(?:, \d+s over)?\) {2}finds so far \d+|between chunks) \| [\d.]+ seeds\/s \| [\d,]+ seeds \| finds \d+ \(\d+ new\) \| \d+s left/);
    const off = c.cli(["run", "--for", "7s", "--status-every", "0"]);
    assert.doesNotMatch(off.stdout, /status: /, "0 turns the status line off");
  });

  test("--status-every with a bad value is refused, naming the value", () => {
    const r = c.cli(["run", "--for", "7s", "--status-every", "soon"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /soon/);
  });
});

describe("finds so far in a running chunk", () => {
  const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-progress-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("counts the failure entries that appeared; missing is 0, a symlink on the way is unknown", () => {
    const out = join(dir, "out");
    const results = join(out, "tmp", "chunk-7");
    mkdirSync(results, { recursive: true });
    assert.equal(findsSoFar(out, results), 0, "no failures/ yet");
    mkdirSync(join(results, "failures", "12"), { recursive: true });
    mkdirSync(join(results, "failures", "40"));
    assert.equal(findsSoFar(out, results), 2);
    assert.equal(findsSoFar(out, join(out, "tmp", "chunk-8")), 0, "a chunk that wrote nothing yet");
    const elsewhere = join(dir, "elsewhere");
    mkdirSync(join(elsewhere, "failures", "1"), { recursive: true });
    symlinkSync(elsewhere, join(out, "tmp", "chunk-9"));
    assert.equal(findsSoFar(out, join(out, "tmp", "chunk-9")), null, "never counted through a symlink");
    assert.equal(findsSoFar(out, dir), null, "nothing outside <out> is read");
  });
});
