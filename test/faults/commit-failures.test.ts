// Commits that fail — a full disk (SQLite's own SQLITE_FULL, the file not allowed to grow) and an
// fsync that fails at commit (SQLITE_IOERR_FSYNC after the statements ran) — injected into the
// fuzzfleet process by a test-only preload (test/fixtures/faults/store-faults.mjs). Memory is put
// back with every refused transaction, the work is booked once the store takes writes again, and
// the books stay true.
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { assertBooksTrue, completeChunks, firstSessionExit, interruptWhenWritesResume } from "../helpers/books.ts";
import { Campaign, distributedTable, finished, start, startCoordinator, waitFor, type Running } from "../helpers/campaign.ts";

const PRELOAD = fileURLToPath(new URL("../fixtures/faults/store-faults.mjs", import.meta.url));
/** Longer than any session here may take (budget, drain grace and stop grace): a session still running then has hung. */
const BOUND_MS = 150_000;

function faultEnv(trigger: string): NodeJS.ProcessEnv {
  return { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import ${PRELOAD}`.trim(), FUZZFLEET_TEST_STORE_FAULT: trigger };
}


/** Turns the fault on until `line` appeared in the session's output, then 3 s more, then off. */
async function injectUntilSeen(trigger: string, kind: string, session: Running, line: RegExp): Promise<number> {
  writeFileSync(trigger, kind);
  await waitFor(`the session to report ${line}`, () => (line.test(session.output()) ? true : undefined), 20_000);
  const during = Date.now();
  await new Promise((r) => setTimeout(r, 3_000));
  rmSync(trigger, { force: true });
  return during;
}

test("coordinate: a full disk at commit (SQLITE_FULL) is retried without losing a chunk or a failure", async () => {
  const c = new Campaign({ extra: distributedTable() });
  const trigger = join(c.dir, "fault");
  try {
    const coord = await startCoordinator(c, ["--for", "2m"], faultEnv(trigger));
    const workers = [1, 2].map(() => start(c, ["worker", "--master", `127.0.0.1:${coord.port}`, "-j", "1"]));
    await waitFor("two complete chunks", () => (completeChunks(c) >= 2 ? true : undefined), 60_000);
    await injectUntilSeen(trigger, "full", coord, /the disk holding the store .* is full \(SQLITE_FULL\)/);
    await interruptWhenWritesResume(c, coord);
    const rc = await finished(coord, BOUND_MS, "the coordinator");
    const out = rc.stdout + rc.stderr;
    assert.equal(rc.code, firstSessionExit(c), out);
    assert.match(out, /takes writes again after/);
    assert.match(out, /all 2 worker\(s\) acknowledged the stop/);
    for (const w of workers) assert.equal((await finished(w, BOUND_MS, "a worker")).code, 0);
    const audit = assertBooksTrue(c);
    assert.ok(audit.sweptSeeds > 0);
  } finally {
    c.cleanup();
  }
});

test("run: an fsync that fails at commit (SQLITE_IOERR_FSYNC) after the chunk's rows were written is retried; nothing is lost", async () => {
  const c = new Campaign();
  const trigger = join(c.dir, "fault");
  try {
    const run = start(c, ["run", "--for", "2m", "--yes"], faultEnv(trigger));
    await waitFor("a complete chunk", () => (completeChunks(c) >= 1 ? true : undefined), 60_000);
    await injectUntilSeen(trigger, "ioerr", run, /the store .* cannot be written \(SQLITE_IOERR_FSYNC\)/);
    await interruptWhenWritesResume(c, run);
    const rc = await finished(run, BOUND_MS, "run");
    const out = rc.stdout + rc.stderr;
    assert.equal(rc.code, firstSessionExit(c), out);
    assert.match(out, /takes writes again after/);
    assert.doesNotMatch(out, /SqliteError|\n\s+at /, "no stack trace");
    assertBooksTrue(c);
  } finally {
    c.cleanup();
  }
});
