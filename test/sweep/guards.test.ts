// What `run` and friends refuse to do: sweep a changed generator or lane without consent, write
// a store another host's campaign owns, read a bad config.
import assert from "node:assert/strict";
import { appendFileSync, copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, PLANTED } from "../helpers/campaign.ts";

/** A campaign whose generator is a private copy, so a test may edit it. */
function campaignWithOwnGenerator(): { c: Campaign; gen: string } {
  const c = new Campaign();
  const gen = join(c.dir, "gen", "planted.mjs");
  mkdirSync(join(c.dir, "gen"));
  // The planted generator imports sibling modules; copy the whole example.
  for (const f of ["planted.mjs", "cli-args.mjs", "generate.mjs", "machine.mjs", "pool.mjs", "seeds.mjs", "shrink.mjs", "worker.mjs"]) {
    copyFileSync(join(PLANTED, "..", f), join(c.dir, "gen", f));
  }
  c.writeConfig({
    generator: `[generator]
command = ["node", "gen/planted.mjs", "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}"]
identity = ["gen/planted.mjs"]
`,
  });
  return { c, gen };
}

describe("generator and lane identity", () => {
  const { c, gen } = campaignWithOwnGenerator();
  after(() => c.cleanup());

  test("a changed generator is refused without a terminal and without --yes (exit 3), and nothing changes", () => {
    const first = c.cli(["run", "--for", "4s"]);
    assert.equal(first.code, exitOwed(c, first.stdout), first.stdout + first.stderr);
    const cursor = c.one<{ cursor: number }>("SELECT cursor FROM lane").cursor;
    assert.ok(cursor > 1);
    appendFileSync(gen, "\n// a change that makes every seed mean something else\n");
    const r = c.cli(["run", "--for", "4s"]);
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stderr, /Start a new generation/);
    assert.match(r.stderr, /--yes/);
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM generation").n, 1);
    assert.equal(c.one<{ cursor: number }>("SELECT cursor FROM lane").cursor, cursor);
    assert.ok(!existsSync(join(c.outDir, "fuzzfleet.lock")), "the refused run released the lock");
  });

  test("with --yes the changed generator starts a new generation; open failures become stale", () => {
    const openBefore = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE state = 'open'").n;
    assert.ok(openBefore > 0, "the first run found something");
    const r = c.cli(["run", "--for", "4s", "--yes"]);
    assert.equal(r.code, exitOwed(c, r.stdout), r.stdout + r.stderr);
    assert.match(r.stdout, /new generation/);
    const gens = c.query<{ id: number; note: string }>("SELECT id, note FROM generation ORDER BY id");
    assert.deepEqual(
      gens.map((g) => g.note),
      ["initial", "generator changed"],
    );
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE generation_id = 1 AND state = 'stale'").n, openBefore);
    const lanes = c.query<{ generation_id: number; retired: number }>("SELECT generation_id, retired FROM lane ORDER BY id");
    assert.deepEqual(lanes, [
      { generation_id: 1, retired: 1 },
      { generation_id: 2, retired: 0 },
    ]);
  });

  test("a changed lane (args) is refused without --yes, and restarts from base_seed with --yes", () => {
    const old = c.one<{ id: number; cursor: number }>("SELECT id, cursor FROM lane WHERE retired = 0");
    c.writeConfig({
      generator: `[generator]
command = ["node", "gen/planted.mjs", "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}"]
identity = ["gen/planted.mjs"]
`,
      lanes: { small: 'base_seed = 1\nargs = ["--size", "large"]' },
    });
    const refused = c.cli(["run", "--for", "4s"]);
    assert.equal(refused.code, 3, refused.stderr);
    assert.match(refused.stderr, /Restart lane 'small'/);
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM lane WHERE retired = 0 AND id = ?", old.id).n, 1);
    const r = c.cli(["run", "--for", "4s", "--yes"]);
    assert.equal(r.code, exitOwed(c, r.stdout), r.stdout + r.stderr);
    const fresh = c.one<{ id: number; params_json: string }>("SELECT id, params_json FROM lane WHERE retired = 0");
    assert.notEqual(fresh.id, old.id);
    assert.equal(fresh.params_json, '{"args":["--size","large"],"base_seed":1}');
    const first = c.one<{ seed_from: number }>("SELECT seed_from FROM chunk WHERE lane_id = ? ORDER BY id LIMIT 1", fresh.id);
    assert.equal(first.seed_from, 1, "the restarted lane starts at base_seed");
  });
});

describe("a time budget within the deadline floor", () => {
  const c = new Campaign();
  after(() => c.cleanup());

  test("run and coordinate refuse a --for no longer than the deadline floor (exit 2), naming both, before taking the lock", () => {
    // chunk_minutes = 0.05: 3 s chunks, shorter than the shortest chunk worth starting (5 s), so the floor is 3 s.
    for (const cmd of ["run", "coordinate"]) {
      const r = c.cli([cmd, "--for", "3s"]);
      assert.equal(r.code, 2, `${cmd}: ${r.stdout}${r.stderr}`);
      assert.equal(r.stderr, "fuzzfleet: --for 3s leaves no time for a chunk: none starts with less than 3s left; ask for --for 4s or more\n");
    }
    assert.ok(!existsSync(c.dbPath), "no store was created");
    assert.ok(!existsSync(join(c.outDir, "fuzzfleet.lock")));
  });
});

describe("a lock held by another host", () => {
  const c = new Campaign();
  after(() => c.cleanup());
  const lock = () => join(c.outDir, "fuzzfleet.lock");

  test("run, resweep and reset are refused (exit 3); status and failures point at --master", () => {
    const first = c.cli(["run", "--for", "4s"]);
    assert.equal(first.code, exitOwed(c, first.stdout), first.stdout + first.stderr);
    writeFileSync(lock(), `otherhost 4242 2026-01-01T00:00:00Z coordinate 9999\n`);
    for (const args of [["run", "--for", "4s"], ["resweep"], ["reset", "--yes"]]) {
      const r = c.cli(args);
      assert.equal(r.code, 3, `${args[0]}: ${r.stderr}`);
      assert.match(r.stderr, /otherhost/);
      assert.match(r.stderr, /--force-unlock/);
    }
    for (const what of ["status", "failures"]) {
      const r = c.cli([what]);
      assert.equal(r.code, 3, r.stderr);
      assert.match(r.stderr, new RegExp(`fuzzfleet ${what} --master otherhost:9999`));
    }
    const exp = c.cli(["export"]);
    assert.equal(exp.code, 3, exp.stderr);
    assert.doesNotMatch(exp.stderr, /--master/, "export has no --master");
    assert.match(exp.stderr, /'export' cannot ask it remotely: run 'fuzzfleet export' on otherhost, or here once that campaign ends/);
    assert.equal(readFileSync(lock(), "utf8"), "otherhost 4242 2026-01-01T00:00:00Z coordinate 9999\n", "nobody touched it");
  });

  test("--force-unlock takes over, and the lock is released afterwards", () => {
    const r = c.cli(["run", "--for", "4s", "--force-unlock"]);
    assert.equal(r.code, exitOwed(c, r.stdout), r.stdout + r.stderr);
    assert.match(r.stderr, /taking over the lock from otherhost \(pid 4242\)/);
    assert.ok(!existsSync(lock()));
    assert.equal(c.one<{ n: number }>("SELECT COUNT(*) AS n FROM session").n, 2);
  });
});

describe("bad configuration", () => {
  const c = new Campaign();
  after(() => c.cleanup());
  const config = () => c.configPath;

  test("an unknown key is exit 2 naming the key and its line", () => {
    const text = readFileSync(config(), "utf8").replace("[defaults]\n", "[defaults]\nchunk_minuets = 3\n");
    writeFileSync(config(), text);
    const r = c.cli(["run", "--for", "4s"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /fuzzfleet\.toml:2: defaults\.chunk_minuets: unknown key/);
    assert.ok(!existsSync(c.dbPath), "no store was created");
  });

  test("a wrong type is exit 2 naming the key, its line and the expected type", () => {
    c.writeConfig({ lanes: { small: 'base_seed = 1\nweight = "two"' } });
    const line = readFileSync(config(), "utf8").split("\n").findIndex((l) => l.startsWith("weight")) + 1;
    const r = c.cli(["run", "--for", "4s"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, new RegExp(`fuzzfleet\\.toml:${line}: lanes\\.small\\.weight: expected a number`));
  });

  test("no lanes is exit 2", () => {
    c.writeConfig({ lanes: {} });
    const r = c.cli(["run", "--for", "4s"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /defines no \[lanes\.NAME\] tables/);
  });

  test("a missing file is exit 2 and suggests init", () => {
    const r = c.cli(["--config", join(c.dir, "nope.toml"), "run", "--for", "4s"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /no config at .*nope\.toml.*fuzzfleet init/);
  });

  test("a bad --for is exit 2 naming the value", () => {
    c.writeConfig();
    const r = c.cli(["run", "--for", "soon"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /bad duration 'soon'/);
  });

  test("an unknown lane name is exit 2 listing the configured lanes", () => {
    const r = c.cli(["run", "--for", "4s", "--lane", "nosuch"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /no such lane\(s\): nosuch \(configured: small\)/);
  });
});
