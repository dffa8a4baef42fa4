// explore's terminal view under a real pseudo-terminal (util-linux `script`): a lone master over
// the maze redraws its view in place, the view moves (more tasks done from one frame to a later
// one), the log lines scroll above it, and once the campaign ends the view is gone and only the
// log and the closing line are left. Without a terminal: one status line a second and no escape
// code. The driver is test/report/explore-console-driver.ts.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ROOT } from "../helpers/campaign.ts";
import { screen } from "./terminal-screen.ts";

const DRIVER = join(ROOT, "test/report/explore-console-driver.ts");
const scratch = mkdtempSync(join(tmpdir(), "fuzzfleet-explore-console-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
const env = { ...process.env, MAZE_DEPTH: "5" };

test("on a terminal the view is redrawn in place, moves, and leaves a clean end", () => {
  const dir = mkdtempSync(join(scratch, "tty-"));
  const cmd = `stty cols 160 rows 50; exec ${JSON.stringify(process.execPath)} --import tsx ${JSON.stringify(DRIVER)} ${JSON.stringify(dir)}`;
  const r = spawnSync("script", ["-qfec", cmd, "/dev/null"], { cwd: ROOT, env, encoding: "utf8", timeout: 120_000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  const raw = r.stdout;
  const redraws = raw.split("\x1b[1A").length - 1;
  assert.ok(redraws >= 9 * 2, `the view was redrawn in place (cursor up ${redraws} times)`);
  const done = [...raw.matchAll(/ {2}frontier {2}pending \d+ │ running \d+ │ leased \d+ │ committing \d+ │ expired \d+ │ done (\d+)/g)].map((m) => Number(m[1]));
  assert.ok(done.length >= 2, "the frontier was drawn in several frames");
  assert.ok(done.at(-1)! > done[0]!, `the view moved: done ${done[0]} then ${done.at(-1)}`);
  assert.match(raw, / {2}idle {6}ends in \d+\.\ds of 1\.5s unless work appears/, "the idle window counted down");
  const shown = screen(raw).filter((l) => l !== "");
  assert.match(shown.at(-1)!, /^=== done: \d+ executions, ended idle$/);
  assert.ok(shown.some((l) => /^\[explore\] finding: [0-9a-f]{12} crash \(signal 6\)/.test(l)), `the log lines scrolled above the view:\n${shown.join("\n")}`);
  assert.ok(!shown.some((l) => /frontier|fuzzfleet explore ──/.test(l)), `the view is gone once the campaign ended:\n${shown.join("\n")}`);
});

test("without a terminal: a status line every second and no escape code", () => {
  const dir = mkdtempSync(join(scratch, "pipe-"));
  const r = spawnSync(process.execPath, ["--import", "tsx", DRIVER, dir], { cwd: ROOT, env, encoding: "utf8", timeout: 120_000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.doesNotMatch(r.stdout, /\x1b/);
  const status = r.stdout.split("\n").filter((l) => /^\[\d\d:\d\d:\d\d\] status: done \d+, pending \d+, running \d+ \| [\d.–]+ exec\/s \| /.test(l));
  assert.ok(status.length >= 2, `status lines:\n${r.stdout}`);
  assert.match(r.stdout, /=== done: \d+ executions, ended idle\n$/);
});
