// status, failures, export and init as a user runs them; read commands never write.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, PLANTED } from "../helpers/campaign.ts";

const digest = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

describe("reports on a swept campaign", () => {
  const c = new Campaign({
    lanes: {
      small: 'base_seed = 1\nweight = 2\nargs = ["--size", "small"]',
      large: 'base_seed = 1000000\nargs = ["--size", "large"]',
    },
  });
  before(() => assert.equal(c.cli(["run", "--for", "5s"]).code, 1));
  after(() => c.cleanup());

  test("status prints coverage per lane, failures by bucket and sessions; --json carries the same numbers", () => {
    const text = c.cli(["status"]);
    assert.equal(text.code, 0, text.stderr);
    const json = c.cli(["status", "--json"]);
    const d = JSON.parse(json.stdout) as {
      lanes: { name: string; covered: number; cursor: number }[];
      failures: { state: string; bucket: string; distinct: number; hits: number }[];
      sessions: { status: string }[];
    };
    const lanes = c.query<{ name: string; base_seed: number; cursor: number }>("SELECT * FROM lane ORDER BY id");
    assert.deepEqual(
      d.lanes.map((l) => [l.name, l.covered, l.cursor]),
      lanes.map((l) => [l.name, l.cursor - l.base_seed, l.cursor]),
    );
    for (const l of d.lanes) assert.match(text.stdout, new RegExp(`${l.name}\\s+${l.covered.toLocaleString("en-US")}\\s`));
    const distinct = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE minimize_state IS NULL").n;
    assert.equal(
      d.failures.reduce((n, f) => n + f.distinct, 0),
      distinct,
    );
    assert.match(text.stdout, /failures \(this generation\):/);
    assert.match(text.stdout, /#1 done/);
    assert.equal(d.sessions[0]!.status, "done");
  });

  test("failures lists open failures with repro and artifact dir; filters and --json agree", () => {
    const all = JSON.parse(c.cli(["failures", "--json", "--state", "all"]).stdout) as { failures: { id: number; bucket: string; hits: number; artifact_dir: string }[] };
    assert.equal(all.failures.length, c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE minimize_state IS NULL").n);
    const crash = JSON.parse(c.cli(["failures", "--json", "--bucket", "crash"]).stdout) as { failures: { bucket: string }[] };
    assert.ok(crash.failures.length > 0 && crash.failures.every((f) => f.bucket === "crash"));
    const text = c.cli(["failures", "-v", "--lines", "3"]);
    assert.equal(text.code, 0);
    const first = all.failures[0]!;
    assert.match(text.stdout, new RegExp(`#${first.id}\\s+${first.bucket}`));
    assert.ok(text.stdout.includes(`repro: node ${PLANTED} --seed `), "the repro names the generator by its absolute path");
    // -v shows the head of the failure's own report.txt, then how much more there is.
    const report = readFileSync(join(first.artifact_dir, "report.txt"), "utf8").replace(/\n$/, "").split("\n");
    assert.ok(report.length > 3, "the planted generator's report.txt is longer than --lines 3");
    const entry = text.stdout.split("\n\n").find((block) => block.startsWith(`#${first.id} `));
    assert.ok(entry, `failure #${first.id} is listed:\n${text.stdout}`);
    assert.deepEqual(
      entry.split("\n").filter((l) => l.startsWith("      | ")),
      [...report.slice(0, 3).map((l) => `      | ${l}`), `      | … ${report.length - 3} more lines in report.txt (raise --lines)`],
    );
    assert.ok(existsSync(join(first.artifact_dir, "meta.json")));
    const none = c.cli(["failures", "--state", "fixed"]);
    assert.match(none.stdout, /no fixed failures in generation 1/);
  });

  test("export writes a bundle with each minimized input inline, counted by shown=N", () => {
    const r = c.cli(["export", "--bucket", "crash"]);
    assert.equal(r.code, 0, r.stderr);
    const rows = c.query<{ id: number; artifact_dir: string }>("SELECT id, artifact_dir FROM failure WHERE bucket = 'crash' AND state = 'open' AND minimize_state IS NULL");
    assert.match(r.stdout, new RegExp(`end of export -- ${rows.length} failure\\(s\\)`));
    // Parse the bundle by its counts and compare each minimized input byte for byte.
    const lines = r.stdout.split("\n");
    let checked = 0;
    for (let i = 0; i < lines.length; i++) {
      const m = /^----- (input\.min\.txt)  shown=(\d+) of (\d+) lines/.exec(lines[i]!);
      if (!m) continue;
      const id = Number(/===== FAILURE (\d+)/.exec(lines.slice(0, i).reverse().find((l) => l.startsWith("===== FAILURE"))!)![1]);
      const dir = join(c.outDir, rows.find((row) => row.id === id)!.artifact_dir);
      const file = readFileSync(join(dir, "input.min.txt"), "utf8").replace(/\n$/, "");
      assert.equal(lines.slice(i + 1, i + 1 + Number(m[2])).join("\n"), file);
      checked++;
    }
    assert.equal(checked, rows.length);
    const one = c.cli(["export", "--id", String(rows[0]!.id), "-o", join(c.dir, "bug.txt")]);
    assert.equal(one.code, 0);
    assert.match(one.stderr, /wrote .*bug\.txt \(1 failure\(s\)/);
  });

  test("export -o in a directory that does not exist is a usage error naming the path and the fix", () => {
    const target = join(c.dir, "no-such-dir", "bug.txt");
    const r = c.cli(["export", "-o", target]);
    assert.equal(r.code, 2);
    assert.equal(r.stderr, `fuzzfleet: -o ${target}: ${join(c.dir, "no-such-dir")} does not exist; create the directory first or choose another path for -o\n`);
    assert.equal(r.stdout, "");
  });

  test("export with no matching failure says so on stderr, keeping stdout for the bundle", () => {
    const r = c.cli(["export", "--bucket", "no-such-bucket"]);
    assert.equal(r.code, 0);
    assert.equal(r.stdout, "");
    assert.equal(r.stderr, "no matching failures\n");
  });

  test("status lists lanes in config order, whatever order their rows were created in", () => {
    const original = readFileSync(c.configPath, "utf8");
    try {
      c.writeConfig({
        lanes: {
          large: 'base_seed = 1000000\nargs = ["--size", "large"]',
          small: 'base_seed = 1\nweight = 2\nargs = ["--size", "small"]',
        },
      });
      const d = JSON.parse(c.cli(["status", "--json"]).stdout) as { lanes: { name: string }[] };
      assert.deepEqual(
        d.lanes.map((l) => l.name),
        ["large", "small"],
      );
      assert.match(c.cli(["status"]).stdout, /\nlarge .*\nsmall /);
      // Without a readable config the store's row order is all there is.
      writeFileSync(c.configPath, "not toml [");
      const rows = JSON.parse(c.cli(["status", "--json"]).stdout) as { lanes: { name: string }[] };
      assert.deepEqual(
        rows.lanes.map((l) => l.name),
        ["small", "large"],
      );
    } finally {
      writeFileSync(c.configPath, original);
    }
  });

  test("status, failures and export never write the store", () => {
    // TRUNCATE mode leaves an empty -journal file behind the writer; readers must not touch either.
    const snapshot = () => ({
      db: digest(c.dbPath),
      dbMtime: statSync(c.dbPath).mtimeMs,
      journalMtime: existsSync(c.dbPath + "-journal") ? statSync(c.dbPath + "-journal").mtimeMs : null,
    });
    const before = snapshot();
    for (const args of [["status"], ["status", "--json"], ["failures", "-v"], ["export", "--full"]]) {
      assert.equal(c.cli(args).code, 0);
    }
    assert.deepEqual(snapshot(), before);
  });

  test("--state stale lists the failures an earlier generation left stale, without --all-generations", () => {
    const open = c.one<{ n: number }>("SELECT COUNT(*) AS n FROM failure WHERE state = 'open' AND minimize_state IS NULL").n;
    assert.ok(open > 0);
    assert.equal(c.cli(["reset", "--yes"]).code, 0);
    const data = JSON.parse(c.cli(["failures", "--state", "stale", "--json"]).stdout) as {
      filters: { allGenerations: boolean };
      failures: { state: string; generation_id: number }[];
    };
    assert.equal(data.failures.length, open);
    assert.ok(data.failures.every((f) => f.state === "stale" && f.generation_id === 1));
    assert.equal(data.filters.allGenerations, true);
    const bundle = c.cli(["export", "--state", "stale"]);
    assert.equal(bundle.code, 0, bundle.stderr);
    assert.match(bundle.stdout, new RegExp(`end of export -- ${open} failure\\(s\\)`));
    const help = c.cli(["failures", "--help"]);
    assert.match(help.stdout, /stale implies --all-generations/);
  });
});

describe("read commands without a store", () => {
  const c = new Campaign();
  after(() => c.cleanup());
  const nothing = "no sweeps recorded yet — fuzzfleet run --for 30m\n";

  test("status and failures on a campaign that never ran say so, exit 0 and do not create the store", () => {
    for (const what of ["status", "failures"]) {
      const r = c.cli([what]);
      assert.deepEqual({ code: r.code, stdout: r.stdout, stderr: r.stderr }, { code: 0, stdout: nothing, stderr: "" }, what);
    }
    const json = JSON.parse(c.cli(["status", "--json"]).stdout) as { generation: unknown; lanes: unknown[] };
    assert.deepEqual([json.generation, json.lanes], [null, []]);
    const failures = JSON.parse(c.cli(["failures", "--json"]).stdout) as { generation: unknown; failures: unknown[] };
    assert.deepEqual([failures.generation, failures.failures], [null, []]);
    assert.ok(!existsSync(c.dbPath));
  });

  test("export on a campaign that never ran says so on stderr, exits 0 and does not create the store", () => {
    const r = c.cli(["export"]);
    assert.deepEqual({ code: r.code, stdout: r.stdout, stderr: r.stderr }, { code: 0, stdout: "", stderr: nothing });
    assert.ok(!existsSync(c.dbPath));
  });
});

describe("init", () => {
  const c = new Campaign();
  after(() => c.cleanup());

  test("init writes a starter config that runs as is, and refuses to overwrite without --force", () => {
    const path = join(c.dir, "fresh", "fuzzfleet.toml");
    const r = c.cli(["--config", path, "init"]);
    assert.equal(r.code, 2, "the directory does not exist yet");
    assert.match(r.stderr, /^fuzzfleet: --config .*fresh\/fuzzfleet\.toml: .*fresh does not exist; create the directory first or choose another path for --config\n/);
    const dir = join(c.dir, "fresh");
    mkdirSync(dir);
    const ok = c.cli(["--config", path, "init"]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /wrote .*fuzzfleet\.toml/);
    assert.equal(c.cli(["--config", path, "init"]).code, 3);
    assert.equal(c.cli(["--config", path, "init", "--force"]).code, 0);
    // A symlink in the config's place, even a dangling one, is something: refused, and with --force
    // replaced; never written through.
    const linked = join(dir, "linked.toml");
    const target = join(c.dir, "never-created.toml");
    symlinkSync(target, linked);
    assert.equal(c.cli(["--config", linked, "init"]).code, 3);
    assert.equal(c.cli(["--config", linked, "init", "--force"]).code, 0);
    assert.ok(lstatSync(linked).isFile(), "the link was replaced by the config");
    assert.ok(!existsSync(target), "nothing was created through the link");
    // Its 10-minute chunks are cut to the time left: a 6 s budget sweeps (the deadline floor is 5 s).
    const run = c.cli(["--config", path, "run", "--for", "6s"], { env: { PLANTED_COST_MS: "0" } });
    assert.ok(existsSync(join(dir, "fuzzfleet.db")));
    assert.equal(run.code, exitOwed({ dbPath: join(dir, "fuzzfleet.db") }, run.stdout), run.stdout + run.stderr);
  });
});
