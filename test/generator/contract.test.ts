// The generator contract's promises a run that exited 0 or 1 can still break, and the one line of
// a broken run's log worth showing.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { contractBreach, meaningfulLine, outputTail } from "../../src/sweep/generator/contract.ts";

const root = mkdtempSync(join(tmpdir(), "fuzzfleet-contract-"));
after(() => rmSync(root, { recursive: true, force: true }));

test("contractBreach: exit 1 needs a valid failure entry, and results may not account for more tests than seeds", () => {
  const run = { exitCode: 0, seeds: 10, finds: 0, quarantine: 0, malformed: 0 };
  assert.equal(contractBreach(run), null, "exit 0 and nothing written: a clean chunk");
  assert.equal(contractBreach({ ...run, exitCode: 1, finds: 2 }), null);
  assert.equal(contractBreach({ ...run, exitCode: 0, finds: 2 }), null, "exit 0 with finds: ingested as before (0 and 1 are not cross-checked that way)");
  assert.equal(contractBreach({ ...run, exitCode: 1 }), 'the generator exited 1 ("finds") but wrote no failure entry');
  assert.equal(contractBreach({ ...run, exitCode: 1, malformed: 3 }), 'the generator exited 1 ("finds") but wrote no valid failure entry (3 malformed)');
  assert.equal(contractBreach({ ...run, exitCode: 1, finds: 6, quarantine: 4 }), null, "every seed accounted for once");
  assert.equal(
    contractBreach({ ...run, exitCode: 1, finds: 6, quarantine: 4, malformed: 1 }),
    "the generator reported 11 tests (6 finds, 4 quarantined, 1 malformed) for a chunk of 10 seeds",
  );
});

test("meaningfulLine picks the error, not Node's version banner, a stack frame or a brace", () => {
  const node = `node:internal/modules/cjs/loader:1210
  throw err;
  ^

Error: Cannot find module '/c/plantd.mjs'
    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)
    at node:internal/main/run_main_module:28:49 {
  code: 'MODULE_NOT_FOUND',
  requireStack: []
}

Node.js v20.20.2
`;
  assert.equal(meaningfulLine(node), "Error: Cannot find module '/c/plantd.mjs'");
  const python = `Traceback (most recent call last):
  File "/c/gen.py", line 3, in <module>
    import numpyy
ModuleNotFoundError: No module named 'numpyy'
`;
  assert.equal(meaningfulLine(python), "ModuleNotFoundError: No module named 'numpyy'");
  assert.equal(meaningfulLine("generating 40 seeds\nsweeping\n\n"), "sweeping", "without an error line, the last line that says something");
  assert.equal(meaningfulLine("\n\n"), null);
  assert.equal(meaningfulLine(`error: ${"x".repeat(1000)}`)!.length, 240, "a long line is cut");
});

test("outputTail reads the end of a long log, and nothing through a symlink or from a FIFO", () => {
  const out = join(root, "out");
  mkdirSync(join(out, "tmp"), { recursive: true });
  const log = join(out, "tmp", "chunk-1.log");
  writeFileSync(log, "noise\n".repeat(100_000) + "Error: the real reason\n");
  assert.equal(outputTail(out, log), "Error: the real reason");
  const secret = join(root, "secret.txt");
  writeFileSync(secret, "Error: outside the campaign\n");
  symlinkSync(secret, join(out, "tmp", "chunk-2.log"));
  assert.equal(outputTail(out, join(out, "tmp", "chunk-2.log")), null);
  assert.equal(outputTail(out, join(out, "tmp", "chunk-3.log")), null, "no log");
  execFileSync("mkfifo", [join(out, "tmp", "chunk-4.log")]);
  assert.equal(outputTail(out, join(out, "tmp", "chunk-4.log")), null, "a FIFO is refused at once, never waited on");
});
