// coordinate's terminal view under a real pseudo-terminal (util-linux `script`): with a worker
// attached, the coordinator redraws its workers and the chunks in flight in place every second,
// the chunk lines scroll above the view, and once the session ends the view is gone and the
// summary stands alone on the screen. Without a terminal the view is never drawn (no escape code).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, CLI, distributedTable, finished, freePort, start } from "../helpers/campaign.ts";
import { screen } from "./terminal-screen.ts";

const shell = (words: string[]) => words.map((w) => `'${w.replace(/'/g, `'\\''`)}'`).join(" ");

test("on a terminal the coordinator redraws its workers and chunks in flight in place, and leaves a clean summary", { timeout: 180_000 }, async () => {
  const c = new Campaign({ extra: distributedTable(), costMs: 2 });
  try {
    const port = await freePort();
    // The worker starts first and waits for the coordinator's token and port.
    const worker = start(c, ["worker", "--master", `127.0.0.1:${port}`, "-j", "1", "--wait", "60"]);
    const coordinate = [process.execPath, CLI, "--config", c.configPath, "coordinate", "--for", "6s", "--port", String(port), "--bind", "127.0.0.1", "--yes"];
    const child = spawn("script", ["-qfec", `stty cols 160 rows 40; exec ${shell(coordinate)}`, "/dev/null"], { cwd: c.dir, env: { ...process.env, ...c.env }, stdio: ["ignore", "pipe", "pipe"] });
    let raw = "";
    child.stdout!.setEncoding("utf8").on("data", (d: string) => (raw += d));
    const code = await new Promise<number | null>((resolve) => child.on("close", (n) => resolve(n)));
    const w = await finished(worker, 60_000, "the worker");
    assert.equal(w.code, 0, w.stdout + w.stderr);
    assert.equal(code, exitOwed(c, raw), raw);

    const redraws = raw.split("\x1b[1A").length - 1;
    assert.ok(redraws >= 3, `the view was redrawn in place (cursor up ${redraws} times)`);
    assert.match(raw, / {2}session {2}/, "the session line is in the view");
    assert.match(raw, /coordinator on 127\.0\.0\.1:\d+ — session 1, /, "the view names the coordinator and session");
    assert.match(raw, / {4}#\d+ +small +[\d,]+\.\.[\d,]+ +\d+s on \S+#\d+/, "a chunk in flight with its lane, range, age and worker");
    const shown = screen(raw).filter((l) => l.trim() !== "");
    assert.ok(shown.some((l) => /^session 1 (done|interrupted) — /.test(l)), `the summary is on the screen:\n${shown.join("\n")}`);
    assert.ok(shown.some((l) => /^ +chunk \d+ small [\d,]+\.\.[\d,]+: .* clean/.test(l)), `chunk lines scrolled above the view:\n${shown.join("\n")}`);
    assert.ok(!shown.some((l) => /^ {2}session {2}|in flight:|coordinator on /.test(l)), `the view is gone once the session ended:\n${shown.join("\n")}`);
  } finally {
    c.cleanup();
  }
});

test("without a terminal the coordinator draws no view: plain lines, a status line every --status-every, no escape code", { timeout: 180_000 }, async () => {
  const c = new Campaign({ extra: distributedTable(), costMs: 2 });
  try {
    const port = await freePort();
    const worker = start(c, ["worker", "--master", `127.0.0.1:${port}`, "-j", "1", "--wait", "60"]);
    // 7 s: after the short first chunk, a ~3 s chunk still starts, so the session outlives several
    // status intervals however soon the worker joins (with 4 s it could end after one second).
    const coord = start(c, ["coordinate", "--for", "7s", "--port", String(port), "--bind", "127.0.0.1", "--yes", "--status-every", "1s"]);
    const r = await finished(coord, 90_000, "the coordinator");
    await finished(worker, 60_000, "the worker");
    assert.equal(r.code, exitOwed(c, r.stdout), r.stdout + r.stderr);
    assert.doesNotMatch(r.stdout, /\x1b/);
    assert.match(r.stdout, /chunk \d+ small [\d,]+\.\.[\d,]+: /);
    assert.match(r.stdout, /^\[\d\d:\d\d:\d\d\] status: 1 worker\(s\), \d+ chunk\(s\) in flight \| [\d.]+ seeds\/s \| /m, "one status line a second names the workers and chunks in flight");
  } finally {
    c.cleanup();
  }
});
