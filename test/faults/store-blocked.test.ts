// A store that refuses writes for a while — a reader holding a transaction in TRUNCATE mode —
// costs a sweep time, never its books: no hole below a cursor, no lost failure, workers stay
// attached, one line says what blocks the store and one says when it is over. Past
// [store] give_up_minutes the session ends with one line and exit 4, books still true. In WAL
// mode (the default on a local disk) the same reader blocks nothing.
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { test } from "node:test";
import { assertBooksTrue, completeChunks, firstSessionExit, interruptWhenWritesResume } from "../helpers/books.ts";
import { Campaign, distributedTable, finished, start, startCoordinator, waitFor, type Running } from "../helpers/campaign.ts";

const TRUNCATE = '[store]\njournal = "truncate"\n';
/** Longer than any session here may take (budget, drain grace and stop grace): a session still running then has hung. */
const BOUND_MS = 150_000;


/**
 * Holds a read transaction on the store, as `sqlite3 -readonly` with BEGIN; SELECT … would, for
 * `ms` and at least until `during` has settled.
 */
async function holdReader(c: Campaign, ms: number, during?: () => Promise<unknown>): Promise<void> {
  const reader = new Database(c.dbPath, { readonly: true, fileMustExist: true });
  try {
    reader.exec("BEGIN");
    reader.prepare("SELECT COUNT(*) FROM chunk").get();
    const until = Date.now() + ms;
    await during?.();
    await new Promise((r) => setTimeout(r, Math.max(0, until - Date.now())));
    reader.exec("COMMIT");
  } finally {
    reader.close();
  }
}

function count(text: string, re: RegExp): number {
  return text.match(new RegExp(re.source, "g"))?.length ?? 0;
}


async function sweepWithWorkers(c: Campaign, seconds: number): Promise<{ coord: Running & { port: number }; workers: Running[] }> {
  const coord = await startCoordinator(c, ["--for", `${seconds}s`]);
  const workers = [1, 2].map((i) => start(c, ["worker", "--master", `127.0.0.1:${coord.port}`, "-j", "1"], { FUZZFLEET_TEST_NAME: `w${i}` }));
  await waitFor("two complete chunks", () => (completeChunks(c) >= 2 ? true : undefined), 60_000);
  return { coord, workers };
}

test("coordinate (TRUNCATE): a reader holding a transaction through many commit attempts costs time, not books; workers stay", async () => {
  const c = new Campaign({ extra: distributedTable() + TRUNCATE });
  try {
    const { coord, workers } = await sweepWithWorkers(c, 120);
    await holdReader(c, 6_000, () => waitFor("the coordinator to say the store is locked", () => (/is locked by another process/.test(coord.output()) ? true : undefined), 10_000));
    await interruptWhenWritesResume(c, coord);
    const rc = await finished(coord, BOUND_MS, "the coordinator");
    const out = rc.stdout + rc.stderr;
    assert.equal(rc.code, firstSessionExit(c), out);
    assert.equal(count(out, /is locked by another process \(a reader holding a transaction\?/), 1, out);
    assert.match(out, /retrying; nothing is lost/);
    assert.equal(count(out, /takes writes again after \d+s/), 1, out);
    assert.match(out, /all 2 worker\(s\) acknowledged the stop/);
    assert.doesNotMatch(out, /worker \S+ left \((connection closed|silent)/, "no worker was dropped");
    for (const w of workers) {
      const r = await finished(w, BOUND_MS, "a worker");
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.doesNotMatch(r.stdout + r.stderr, /lost the coordinator/);
    }
    assertBooksTrue(c);
  } finally {
    c.cleanup();
  }
});

test("run (TRUNCATE): a reader holding a transaction costs time, not books, and no stack trace", async () => {
  const c = new Campaign({ extra: TRUNCATE });
  try {
    const run = start(c, ["run", "--for", "2m", "--yes"]);
    await waitFor("a complete chunk", () => (completeChunks(c) >= 1 ? true : undefined), 60_000);
    await holdReader(c, 6_000, () => waitFor("run to say the store is locked", () => (/is locked by another process/.test(run.output()) ? true : undefined), 10_000));
    await interruptWhenWritesResume(c, run);
    const rc = await finished(run, BOUND_MS, "run");
    const out = rc.stdout + rc.stderr;
    assert.equal(rc.code, firstSessionExit(c), out);
    assert.equal(count(out, /is locked by another process/), 1, out);
    assert.equal(count(out, /takes writes again/), 1, out);
    assert.doesNotMatch(out, /SqliteError|\n\s+at /, "no stack trace");
    assertBooksTrue(c);
  } finally {
    c.cleanup();
  }
});

test("coordinate (WAL, the default here): the same reader blocks nothing — chunks complete while it holds its transaction", async () => {
  const c = new Campaign({ extra: distributedTable() });
  try {
    const { coord, workers } = await sweepWithWorkers(c, 120);
    let before = 0;
    let during = 0;
    await holdReader(c, 6_000, async () => {
      before = completeChunks(c);
      await new Promise((r) => setTimeout(r, 5_000));
      during = completeChunks(c);
    });
    assert.ok(during > before, `chunks completed while the reader held its transaction (${before} -> ${during})`);
    coord.child.kill("SIGINT");
    const rc = await finished(coord, BOUND_MS, "the coordinator");
    const out = rc.stdout + rc.stderr;
    assert.doesNotMatch(out, /is locked by another process/);
    for (const w of workers) assert.equal((await finished(w, BOUND_MS, "a worker")).code, 0);
    assertBooksTrue(c);
  } finally {
    c.cleanup();
  }
});

for (const command of ["coordinate", "run"] as const) {
  test(`${command} (TRUNCATE): a store blocked past give_up_minutes ends the session with one line, exit 4 and true books`, async () => {
    const c = new Campaign({ extra: (command === "coordinate" ? distributedTable() : "") + TRUNCATE + "give_up_minutes = 0.05\n" });
    try {
      let session: Running;
      if (command === "coordinate") session = (await sweepWithWorkers(c, 60)).coord;
      else {
        session = start(c, ["run", "--for", "60s", "--yes"]);
        await waitFor("a complete chunk", () => (completeChunks(c) >= 1 ? true : undefined), 60_000);
      }
      const startedAt = Date.now();
      let rc!: Awaited<Running["result"]>;
      // Held until the session has given up (it must, within the bound asserted below).
      await holdReader(c, 0, async () => {
        rc = await finished(session, BOUND_MS, command);
      });
      const waited = (Date.now() - startedAt) / 1000;
      const out = rc.stdout + rc.stderr;
      assert.equal(rc.code, 4, out);
      assert.ok(waited < 20, `it gave up within the bound (${waited.toFixed(1)} s)\n${out}`);
      assert.match(rc.stderr, /^fuzzfleet: the store .* is locked by another process .* for \d+s; giving up\..*give_up_minutes/m);
      assert.doesNotMatch(out, /SqliteError|\n\s+at /, "no stack trace");
      assertBooksTrue(c);
      const status = c.cli(["status"]);
      assert.equal(status.code, 0, status.stdout + status.stderr);
    } finally {
      c.cleanup();
    }
  });
}
