// What a terminal shows after some bytes, for tests of redrawn views: text, CR, LF, cursor up
// and down (CSI n A, CSI n B), to a column (CSI n G), erase in line (CSI K, CSI 2K); private modes (CSI ? …) are
// ignored. Any other escape fails the test, so a view that draws something unexpected is seen.
import assert from "node:assert/strict";

export function screen(bytes: string): string[] {
  const rows: string[] = [""];
  let row = 0;
  let col = 0;
  for (let i = 0; i < bytes.length; i++) {
    const ch = bytes[i]!;
    if (ch === "\x1b") {
      const m = /^\x1b\[(\??)(\d*)([A-Za-z])/.exec(bytes.slice(i, i + 16));
      assert.ok(m, `an escape sequence the model knows at byte ${i}: ${JSON.stringify(bytes.slice(i, i + 10))}`);
      i += m[0].length - 1;
      if (m[1] === "?") continue;
      const count = m[2] === "" ? 1 : Number(m[2]);
      if (m[3] === "A") row = Math.max(0, row - count);
      else if (m[3] === "B") {
        row += count;
        while (rows.length <= row) rows.push("");
      }
      else if (m[3] === "G") col = count - 1;
      else if (m[3] === "K") rows[row] = m[2] === "2" ? "" : rows[row]!.slice(0, col);
      else assert.fail(`unexpected CSI ${m[0]}`);
    } else if (ch === "\r") col = 0;
    else if (ch === "\n") {
      row++;
      col = 0;
      if (row === rows.length) rows.push("");
    } else {
      const line = rows[row]!.padEnd(col);
      rows[row] = line.slice(0, col) + ch + line.slice(col + 1);
      col++;
    }
  }
  return rows.map((l) => l.trimEnd());
}
