// The command line as a user meets it: help, bad flags, the demo.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { EXIT } from "../../src/exit-codes.ts";
import { CLI } from "../helpers/campaign.ts";

const fuzzfleet = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", env: { ...process.env, ...env }, timeout: 120_000 });

test("--help explains the commands and the exit codes; every subcommand has help", () => {
  const r = fuzzfleet(["--help"]);
  assert.equal(r.status, 0);
  for (const cmd of ["init", "run", "status", "failures", "export", "resweep", "reset", "demo", "coordinate", "worker", "explore"]) {
    assert.match(r.stdout, new RegExp(`\\n  ${cmd} `));
    const sub = fuzzfleet([cmd, "--help"]);
    assert.equal(sub.status, 0, cmd);
    assert.match(sub.stdout, new RegExp(`Usage: fuzzfleet ${cmd}`));
  }
  assert.match(r.stdout, /Exit codes: 0 ok, 1 'run'\/'coordinate' recorded a newly distinct \(or reopened\) failure/);
  assert.match(r.stdout, /FUZZFLEET_SPAWN=node\|native +how generators and targets are started/);
});

test("an unknown flag, an unknown command and a bad number are usage errors (exit 2) that name the value", () => {
  const flag = fuzzfleet(["status", "--bogus"]);
  assert.equal(flag.status, 2);
  assert.match(flag.stderr, /unknown option '--bogus'/);
  const cmd = fuzzfleet(["sweep"]);
  assert.equal(cmd.status, 2);
  assert.match(cmd.stderr, /unknown command 'sweep'/);
  const num = fuzzfleet(["failures", "--lines", "many"]);
  assert.equal(num.status, 2);
  assert.match(num.stderr, /'many' is invalid/);
  const state = fuzzfleet(["failures", "--state", "closed"]);
  assert.equal(state.status, 2);
  assert.match(state.stderr, /Allowed choices are open, fixed, stale, all/);
});

test("a FUZZFLEET_SPAWN other than native or node is a usage error (exit 2) that names the value", () => {
  const r = fuzzfleet(["status"], { FUZZFLEET_SPAWN: "fork" });
  assert.equal(r.status, EXIT.usage);
  assert.match(r.stderr, /FUZZFLEET_SPAWN must be 'native' or 'node' \(got 'fork'\); unset it to let fuzzfleet choose/);
  const ok = fuzzfleet(["--version"], { FUZZFLEET_SPAWN: "node" });
  assert.equal(ok.status, 0, ok.stderr);
});

test("demo runs a real campaign in a fresh directory and ends with status and failures", () => {
  const root = mkdtempSync(join(tmpdir(), "fuzzfleet-demo-test-"));
  try {
    const dir = join(root, "demo");
    // A short budget for the demo's 6 s chunks (the deadline floor is 5 s).
    const r = fuzzfleet(["demo", "--for", "6s", "--dir", dir], { PLANTED_COST_MS: "0.2" });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /session 1 done/);
    assert.match(r.stdout, /\$ fuzzfleet --config .* status\n generation 1|\$ fuzzfleet --config .* status\ngeneration 1/);
    assert.match(r.stdout, /\$ fuzzfleet --config .* failures\n#\d+\s+\S+/);
    assert.ok(existsSync(join(dir, "fuzzfleet.db")));
    const again = fuzzfleet(["demo", "--dir", dir]);
    assert.equal(again.status, 3, "a used directory is refused");
    assert.match(again.stderr, /is not empty/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("run and coordinate --help give their exit codes from the one table: 4 when every lane got disabled, 70 lifecycle incomplete", () => {
  const run = fuzzfleet(["run", "--help"]);
  assert.equal(run.status, 0);
  assert.match(run.stdout, /4 runtime error, or every lane got disabled/);
  assert.match(run.stdout, /--for must be longer than that/);
  const coordinate = fuzzfleet(["coordinate", "--help"]);
  assert.equal(coordinate.status, 0);
  assert.match(coordinate.stdout, new RegExp(`\\n${EXIT.lifecycle} lifecycle incomplete \\(a worker did not acknowledge the stop`));
  assert.equal(EXIT.lifecycle, 70);
});

/** Every option entry of a help text, its wrapped lines joined. */
function optionEntries(help: string): string[] {
  const entries: string[] = [];
  for (const line of help.split("\n")) {
    if (/^  -/.test(line)) entries.push(line.trim());
    else if (/^ {4,}\S/.test(line) && entries.length > 0) entries[entries.length - 1] += " " + line.trim();
    else if (line.trim() === "" || /^\S/.test(line)) entries.push("");
  }
  return entries.filter((e) => e !== "");
}

test("no option's help gives its default twice (our words and commander's)", () => {
  const top = fuzzfleet(["--help"]).stdout;
  const listed = top.slice(top.indexOf("\nCommands:\n"), top.indexOf("\n\n", top.indexOf("\nCommands:\n") + 1));
  const commands = [...listed.matchAll(/^ {2}([a-z]+) /gm)].map((m) => m[1]).filter((c) => c !== "help");
  assert.ok(commands.includes("resweep") && commands.includes("worker") && commands.includes("launch"), commands.join(" "));
  const twice: string[] = [];
  for (const cmd of ["", ...commands]) {
    const help = fuzzfleet(cmd === "" ? ["--help"] : [cmd, "--help"]).stdout;
    for (const entry of optionEntries(help)) if ((entry.match(/\(default/g) ?? []).length > 1) twice.push(`${cmd || "fuzzfleet"}: ${entry}`);
  }
  assert.deepEqual(twice, []);
  assert.match(fuzzfleet(["resweep", "--help"]).stdout.replace(/\s+/g, " "), /-j, --jobs <n> passed to the check command as \{jobs\} \(default: this machine's cores\)/);
});

test("the top-level help lists every exit code of the one table", () => {
  const help = fuzzfleet(["--help"]).stdout;
  const codes = help.slice(help.indexOf("Exit codes:")).replace(/\s+/g, " ");
  for (const [name, code] of Object.entries(EXIT)) assert.match(codes, new RegExp(`[:,] ${code} `), `${name} (${code}) is missing from: ${codes}`);
  assert.match(codes, /5 explore's wall budget ran out, 6 explore interrupted \(both keep the state for --resume\)/);
});

test("failures and export in a directory with no campaign say there is none and how to start one (exit 2), as status does", () => {
  const empty = mkdtempSync(join(tmpdir(), "fuzzfleet-empty-"));
  try {
    for (const args of [["failures"], ["failures", "--json"], ["export"]]) {
      const r = spawnSync(process.execPath, [CLI, ...args], { cwd: empty, encoding: "utf8" });
      assert.equal(r.status, EXIT.usage, `${args.join(" ")}: ${r.stdout}${r.stderr}`);
      assert.equal(r.stdout, "", args.join(" "));
      assert.match(r.stderr, /^fuzzfleet: no campaign here: neither .*fuzzfleet\.toml nor .*fuzzfleet\.db exists\. 'fuzzfleet init' writes a config/, args.join(" "));
    }
    assert.deepEqual(readdirSync(empty), [], "nothing was created");
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});
