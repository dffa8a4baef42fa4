// What `explore` shows while it runs, from the same snapshot as its dashboard
// (explore/views/dashboard-source.ts): on a terminal, an AFL-style view of a few lines redrawn in
// place every second (the frontier with a bar, the rates, growth and redundancy, findings, the
// masters and their phase, the workers at a glance, the idle window counting down), with the
// master's log lines scrolling above it; without a terminal, no escape code at all: the log lines
// and one concise status line every `statusEverySeconds`. Text from outside (signatures, phases
// naming hosts) goes through printable(), and every line is cut to the terminal's width.
import { printable } from "../../core/log-lines.ts";
import { formatDuration } from "../../config/duration.ts";
import { clock, formatInt } from "../../config/format.ts";
import type { DashboardSnapshot, ExploreView, WorkerRow } from "../../ui/source.ts";
import type { LiveRedraw } from "../../ui/live-redraw.ts";

const BAR_CELLS = 30;
const LINE_MAX_CHARS = 2000;

export interface ExploreConsoleOptions {
  /** The campaign now (an ExploreDashboardSource's snapshot). */
  snapshot: () => DashboardSnapshot;
  /** Redraw the view with this (only on a terminal); null = plain lines only. */
  live: LiveRedraw | null;
  write?: (line: string) => void;
  /** Without a terminal: one status line this often (seconds); 0 or absent = none. */
  statusEverySeconds?: number;
  /** The terminal's width in columns (default 100). */
  columns?: () => number;
}

const n = (x: number | null | undefined) => (x === null || x === undefined ? "–" : formatInt(x));
const r1 = (x: number | null) => (x === null ? "–" : x.toFixed(1));

function plural(count: number, one: string, many = `${one}s`): string {
  return `${formatInt(count)} ${count === 1 ? one : many}`;
}

function workersAtAGlance(rows: readonly WorkerRow[]): string {
  const local = rows.filter((w) => w.label.startsWith("local-"));
  const remote = rows.filter((w) => !w.label.startsWith("local-"));
  const parts: string[] = [];
  if (local.length) parts.push(`${formatInt(local.length)} local (${formatInt(local.filter((w) => w.holding.length > 0).length)} busy)`);
  if (remote.length) {
    const by = (l: WorkerRow["liveness"]) => remote.filter((w) => w.liveness === l).length;
    const counts = (["alive", "slow", "lost", "left"] as const).filter((l) => by(l) > 0).map((l) => `${formatInt(by(l))} ${l}`);
    parts.push(`${formatInt(remote.length)} remote: ${counts.join(", ")}`);
  }
  return parts.length ? parts.join(" │ ") : "none";
}

function redundancyText(v: ExploreView): string {
  const { generated, redundant } = v.totals;
  return generated && redundant !== null ? ` (${((100 * redundant) / generated).toFixed(1)}%)` : "";
}

/** A window such as 1.5 s keeps its fraction; longer ones read as durations. */
function windowText(seconds: number): string {
  return seconds < 60 ? `${seconds}s` : formatDuration(seconds);
}

function idleText(v: ExploreView): string | null {
  if (v.idle) {
    return v.idle.remainingSeconds === null
      ? `window ${windowText(v.idle.windowSeconds)}, not counting: work in sight`
      : `ends in ${v.idle.remainingSeconds.toFixed(1)}s of ${windowText(v.idle.windowSeconds)} unless work appears`;
  }
  return null;
}

/** The view as lines (no escape codes), each cut to `columns`. */
export function renderExploreView(s: DashboardSnapshot, columns = 100): string[] {
  const v = s.explore;
  if (!v) return [printable(s.status.headline, { max: LINE_MAX_CHARS }).slice(0, Math.max(20, columns))];
  const f = v.frontier;
  // Pending and running tasks are leased records too; the lease counts may be a few seconds old.
  const known = Math.max(f.leased, (f.pending ?? 0) + (f.running ?? 0)) + f.committing + f.expired + f.done;
  const filled = known > 0 ? Math.round((BAR_CELLS * f.done) / known) : 0;
  const budget = s.status.budgetSeconds === null ? "" : ` of ${formatDuration(s.status.budgetSeconds)}`;
  const elapsed = s.status.elapsedSeconds === null ? "" : ` ── ${formatDuration(Math.floor(s.status.elapsedSeconds))}${budget}`;
  const top = v.findings[0];
  const lines = [
    `fuzzfleet explore ── ${v.epoch ? `epoch ${v.epoch.slice(0, 12)}… ` : ""}${v.role}${elapsed}`,
    `  frontier  pending ${n(f.pending)} │ running ${n(f.running)} │ leased ${n(f.leased)} │ committing ${n(f.committing)} │ expired ${n(f.expired)} │ done ${n(f.done)}`,
    `            [${"#".repeat(filled)}${".".repeat(BAR_CELLS - filled)}] ${n(f.done)} done of ${n(known)} known${f.inputBacklog ? `, ${n(f.inputBacklog)} input file(s) to admit` : ""}`,
    `  rates     ${r1(v.rates.executionsPerSecond)} exec/s │ ${r1(v.rates.generatedPerSecond)} generated/s`,
    // The final statistics' names for the same counts (src/explore/command/stats.ts).
    `  growth    ${n(v.totals.executions)} analysis observations │ ${n(v.totals.generated)} test cases generated │ ${n(v.totals.unique)} unique │ ${n(v.totals.redundant)} redundant children${redundancyText(v)} │ corpus ${n(v.totals.corpus)}`,
    `  findings  ${plural(v.findingsTotal.crashes, "crash", "crashes")}, ${plural(v.findingsTotal.hangs, "hang")} under ${plural(v.findingsTotal.signatures, "signature")}${
      top ? ` — top: ${top.signature} (x${formatInt(top.inputs)})` : ""
    }`,
    `  masters   ${v.masters.map((m) => `r${m.rank}${m.self ? "*" : ""} ${m.phase}`).join(" │ ") || "–"}`,
    `  workers   ${workersAtAGlance(s.workers ?? [])}`,
  ];
  const idle = idleText(v);
  if (idle) lines.push(`  idle      ${idle}`);
  if (v.wall?.remainingSeconds !== null && v.wall?.remainingSeconds !== undefined) lines.push(`  wall      ${formatDuration(Math.ceil(v.wall.remainingSeconds))} left of ${formatDuration(v.wall.budgetSeconds)}`);
  const width = Math.max(20, columns);
  return lines.map((l) => {
    const text = printable(l, { max: LINE_MAX_CHARS });
    return text.length > width ? `${text.slice(0, width - 1)}…` : text;
  });
}

/** The one line written every few seconds without a terminal. */
export function exploreStatusLine(s: DashboardSnapshot, at: Date = new Date()): string {
  const v = s.explore;
  if (!v) return `[${clock(at)}] status: ${s.status.headline}`;
  const f = v.frontier;
  const idle = v.idle?.remainingSeconds !== null && v.idle?.remainingSeconds !== undefined ? ` | idle window ${v.idle.remainingSeconds.toFixed(1)}s left` : "";
  return printable(
    `[${clock(at)}] status: done ${n(f.done)}, pending ${n(f.pending)}, running ${n(f.running)} | ${r1(v.rates.executionsPerSecond)} exec/s | ` +
      `${n(v.totals.unique)} unique of ${n(v.totals.generated)} generated${redundancyText(v)} | findings ${n(v.findingsTotal.inputs)} (${n(v.findingsTotal.signatures)} signatures) | ` +
      `workers ${workersAtAGlance(s.workers ?? [])}${idle}`,
    { max: LINE_MAX_CHARS },
  );
}

export class ExploreConsole {
  private readonly write: (line: string) => void;
  private timer: NodeJS.Timeout | null = null;
  /** The view as last drawn: a log line redraws it as it was, without taking a new snapshot. */
  private shown: string | null = null;

  constructor(private readonly o: ExploreConsoleOptions) {
    this.write = o.write ?? ((line) => process.stdout.write(line + "\n"));
    if (o.live) {
      this.timer = setInterval(() => this.redraw(), 1000);
      this.timer.unref();
    } else if ((o.statusEverySeconds ?? 0) > 0) {
      this.timer = setInterval(() => this.write(exploreStatusLine(this.o.snapshot())), o.statusEverySeconds! * 1000);
      this.timer.unref();
    }
  }

  /** A log line above the view (escaped: it may carry a target's or a worker's text). */
  line(text: string): void {
    this.o.live?.clear();
    this.write(printable(text, { max: LINE_MAX_CHARS }));
    if (this.o.live && this.timer) {
      if (this.shown === null) this.redraw();
      else this.o.live(this.shown);
    }
  }

  /** Stops the redraws and erases the view, so the final statistics are printed on a clean screen. */
  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.o.live?.clear();
  }

  redraw(): void {
    if (!this.o.live || !this.timer) return;
    let text: string;
    try {
      text = renderExploreView(this.o.snapshot(), this.o.columns?.() ?? 100).join("\n");
    } catch (err) {
      text = `  (the live view could not be drawn: ${printable((err as Error).message, { max: 200 })})`;
    }
    this.shown = text;
    this.o.live(text);
  }
}
