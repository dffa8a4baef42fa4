// The final statistics read as one table: every line's value starts in the same column, whatever
// the value is (a count, a rate, a build id, the per-master split).
import assert from "node:assert/strict";
import { test } from "node:test";
import { ExploreDir } from "../helpers/explore.ts";

test("every line of the final statistics has its value in the same column", () => {
  const e = new ExploreDir();
  try {
    const r = e.run(["-j", "1", "--max-idle", "0.2"], ["/bin/true"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const block = r.stdout.slice(r.stdout.indexOf("=== Final statistics ===\n") + "=== Final statistics ===\n".length);
    const lines = block.slice(0, block.indexOf("ended:")).split("\n").filter((l) => /^ {2}[a-z]/.test(l));
    assert.ok(lines.some((l) => l.startsWith("  analysis by master:")), block);
    assert.ok(lines.some((l) => l.startsWith("  target build:")), block);
    for (const line of lines) {
      const m = /^( {2}[a-z][a-z ,]*: +)(\S+)/.exec(line);
      assert.ok(m, `a label and a value: '${line}'`);
      // A value shorter than the 8-character field is right-aligned in it; a longer one starts it.
      const start = m[1]!.length;
      const end = start + m[2]!.length;
      assert.ok((m[2]!.length <= 8 && end === 35) || (m[2]!.length > 8 && start === 27), `'${line}' is out of its column`);
    }
  } finally {
    e.cleanup();
  }
});
