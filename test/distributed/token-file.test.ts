// --token-file on a coordinator and on the clients that read from it: the file is the user's
// (read, never created, never replaced), the banner tells workers to pass the same flag and never
// prints the secret, `status --master` reads it too, and a path that names no file is refused
// with exit 3 before anything starts. Real processes and sockets on 127.0.0.1.
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, distributedTable, finished, start, startCoordinator } from "../helpers/campaign.ts";

const TOKEN = "coordinator-token-file-0123456789";

test("coordinate, worker and status --master share a --token-file; the secret is never printed", { timeout: 120_000 }, async () => {
  const c = new Campaign({ extra: distributedTable(), costMs: 1, defaults: { chunk_minutes: 0.05, bootstrap_seeds: 60 } });
  try {
    const file = join(c.dir, "secret.token");
    writeFileSync(file, TOKEN + "\n", { mode: 0o600 });
    const coord = await startCoordinator(c, ["--for", "6s", "--token-file", file]);
    const master = `127.0.0.1:${coord.port}`;
    assert.match(coord.output(), new RegExp(`token from ${file}\\n`));
    assert.match(coord.output(), new RegExp(`start workers:  fuzzfleet worker --master ${master} --token-file ${file}  \\(`));
    const worker = start(c, ["worker", "--master", master, "-j", "1", "--token-file", file]);
    const status = c.cli(["status", "--master", master, "--token-file", file, "--json"]);
    assert.equal(status.code, 0, status.stderr);
    assert.ok("lanes" in (JSON.parse(status.stdout) as object), status.stdout);
    const missing = join(c.dir, "typo.token");
    const refused = c.cli(["status", "--master", master, "--token-file", missing]);
    assert.equal(refused.code, 3, refused.stdout + refused.stderr);
    assert.equal(refused.stderr, `fuzzfleet: no campaign token: the token file ${missing} does not exist; check the path, or give the token in FUZZFLEET_TOKEN\n`);

    const [rc, rw] = await Promise.all([finished(coord, 90_000, "the coordinator"), finished(worker, 90_000, "the worker")]);
    assert.equal(rc.code, exitOwed(c, rc.stdout), rc.stdout + rc.stderr);
    assert.equal(rw.code, 0, rw.stdout + rw.stderr);
    assert.match(rw.stdout, /stop acknowledged/);
    assert.ok(!(rc.stdout + rc.stderr + rw.stdout + rw.stderr).includes(TOKEN), "nobody prints the secret");
    assert.equal(readFileSync(file, "utf8"), TOKEN + "\n");
    assert.equal(existsSync(join(c.outDir, "fuzzfleet.token")), false, "no campaign token file was made beside it");
  } finally {
    c.cleanup();
  }
});

test("coordinate --token-file naming no file exits 3 before it opens the campaign, creating nothing", { timeout: 60_000 }, () => {
  const c = new Campaign({ extra: distributedTable() });
  try {
    const missing = join(c.dir, "typo.token");
    const r = c.cli(["coordinate", "--for", "1m", "--token-file", missing]);
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.equal(
      r.stderr,
      `fuzzfleet: no campaign token: the token file ${missing} does not exist (a file given with --token-file is read, never created); check the path, or give the token in FUZZFLEET_TOKEN\n`,
    );
    assert.equal(r.stdout, "");
    assert.equal(existsSync(missing), false);
    assert.equal(existsSync(c.dbPath), false, "no store was created");
    assert.equal(existsSync(c.outDir), false);
  } finally {
    c.cleanup();
  }
});
