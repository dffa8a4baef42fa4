// Generation id, app build id and the stale-app guard.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { loadConfig } from "../../src/config/load.ts";
import { appBuildId, generationHash, globToRegExp, identityFiles, staleAppSource } from "../../src/config/identity.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-identity-"));
after(() => rmSync(root, { recursive: true, force: true }));

function setup(name: string, generator: string, extra = "") {
  const dir = join(root, name);
  mkdirSync(join(dir, "gen", "lib"), { recursive: true });
  writeFileSync(join(dir, "gen", "main.mjs"), "main");
  writeFileSync(join(dir, "gen", "util.mjs"), "util");
  writeFileSync(join(dir, "gen", "lib", "deep.mjs"), "deep");
  writeFileSync(join(dir, "fuzzfleet.toml"), `${generator}\n${extra}\n[lanes.a]\n`);
  return { dir, load: () => loadConfig(join(dir, "fuzzfleet.toml")) };
}

const gen = (identity: string, command = '["node", "gen/main.mjs", "{seed_from}", "{count}", "{out}"]') =>
  `[generator]\ncommand = ${command}\nidentity = ${identity}`;

test("identity globs expand, sorted, relative to the config directory", () => {
  const { dir, load } = setup("glob", gen('["gen/**/*.mjs"]'));
  assert.deepEqual(identityFiles(load()), [join(dir, "gen/lib/deep.mjs"), join(dir, "gen/main.mjs"), join(dir, "gen/util.mjs")]);
});

test("a glob that matches nothing and a missing identity file are config errors naming them", () => {
  const { load } = setup("none", gen('["gen/*.py"]'));
  assert.throws(() => generationHash(load()), /identity pattern .*gen\/\*\.py matches no file/);
  const missing = setup("missing", gen('["gen/nope.mjs"]'));
  assert.throws(() => generationHash(missing.load()), /identity file .*gen\/nope\.mjs cannot be read \(ENOENT\)/);
});

test("the generation id changes with any identity file and with the command template, not with lanes", () => {
  const { dir, load } = setup("hash", gen('["gen/*.mjs"]'));
  const h1 = generationHash(load());
  assert.match(h1, /^[0-9a-f]{64}$/);
  assert.equal(generationHash(load()), h1, "deterministic");
  writeFileSync(join(dir, "gen", "util.mjs"), "util changed");
  const h2 = generationHash(load());
  assert.notEqual(h2, h1);
  writeFileSync(join(dir, "fuzzfleet.toml"), `${gen('["gen/*.mjs"]', '["node", "gen/main.mjs", "--fast", "{seed_from}", "{count}", "{out}"]')}\n[lanes.a]\n`);
  assert.notEqual(generationHash(load()), h2);
  writeFileSync(join(dir, "fuzzfleet.toml"), `${gen('["gen/*.mjs"]', '["node", "gen/main.mjs", "--fast", "{seed_from}", "{count}", "{out}"]')}\n[lanes.a]\n[lanes.b]\nargs=["x"]\n`);
  assert.notEqual(generationHash(load()), h2);
});

test("app build id hashes the app; a source newer than the app is reported as stale", () => {
  const { dir, load } = setup("app", gen('["gen/main.mjs"]'), `[app]\npath = "app.bin"\nsources = ["src/**/*.c"]`);
  assert.throws(() => appBuildId(load()), /app not found: .*app\.bin/);
  writeFileSync(join(dir, "app.bin"), "v1");
  mkdirSync(join(dir, "src", "sub"), { recursive: true });
  writeFileSync(join(dir, "src", "sub", "x.c"), "int x;");
  const id = appBuildId(load());
  assert.match(id!, /^[0-9a-f]{12}$/);
  const past = new Date(Date.now() - 3600_000);
  utimesSync(join(dir, "app.bin"), past, past);
  const stale = staleAppSource(load());
  assert.equal(stale?.file, join(dir, "src", "sub", "x.c"));
  const future = new Date(Date.now() + 3600_000);
  utimesSync(join(dir, "app.bin"), future, future);
  assert.equal(staleAppSource(load()), null);
  writeFileSync(join(dir, "app.bin"), "v2");
  assert.notEqual(appBuildId(load()), id);
});

test("glob syntax: * stays in one directory, ** crosses directories, ? is one character", () => {
  assert.ok(globToRegExp("/a/*.c").test("/a/x.c"));
  assert.ok(!globToRegExp("/a/*.c").test("/a/b/x.c"));
  assert.ok(globToRegExp("/a/**/*.c").test("/a/x.c"));
  assert.ok(globToRegExp("/a/**/*.c").test("/a/b/c/x.c"));
  assert.ok(globToRegExp("/a/?.c").test("/a/x.c"));
  assert.ok(!globToRegExp("/a/?.c").test("/a/xy.c"));
  assert.ok(!globToRegExp("/a/x.c").test("/a/xxc"), "dots are literal");
});

test("identity files outside the campaign directory are hashed by absolute path, so moving the campaign keeps the generation", () => {
  const tool = join(root, "system", "bin", "tool");
  mkdirSync(join(root, "system", "bin"), { recursive: true });
  writeFileSync(tool, "a generator binary outside the campaign");
  const generator = gen(JSON.stringify(["gen/*.mjs", tool]));
  const here = setup("moved-from", generator);
  const deeper = setup(join("one", "two", "moved-to"), generator);
  assert.equal(generationHash(deeper.load()), generationHash(here.load()));
  // The path still counts: the same bytes elsewhere are another generator.
  const elsewhere = join(root, "system", "other-tool");
  writeFileSync(elsewhere, "a generator binary outside the campaign");
  assert.notEqual(generationHash(setup("other", gen(JSON.stringify(["gen/*.mjs", elsewhere]))).load()), generationHash(here.load()));
});

test("only * and ? make an identity entry or an app source a glob; [ is a literal character", () => {
  const missing = setup("bracket-missing", gen('["gen/[v2].mjs"]'));
  assert.throws(() => generationHash(missing.load()), /identity file .*gen\/\[v2\]\.mjs cannot be read \(ENOENT\)/);
  // A literal entry is read through a symlink, as any other listed file.
  const linked = setup("bracket-link", gen('["gen/[v2].mjs"]'), `[app]\npath = "app.bin"\nsources = ["src/[core].c"]`);
  symlinkSync(join(linked.dir, "gen", "main.mjs"), join(linked.dir, "gen", "[v2].mjs"));
  assert.deepEqual(identityFiles(linked.load()), [join(linked.dir, "gen", "[v2].mjs")]);
  assert.match(generationHash(linked.load()), /^[0-9a-f]{64}$/);
  writeFileSync(join(linked.dir, "app.bin"), "app");
  const past = new Date(Date.now() - 3600_000);
  utimesSync(join(linked.dir, "app.bin"), past, past);
  mkdirSync(join(linked.dir, "src"));
  writeFileSync(join(linked.dir, "src", "real.c"), "int x;");
  symlinkSync(join(linked.dir, "src", "real.c"), join(linked.dir, "src", "[core].c"));
  assert.equal(staleAppSource(linked.load())?.file, join(linked.dir, "src", "[core].c"));
});
