// Every command that takes the campaign token on its command line also takes it from a file, and
// its help says that --token is visible to other local users in `ps`.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { CLI } from "../helpers/campaign.ts";

/** The help text of one option: its line and the wrapped lines below it, whitespace collapsed. */
function optionHelp(help: string, flag: string): string | null {
  const lines = help.split("\n");
  const at = lines.findIndex((l) => l.startsWith(`  ${flag}`));
  if (at < 0) return null;
  const block = [lines[at]!];
  for (const l of lines.slice(at + 1)) {
    if (/^ {0,2}\S/.test(l) || l.trim() === "") break;
    block.push(l);
  }
  return block.join(" ").replace(/\s+/g, " ").trim();
}

test("--token's help says `ps` shows it, and --token-file is there, on every command that takes a token", () => {
  for (const command of ["coordinate", "worker", "explore", "status", "failures", "ui"]) {
    const r = spawnSync(process.execPath, [CLI, command, "--help"], { encoding: "utf8", timeout: 30_000 });
    assert.equal(r.status, 0, r.stderr);
    const token = optionHelp(r.stdout, "--token <t>");
    assert.ok(token !== null, `${command} --help has no --token`);
    assert.match(token, /visible to other local users in `ps`: prefer --token-file or \$FUZZFLEET_TOKEN/, `${command}: ${token}`);
    assert.ok(optionHelp(r.stdout, "--token-file <path>") !== null, `${command} --help has no --token-file`);
  }
});
