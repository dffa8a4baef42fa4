// The Prometheus text exposition format (version 0.0.4), written by hand: a campaign's metrics
// are a few gauges and counters recomputed once per scrape, which needs no client library.
// Rules kept here: metric and label names match the format's grammar (checked, so a bad name
// is a bug found at once, not a scrape a server rejects); label values and help text are
// escaped; each family is written once, with its HELP and TYPE lines before its samples.
import assert from "node:assert/strict";

export type MetricType = "counter" | "gauge";

export interface Sample {
  labels?: Readonly<Record<string, string>>;
  value: number;
}

export interface MetricFamily {
  /** Counters end in `_total`; a unit is part of the name (`_seconds`, `_seeds`). */
  name: string;
  help: string;
  type: MetricType;
  samples: readonly Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

function escapeHelp(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

function escapeLabelValue(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

/** The families as one scrape body. */
export function writeMetrics(families: readonly MetricFamily[]): string {
  const out: string[] = [];
  const seen = new Set<string>();
  for (const f of families) {
    assert.ok(METRIC_NAME.test(f.name), `metric name '${f.name}' is not valid in the text format`);
    assert.ok(!seen.has(f.name), `metric family '${f.name}' written twice`);
    assert.ok(f.type !== "counter" || f.name.endsWith("_total"), `counter '${f.name}' must end in _total`);
    seen.add(f.name);
    out.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`);
    for (const s of f.samples) {
      const labels = Object.entries(s.labels ?? {});
      for (const [k] of labels) assert.ok(LABEL_NAME.test(k) && !k.startsWith("__"), `label name '${k}' is not valid`);
      const body = labels.length ? `{${labels.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(",")}}` : "";
      out.push(`${f.name}${body} ${formatValue(s.value)}`);
    }
  }
  return out.join("\n") + "\n";
}
