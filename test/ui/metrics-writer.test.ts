// The text-format writer: escaping of label values and help, and the rules it enforces on names.
import assert from "node:assert/strict";
import { test } from "node:test";
import { writeMetrics } from "../../src/ui/metrics.ts";
import { parseExposition } from "./exposition.ts";

test("label values and help with quotes, backslashes and newlines survive a strict parse", () => {
  const worker = 'vm "7"\\a\nb';
  const text = writeMetrics([
    { name: "x_chunks_total", help: "line one\nback\\slash", type: "counter", samples: [{ labels: { worker }, value: 3 }] },
    { name: "x_rate_seconds", help: "h", type: "gauge", samples: [{ value: 0.25 }, { labels: { lane: "a" }, value: NaN }] },
  ]);
  const fams = parseExposition(text);
  assert.deepEqual(fams.get("x_chunks_total")!.samples, [{ labels: { worker }, value: 3 }]);
  assert.equal(fams.get("x_chunks_total")!.help, "line one\nback\\slash");
  assert.deepEqual(fams.get("x_rate_seconds")!.samples.map((s) => s.value), [0.25, NaN]);
});

test("a counter not ending in _total, a bad name or a family written twice is refused", () => {
  assert.throws(() => writeMetrics([{ name: "x_chunks", help: "h", type: "counter", samples: [] }]), /must end in _total/);
  assert.throws(() => writeMetrics([{ name: "x-y", help: "h", type: "gauge", samples: [] }]), /not valid/);
  assert.throws(() => writeMetrics([{ name: "x", help: "h", type: "gauge", samples: [{ labels: { "bad-label": "v" }, value: 1 }] }]), /label name/);
  const f = { name: "x", help: "h", type: "gauge" as const, samples: [] };
  assert.throws(() => writeMetrics([f, f]), /written twice/);
});
