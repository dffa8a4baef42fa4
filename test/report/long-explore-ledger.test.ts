// The explored ledger as the views count it (state/ledger.ts tallyLedger): the lines ledgerLines()
// reads, torn ones left out the same way, counted again only from where the last count stopped
// when the ledger grew, and from its start when the file was replaced.
import assert from "node:assert/strict";
import { appendFileSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ledgerLines, tallyLedger } from "../../src/explore/state/ledger.ts";
import { PinnedDir } from "../../src/files/pinned-dir.ts";

const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-ledger-tally-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const hash = (i: number) => i.toString(16).padStart(64, "0");
const BUILD = "0123456789ab";

test("a ledger is counted as ledgerLines() reads it, then only what was appended, and from the start once replaced", () => {
  // Two mebibytes and more, so that lines straddle the pieces it is read in; both formats of line.
  let text = "";
  for (let i = 0; i < 40_000; i++) text += i % 4 === 0 ? `${hash(i)}\n` : `${hash(i)} ${BUILD}\n`;
  text += `${hash(1).slice(0, 30)}${hash(2)} ${BUILD}\n`; // a torn line another line ran into
  text += `${hash(5)}x${BUILD}\n`; // 77 bytes, but no space before the build
  text += `${hash(7)} 0123`; // torn at the end: not a line (yet)
  writeFileSync(join(dir, "a.log"), text);
  const pin = PinnedDir.openNoFollow(join(dir));
  try {
    const first = tallyLedger(pin, "a.log");
    assert.ok(first);
    assert.equal(first.lines, 40_000);
    assert.equal(first.lines, ledgerLines(pin, "a.log"));
    assert.equal(first.offset, Buffer.byteLength(text));

    // The torn line is completed by the next append: counted once, as a whole line.
    appendFileSync(join(dir, "a.log"), `456789ab\n${hash(9)}\n`);
    const next = tallyLedger(pin, "a.log", first);
    assert.equal(next?.lines, 40_002);
    assert.equal(next?.lines, ledgerLines(pin, "a.log"));

    // A ledger replaced by another file (a new inode) is counted from its start, not from the old offset.
    writeFileSync(join(dir, "b.log"), `${hash(1)} ${BUILD}\n`);
    renameSync(join(dir, "b.log"), join(dir, "a.log"));
    assert.equal(tallyLedger(pin, "a.log", next)?.lines, 1);
    assert.equal(tallyLedger(pin, "missing.log"), null);
  } finally {
    pin.close();
  }
});
