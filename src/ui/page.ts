// The dashboard page: its HTML, style and script, kept as strings so they ship inside the
// compiled package with nothing to copy or fetch. The script renders one snapshot (source.ts)
// at a time: from `/events` on a live dashboard, or from the JSON embedded in a static report.
// Text from the campaign (lane names, buckets, messages, reports) is only ever set as
// textContent, never parsed as HTML.
import { CLIENT_JS } from "./client.ts";
import type { DashboardSnapshot, FailureDetail } from "./source.ts";

export { CLIENT_JS };

export const PAGE_CSS = `
:root { color-scheme: light; --fg: #1d2330; --muted: #667085; --line: #d0d5dd; --prefix: #2e7d32; --ahead: #f9a825; --flight: #1565c0; }
body { font: 14px/1.4 system-ui, sans-serif; color: var(--fg); margin: 0 auto; max-width: 1200px; padding: 12px 20px; }
h1 { font-size: 18px; margin: 4px 0; } h2 { font-size: 15px; margin: 18px 0 6px; border-bottom: 1px solid var(--line); }
.muted { color: var(--muted); } .na { color: var(--muted); font-style: italic; }
#status { display: flex; gap: 18px; flex-wrap: wrap; } #status span b { font-variant-numeric: tabular-nums; }
.lane { margin: 6px 0; } .lane .name { font-weight: 600; }
.bar { position: relative; height: 14px; background: #f2f4f7; border: 1px solid var(--line); margin-top: 2px; }
.bar div { position: absolute; top: 0; bottom: 0; }
.bar .prefix { background: var(--prefix); left: 0; } .bar .ahead { background: var(--ahead); } .bar .flight { background: var(--flight); opacity: .7; }
.charts { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; } .chart h3 { font-size: 13px; margin: 4px 0; }
table { border-collapse: collapse; width: 100%; } th, td { text-align: left; padding: 3px 6px; border-bottom: 1px solid #eaecf0; font-variant-numeric: tabular-nums; }
#failures tbody tr { cursor: pointer; } #failures tbody tr:hover { background: #f5f8ff; }
#detail { white-space: pre-wrap; background: #f8f9fb; border: 1px solid var(--line); padding: 8px; max-height: 360px; overflow: auto; font: 12px/1.35 ui-monospace, monospace; }
#detail:empty { display: none; }
.frontier { display: flex; height: 18px; border: 1px solid var(--line); margin: 4px 0; background: #f2f4f7; }
.frontier div { height: 100%; } .f-pending { background: #f9a825; } .f-running { background: #1565c0; } .f-leased { background: #90caf9; } .f-committing { background: #6a1b9a; } .f-expired { background: #c62828; } .f-done { background: #2e7d32; }
.worker { margin: 2px 0; } .live-alive { color: #2e7d32; } .live-slow { color: #ef6c00; } .live-lost { color: #c62828; font-weight: 600; } .live-left { color: var(--muted); }
.hidden { display: none; }
#findings tbody tr { cursor: pointer; } #findings tbody tr:hover { background: #f5f8ff; }
`;

export interface PageOptions {
  title: string;
  /** A static report: the snapshot (and failure details) embedded, uPlot inlined; null = the live page. */
  embedded: { snapshot: DashboardSnapshot; details: FailureDetail[]; uplotJs: string; uplotCss: string } | null;
}

/** JSON inside a <script> element: nothing in it may close the element or open a comment. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, "\\u003c").replace(/>/g, "\\u003e").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
}

function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

export function pageHtml(o: PageOptions): string {
  const e = o.embedded;
  const head = e
    ? `<style>${e.uplotCss.replace(/<\//g, "<\\/")}</style><style>${PAGE_CSS}</style>`
    : `<link rel="stylesheet" href="/vendor/uPlot.min.css"><link rel="stylesheet" href="/app.css">`;
  const scripts = e
    ? `<script>${e.uplotJs.replace(/<\/script/gi, "<\\/script")}</script>` +
      `<script id="embedded" type="application/json">${scriptJson({ snapshot: e.snapshot, details: e.details })}</script>` +
      `<script>${CLIENT_JS}</script>`
    : `<script src="/vendor/uPlot.iife.min.js"></script><script src="/app.js"></script>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><title>${escapeHtml(o.title)}</title>${head}</head>
<body>
<h1 id="title">${escapeHtml(o.title)}</h1>
<div id="status"><span id="headline" class="muted">waiting for the first update…</span>
<span>elapsed <b id="elapsed">–</b></span><span>budget <b id="budget">–</b></span><span>updated <b id="updated">–</b></span><span id="mode" class="muted"></span></div>
<section id="sweep-view">
<h2>Totals</h2><div id="totals"></div>
<h2>Lanes <span class="muted">(green: the covered prefix from base_seed to cursor; yellow: done ahead, not yet coverage; blue: in flight)</span></h2><div id="lanes"></div>
<div class="charts"><div class="chart"><h3>seeds/s per lane and in total</h3><div id="rate-chart"></div></div>
<div class="chart"><h3>finds and distinct failures</h3><div id="finds-chart"></div><div id="discovery" class="muted"></div></div></div>
<h2>Failures <span class="muted">(click a row for its report and repro line)</span></h2>
<table id="failures"><thead><tr><th>#</th><th>signature</th><th>lane</th><th>state</th><th>hits</th><th>first seed</th><th>first seen</th><th>last seen</th></tr></thead><tbody></tbody></table>
</section>
<section id="explore-view">
<h2>Frontier <span class="muted">(pending and running: this master; leased, committing, expired, done: the lease records of the whole fleet)</span></h2><div id="frontier"></div>
<div id="explore-totals"></div><div id="idle"></div>
<div class="charts"><div class="chart"><h3>executions/s</h3><div id="exec-chart"></div></div>
<div class="chart"><h3>unique and generated inputs</h3><div id="growth-chart"></div></div>
<div class="chart"><h3>redundancy (share of children that were not new)</h3><div id="redundancy-chart"></div></div></div>
<h2>Findings by signature <span class="muted">(click a row for an input's output and repro line)</span></h2>
<table id="findings"><thead><tr><th>#</th><th>signature</th><th>kind</th><th>inputs</th><th>times seen</th><th>first seen</th><th>last seen</th><th>example input</th></tr></thead><tbody></tbody></table>
<h2>Masters</h2><div id="masters"></div>
</section>
<div id="detail"></div>
<h2>Workers</h2><div id="workers"></div>
<section id="sessions-view">
<h2>Sessions</h2>
<table id="sessions"><thead><tr><th>#</th><th>mode</th><th>status</th><th>started</th><th>ended</th><th>budget</th><th>host</th></tr></thead><tbody></tbody></table>
</section>
${scripts}
</body></html>
`;
}
