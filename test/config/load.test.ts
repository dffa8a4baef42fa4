import { after, test } from "node:test";
import assert from "node:assert/strict";
import { availableParallelism } from "node:os";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { DEFAULT_CONFIG_NAME, loadConfig, laneIdentity, type Config, type LaneConfig } from "../../src/config/load.ts";
import { fillPlaceholders, placeholdersIn } from "../../src/config/placeholders.ts";
import { ConfigError } from "../../src/errors.ts";

const scratchDirs: string[] = [];
function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-config-"));
  scratchDirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
});

const GENERATOR = `[generator]
command = ["node", "gen.mjs", "--from", "{seed_from}", "-n", "{count}", "--out", "{out}"]
identity = ["gen.mjs"]
`;

/** Writes `text` as fuzzfleet.toml in a fresh directory and returns the file's path. */
function writeConfig(text: string, subdir = ""): string {
  const dir = join(scratchDir(), subdir);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, DEFAULT_CONFIG_NAME);
  writeFileSync(file, text);
  return file;
}

/** Loads `text` and returns the ConfigError message, with the file path replaced by "F". */
function configErrorOf(text: string): string {
  const file = writeConfig(text);
  try {
    loadConfig(file);
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    assert.equal(err.code, "config");
    return err.message.split(file).join("F");
  }
  assert.fail("loadConfig accepted an invalid config");
}

test("a minimal config gets every default, resolved paths and plain objects", () => {
  const file = writeConfig(`${GENERATOR}\n[lanes.only]\n`);
  const dir = join(file, "..");
  const expected: Config = {
    path: file,
    dir,
    defaults: { jobs: availableParallelism(), nice: 19, idleIo: true, chunkSeconds: 600, bootstrapSeeds: 40, maxShrinks: 20, hardTimeoutFloor: 180 },
    generator: {
      command: ["node", "gen.mjs", "--from", "{seed_from}", "-n", "{count}", "--out", "{out}"],
      identity: [join(dir, "gen.mjs")],
      results: "{out}",
      check: null,
    },
    app: null,
    lanes: [{ name: "only", baseSeed: 1, weight: 1, enabled: true, jobs: availableParallelism(), args: [] }],
    distributed: { port: 9999, bind: "", leaseSeconds: 120, drainGraceMinutes: 35, stopGraceSeconds: 15, transfer: { maxFiles: 10_000, maxBytes: 2 * 2 ** 30, maxFileBytes: 512 * 2 ** 20 } },
    store: { journal: "auto", giveUpSeconds: 600 },
  };
  // deepStrictEqual also compares prototypes: the TOML parser's null-prototype objects must not leak.
  assert.deepStrictEqual(loadConfig(file), expected);
});

test("every key given explicitly is carried into the resolved config", () => {
  const file = writeConfig(`
[defaults]
jobs = 3
nice = 0
idle_io = false
chunk_minutes = 1.5
bootstrap_seeds = 7
max_shrinks = 0
hard_timeout_floor = 30.5

[generator]
command = ["./gen", "{seed_from}..{seed_to}", "{out}", "-j{jobs}", "--shrinks={max_shrinks}"]
identity = ["gen", "lib/a.py"]
results = "{out}/run-000000"
check = ["./gen", "--seeds", "{seeds}", "-j", "{jobs}"]

[app]
path = "../app/bin/app"
sources = ["../app/src/**/*.gren", "/abs/*.c"]

[lanes.deep]
base_seed = 10000000
weight = 2.5
enabled = false
jobs = 12
args = ["--max-depth", "8", "--tag={count}"]

[distributed]
port = 0
bind = "127.0.0.1"
lease_seconds = 7.5
drain_grace_minutes = 0
stop_grace_seconds = 4
transfer_max_files = 50
transfer_max_mib = 1.5
transfer_max_file_mib = 0.5

[store]
journal = "truncate"
give_up_minutes = 0.5
`);
  const dir = join(file, "..");
  const config = loadConfig(file);
  assert.deepStrictEqual(config.defaults, {
    jobs: 3, nice: 0, idleIo: false, chunkSeconds: 90, bootstrapSeeds: 7, maxShrinks: 0, hardTimeoutFloor: 30.5,
  });
  assert.deepStrictEqual(config.generator, {
    command: ["./gen", "{seed_from}..{seed_to}", "{out}", "-j{jobs}", "--shrinks={max_shrinks}"],
    identity: [join(dir, "gen"), join(dir, "lib/a.py")],
    results: "{out}/run-000000",
    check: ["./gen", "--seeds", "{seeds}", "-j", "{jobs}"],
  });
  assert.deepStrictEqual(config.app, {
    path: join(dir, "../app/bin/app"),
    sources: [join(dir, "../app/src/**/*.gren"), "/abs/*.c"],
  });
  assert.deepStrictEqual(config.lanes, [
    { name: "deep", baseSeed: 10000000, weight: 2.5, enabled: false, jobs: 12, args: ["--max-depth", "8", "--tag={count}"] },
  ]);
  assert.deepStrictEqual(config.distributed, {
    port: 0,
    bind: "127.0.0.1",
    leaseSeconds: 7.5,
    drainGraceMinutes: 0,
    stopGraceSeconds: 4,
    transfer: { maxFiles: 50, maxBytes: 1.5 * 2 ** 20, maxFileBytes: 2 ** 19 },
  });
  assert.deepStrictEqual(config.store, { journal: "truncate", giveUpSeconds: 30 });
});

test("chunk_minutes becomes whole seconds, never less than one", () => {
  const secondsFor = (minutes: string) =>
    loadConfig(writeConfig(`[defaults]\nchunk_minutes = ${minutes}\n${GENERATOR}[lanes.a]\n`)).defaults.chunkSeconds;
  assert.equal(secondsFor("10"), 600);
  assert.equal(secondsFor("0.51"), 31);
  assert.equal(secondsFor("0.001"), 1);
});

test("a lane without jobs takes defaults.jobs", () => {
  const config = loadConfig(writeConfig(`[defaults]\njobs = 4\n${GENERATOR}[lanes.a]\n[lanes.b]\njobs = 2\n`));
  assert.deepStrictEqual(
    config.lanes.map((l) => [l.name, l.jobs]),
    [["a", 4], ["b", 2]],
  );
});

test("relative identity and app paths resolve against the config's directory, not the cwd", () => {
  const file = writeConfig(
    `${GENERATOR.replace('identity = ["gen.mjs"]', 'identity = ["gen.mjs", "../shared/lib.mjs", "/etc/hostname"]')}
[app]
path = "build/app"
sources = ["src/**/*.c", "../vendor/*.h"]
[lanes.a]
`,
    "project/campaign",
  );
  const dir = join(file, "..");
  const project = join(dir, "..");
  // Load through a path relative to the cwd, which is not the config's directory.
  assert.notEqual(process.cwd(), dir);
  const config = loadConfig(relative(process.cwd(), file));
  assert.equal(config.path, file);
  assert.equal(config.dir, dir);
  assert.deepStrictEqual(config.generator.identity, [join(dir, "gen.mjs"), join(project, "shared/lib.mjs"), "/etc/hostname"]);
  assert.deepStrictEqual(config.app, { path: join(dir, "build/app"), sources: [join(dir, "src/**/*.c"), join(project, "vendor/*.h")] });
  // The command is an argv template run with cwd = the config dir: it is left as written.
  assert.equal(config.generator.command[1], "gen.mjs");
});

test("lanes keep file order, including names that look like integers", () => {
  const config = loadConfig(
    writeConfig(`${GENERATOR}
[lanes.zeta]
[lanes.10]
weight = 3
[lanes.alpha]
[lanes.2]
[lanes."x.y"]
`),
  );
  assert.deepStrictEqual(
    config.lanes.map((l) => l.name),
    ["zeta", "10", "alpha", "2", "x.y"],
  );
  assert.equal(config.lanes[1].weight, 3);
});

test("lanes defined with dotted keys or inline tables keep file order too", () => {
  const config = loadConfig(
    writeConfig(`${GENERATOR}
[lanes]
b = { weight = 2 }
a.weight = 3
`),
  );
  assert.deepStrictEqual(
    config.lanes.map((l) => [l.name, l.weight]),
    [["b", 2], ["a", 3]],
  );
});

test("a missing file names the path and the init command", () => {
  const missing = join(scratchDir(), "nope.toml");
  assert.throws(() => loadConfig(missing), (err: unknown) => {
    assert.ok(err instanceof ConfigError);
    assert.equal(err.message, `no config at ${missing} — create one with 'fuzzfleet init'`);
    return true;
  });
});

test("a directory in place of the file is a config error", () => {
  const dir = scratchDir();
  assert.throws(() => loadConfig(dir), (err: unknown) => err instanceof ConfigError && err.message === `${dir} is a directory, not a config file`);
});

test("a TOML syntax error reports path:line:col and the parser's message", () => {
  const message = configErrorOf(`${GENERATOR}\n[lanes.a]\nweight = = 2\n`);
  const [first, ...context] = message.split("\n");
  assert.equal(first, "F:6:10: invalid TOML: invalid value");
  assert.ok(context.some((l) => l.includes("weight = = 2")), "the offending line is quoted");
});

test("a duplicate key is a TOML error at its line", () => {
  const first = configErrorOf(`${GENERATOR}[lanes.a]\nweight = 1\nweight = 2\n`).split("\n")[0];
  assert.match(first, /^F:6:\d+: invalid TOML: /);
});

test("an unknown key in [defaults] is reported at its line with the known keys and the one it likely meant", () => {
  const message = configErrorOf(`# campaign\n[defaults]\njbos = 3\n${GENERATOR}[lanes.a]\n`);
  assert.equal(
    message,
    "F:3: defaults.jbos: unknown key (known: jobs, nice, idle_io, chunk_minutes, bootstrap_seeds, max_shrinks, hard_timeout_floor); did you mean jobs?",
  );
  const far = configErrorOf(`[defaults]\nthreads = 3\n${GENERATOR}[lanes.a]\n`);
  assert.equal(far, "F:2: defaults.threads: unknown key (known: jobs, nice, idle_io, chunk_minutes, bootstrap_seeds, max_shrinks, hard_timeout_floor)", "no guess when nothing is close");
});

test("a misspelt table is an unknown top-level key at its header, with the headers it likely meant", () => {
  const message = configErrorOf(`${GENERATOR}[lanes.a]\n\n[lane.b]\nweight = 1\n`);
  assert.equal(message, "F:6: lane: unknown key (known: defaults, generator, app, lanes, distributed, store, minimize); did you mean [lanes.b]?");
  const two = configErrorOf(`${GENERATOR}\n[lane.small]\nweight = 1\n[lane."big one"]\n`).split("\n")[0];
  assert.equal(two, 'F:5: lane: unknown key (known: defaults, generator, app, lanes, distributed, store, minimize); did you mean [lanes.small], [lanes."big one"]?');
  const key = configErrorOf(`${GENERATOR}[lanes.a]\nwieght = 1\n`);
  assert.equal(key, "F:5: lanes.a.wieght: unknown key (known: base_seed, weight, enabled, jobs, args); did you mean weight?");
});

test("an unclosed quote is reported as one, at the quote, not as a control character at the line's end", () => {
  const message = configErrorOf(`${GENERATOR}[lanes.a]\nargs = ["--size", "small]   # the small ones\nweight = 1\n`);
  assert.equal(
    message,
    `F:5:19: invalid TOML: unclosed string: the " at column 19 has no closing " on its line (only """ and ''' strings span lines)\n` +
      `5:  args = ["--size", "small]   # the small ones\n` +
      `    ${" ".repeat(18)}^`,
  );
  const literal = configErrorOf(`${GENERATOR}[lanes.a]\nargs = ['--size']\nbase_seed = 'x\n`).split("\n")[0];
  assert.equal(literal, `F:6:13: invalid TOML: unclosed string: the ' at column 13 has no closing ' on its line (only """ and ''' strings span lines)`);
  // A control character inside a closed string is still reported as what it is.
  const control = configErrorOf(`${GENERATOR}[lanes.a]\nargs = ["a\u0001b"]\n`).split("\n")[0];
  assert.match(control, /^F:5:\d+: invalid TOML: control characters are not allowed in strings$/);
});

test("a wrong type in a lane names the dotted key, the expectation and the value", () => {
  const message = configErrorOf(`${GENERATOR}
[lanes.small]
weight = 1

[lanes.deep]
base_seed = 10
weight = "two"
`);
  assert.equal(message, 'F:10: lanes.deep.weight: expected a number >= 0 (got string "two")');
});

test("a lane defined inline is located at its inline table", () => {
  const message = configErrorOf(`${GENERATOR}[lanes]\nok = {}\ndeep = { weight = "two" }\n`);
  assert.equal(message, 'F:6: lanes.deep.weight: expected a number >= 0 (got string "two")');
});

test("range and integer limits are enforced with the accepted range in the message", () => {
  const message = configErrorOf(`[defaults]
jobs = 0
nice = 20
chunk_minutes = 0
bootstrap_seeds = 2.5
max_shrinks = -1
hard_timeout_floor = -3
idle_io = "yes"
${GENERATOR}
[lanes.a]
base_seed = -1
jobs = 1025
[lanes.b]
base_seed = 1.5
enabled = 1
args = "--x"
[distributed]
port = 70000
lease_seconds = 0
drain_grace_minutes = -1
bind = 0
`);
  assert.deepStrictEqual(message.split("\n"), [
    "F:2: defaults.jobs: expected an integer from 1 to 1024 (got 0)",
    "F:3: defaults.nice: expected an integer from 0 to 19 (got 20)",
    "F:4: defaults.chunk_minutes: expected a number > 0 (got 0)",
    "F:5: defaults.bootstrap_seeds: expected an integer >= 1 (got 2.5)",
    "F:6: defaults.max_shrinks: expected an integer >= 0 (got -1)",
    "F:7: defaults.hard_timeout_floor: expected a number > 0 (got -3)",
    'F:8: defaults.idle_io: expected true or false (got string "yes")',
    "F:14: lanes.a.base_seed: expected a seed from 0 to 9007199254740990 (2^53 - 2, the last seed counted exactly); lower it (got -1)",
    "F:15: lanes.a.jobs: expected an integer from 1 to 1024 (got 1025)",
    "F:17: lanes.b.base_seed: expected a seed from 0 to 9007199254740990 (2^53 - 2, the last seed counted exactly); lower it (got 1.5)",
    "F:18: lanes.b.enabled: expected true or false (got 1)",
    'F:19: lanes.b.args: expected an array of strings (got string "--x")',
    "F:21: distributed.port: expected an integer from 0 to 65535 (got 70000)",
    "F:22: distributed.lease_seconds: expected a number > 0 (got 0)",
    "F:23: distributed.drain_grace_minutes: expected a number >= 0 (got -1)",
    `F:24: distributed.bind: expected a host name or address ("" = this host's name) (got 0)`,
  ]);
});

test("no [lanes.NAME] table is an error that explains what a lane is", () => {
  assert.equal(
    configErrorOf(GENERATOR),
    "F defines no [lanes.NAME] tables — a lane is a seed range with its own cursor; see 'fuzzfleet init'",
  );
  assert.equal(
    configErrorOf(`${GENERATOR}[lanes]\n`),
    "F defines no [lanes.NAME] tables — a lane is a seed range with its own cursor; see 'fuzzfleet init'",
  );
});

test("bad lane names are reported at their headers, and their keys are still checked", () => {
  const message = configErrorOf(`${GENERATOR}
[lanes."has space"]
[lanes._hidden]
weight = "x"
[lanes."ok-1.2_x"]
[lanes.${"a".repeat(65)}]
`);
  const rule = "bad lane name: use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit";
  assert.deepStrictEqual(message.split("\n"), [
    `F:5: lanes."has space": ${rule}`,
    `F:6: lanes._hidden: ${rule}`,
    'F:7: lanes._hidden.weight: expected a number >= 0 (got string "x")',
    `F:9: lanes.${"a".repeat(65)}: ${rule}`,
  ]);
});

test("a lane name of exactly 64 characters is accepted", () => {
  const name = `A${"b".repeat(63)}`;
  assert.equal(loadConfig(writeConfig(`${GENERATOR}[lanes.${name}]\n`)).lanes[0].name, name);
});

test("an unknown placeholder is named together with the known ones", () => {
  const message = configErrorOf(`[generator]
command = ["gen", "--from", "{seed_from}", "-n", "{count}", "--out", "{out}",
           "--x={cnt}"]
identity = ["gen"]
results = "{out}/{run}"
check = ["gen", "{seeds}", "{out}"]
[lanes.a]
args = ["--depth={depth}"]
`);
  const chunk = "{seed_from}, {seed_to}, {count}, {jobs}, {out}, {max_shrinks}";
  assert.deepStrictEqual(message.split("\n"), [
    `F:2: generator.command[7]: unknown placeholder {cnt} (known: ${chunk}) (got string "--x={cnt}")`,
    'F:5: generator.results: unknown placeholder {run} (known: {out}) (got string "{out}/{run}")',
    'F:6: generator.check[2]: unknown placeholder {out} (known: {seeds}, {jobs}) (got string "{out}")',
    `F:8: lanes.a.args[0]: unknown placeholder {depth} (known: ${chunk}) (got string "--depth={depth}")`,
  ]);
});

test("literal braces that are not {identifier} are not placeholders", () => {
  const config = loadConfig(
    writeConfig(`${GENERATOR.replace('"{out}"]', '"{out}", "{}", "{\\"a\\": 1}", "{1x}"]')}[lanes.a]\n`),
  );
  assert.deepStrictEqual(config.generator.command.slice(-3), ["{}", '{"a": 1}', "{1x}"]);
});

test("the command must say where a chunk starts, how long it is and where it writes", () => {
  const message = configErrorOf(`[generator]\ncommand = ["gen"]\nidentity = ["gen"]\n[lanes.a]\n`);
  assert.equal(
    message,
    "F:2: generator.command: never uses {seed_from} (the first seed of the chunk), " +
      "{count} or {seed_to} (how many seeds the chunk holds), {out} (the chunk's output dir)",
  );
});

test("a lane's args may supply the chunk placeholders; a lane that does not is named", () => {
  const base = `[generator]\ncommand = ["gen", "--out", "{out}"]\nidentity = ["gen"]\n`;
  const ok = loadConfig(writeConfig(`${base}[lanes.a]\nargs = ["{seed_from}", "{seed_to}"]\n`));
  assert.deepStrictEqual(ok.lanes[0].args, ["{seed_from}", "{seed_to}"]);
  const message = configErrorOf(`${base}[lanes.a]\nargs = ["{seed_from}", "{seed_to}"]\n[lanes.b]\nargs = ["{count}"]\n`);
  assert.equal(
    message,
    "F:7: lanes.b.args: generator.command with this lane's args never uses {seed_from} (the first seed of the chunk)",
  );
});

test("check must use {seeds}; results must use {out}", () => {
  const message = configErrorOf(`${GENERATOR}results = "failures"\ncheck = ["gen", "--json"]\n[lanes.a]\n`);
  assert.deepStrictEqual(message.split("\n"), [
    `F:4: generator.results: must lie inside the chunk's output dir, so it must use {out} (for example "{out}" or "{out}/run-000000") (got string "failures")`,
    "F:5: generator.check: must use {seeds} (the comma-separated list of seeds to re-check)",
  ]);
});

test("a base_seed past the last exact seed (2^53 - 2) is refused, naming the lane, the value and the limit", () => {
  const message = configErrorOf(`${GENERATOR}
[lanes.deep]
base_seed = 9007199254740991
[lanes.edge]
base_seed = 9007199254740990
`);
  assert.deepStrictEqual(message.split("\n"), [
    "F:6: lanes.deep.base_seed: expected a seed from 0 to 9007199254740990 (2^53 - 2, the last seed counted exactly); lower it (got 9007199254740991)",
  ]);
});

test("non-finite numbers, dates and empty check are each reported once, in TOML spelling", () => {
  const message = configErrorOf(`[defaults]
jobs = inf
chunk_minutes = nan
${GENERATOR}check = []
[lanes.a]
base_seed = 1979-05-27
`);
  assert.deepStrictEqual(message.split("\n"), [
    "F:2: defaults.jobs: expected an integer from 1 to 1024 (got inf)",
    "F:3: defaults.chunk_minutes: expected a number > 0 (got nan)",
    "F:7: generator.check: expected a non-empty array of strings (an argv template) (got array [])",
    "F:9: lanes.a.base_seed: expected a seed from 0 to 9007199254740990 (2^53 - 2, the last seed counted exactly); lower it (got date 1979-05-27)",
  ]);
});

test("a missing [generator] table or required key is reported at the best line", () => {
  assert.deepStrictEqual(configErrorOf(`[lanes.a]\n`).split("\n"), [
    "F:1: generator: expected a [generator] table with command and identity (got nothing)",
  ]);
  assert.deepStrictEqual(configErrorOf(`[lanes.a]\n\n[generator]\nidentity = []\ncommand = []\n`).split("\n"), [
    "F:4: generator.identity: expected a non-empty array of file paths (got array [])",
    "F:5: generator.command: expected a non-empty array of strings (an argv template) (got array [])",
  ]);
  assert.deepStrictEqual(configErrorOf(`[lanes.a]\n[generator]\ncommand = ["", "{seed_from}", "{count}", "{out}"]\n`).split("\n"), [
    "F:2: generator.identity: expected a non-empty array of file paths (got nothing)",
    'F:3: generator.command[0]: expected a program name (got string "")',
  ]);
});

test("an [app] table requires path", () => {
  const message = configErrorOf(`${GENERATOR}[app]\nsources = ["*.c"]\n[lanes.a]\n`);
  assert.equal(message, "F:4: app.path: expected the path of the system under test (got nothing)");
});

test("all problems are reported together, one per line, in line order", () => {
  const message = configErrorOf(`[defaults]
jbos = 3
jobs = "six"
[generator]
command = ["gen", "{seed_from}", "{count}", "{out}", "{bogus}"]
identity = ["gen"]
[lanes.deep]
weight = "two"
colour = "red"
[distributed]
port = -1
`);
  assert.deepStrictEqual(message.split("\n"), [
    "F:2: defaults.jbos: unknown key (known: jobs, nice, idle_io, chunk_minutes, bootstrap_seeds, max_shrinks, hard_timeout_floor); did you mean jobs?",
    'F:3: defaults.jobs: expected an integer from 1 to 1024 (got string "six")',
    'F:5: generator.command[4]: unknown placeholder {bogus} (known: {seed_from}, {seed_to}, {count}, {jobs}, {out}, {max_shrinks}) (got string "{bogus}")',
    'F:8: lanes.deep.weight: expected a number >= 0 (got string "two")',
    "F:9: lanes.deep.colour: unknown key (known: base_seed, weight, enabled, jobs, args)",
    "F:11: distributed.port: expected an integer from 0 to 65535 (got -1)",
  ]);
});

test("a schema error inside a multi-line string does not confuse the locator", () => {
  const message = configErrorOf(`${GENERATOR}[lanes.a]\nnote = """\nweight = 3\n"""\nweight = "x"\n`);
  assert.deepStrictEqual(message.split("\n"), [
    "F:5: lanes.a.note: unknown key (known: base_seed, weight, enabled, jobs, args)",
    'F:8: lanes.a.weight: expected a number >= 0 (got string "x")',
  ]);
});

test("__proto__ keys are refused by the parser", () => {
  assert.match(configErrorOf(`${GENERATOR}[lanes.__proto__]\n`), /^F:4:\d+: invalid TOML: /);
});

function lane(overrides: Partial<LaneConfig>): LaneConfig {
  return { name: "deep", baseSeed: 10, weight: 1, enabled: true, jobs: 6, args: ["--a", "1"], ...overrides };
}

test("laneIdentity is canonical JSON of args and base_seed", () => {
  assert.equal(laneIdentity(lane({})), '{"args":["--a","1"],"base_seed":10}');
});

test("laneIdentity changes with args or base_seed but not with weight, enabled, jobs or name", () => {
  const id = laneIdentity(lane({}));
  assert.notEqual(laneIdentity(lane({ args: ["--a", "2"] })), id);
  assert.notEqual(laneIdentity(lane({ args: ["1", "--a"] })), id);
  assert.notEqual(laneIdentity(lane({ baseSeed: 11 })), id);
  assert.equal(laneIdentity(lane({ weight: 7, enabled: false, jobs: 1 })), id);
});

test("laneIdentity does not depend on the order of keys in the file", () => {
  const a = loadConfig(writeConfig(`${GENERATOR}[lanes.x]\nbase_seed = 5\nweight = 2\nargs = ["-v"]\n`));
  const b = loadConfig(writeConfig(`${GENERATOR}[lanes.x]\nargs = ["-v"]\nenabled = false\nbase_seed = 5\n`));
  assert.equal(laneIdentity(a.lanes[0]), laneIdentity(b.lanes[0]));
  assert.equal(laneIdentity(a.lanes[0]), '{"args":["-v"],"base_seed":5}');
});

test("placeholdersIn finds {identifier} placeholders anywhere inside an argument", () => {
  assert.deepStrictEqual(placeholdersIn("--range={seed_from}..{seed_to}"), ["seed_from", "seed_to"]);
  assert.deepStrictEqual(placeholdersIn('{} {"a":1} {1x} x{out}y'), ["out"]);
});

test("fillPlaceholders substitutes inside arguments and refuses a placeholder without a value", () => {
  assert.equal(fillPlaceholders("--range={seed_from}..{seed_to}", { seed_from: 5, seed_to: 9 }), "--range=5..9");
  assert.equal(fillPlaceholders('{} {"a":1} --seeds={seeds}', { seeds: "1,2,3" }), '{} {"a":1} --seeds=1,2,3');
  assert.throws(() => fillPlaceholders("{count}", {}), /no value for placeholder \{count\}/);
});
