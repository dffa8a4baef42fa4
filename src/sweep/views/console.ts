// What a sweep prints while it runs: one line when a chunk starts, one when it lands, and on a
// terminal a live view of a few lines redrawn in place every second: the chunk in hand with its
// progress (elapsed against the chunk's expected time, finds counted as they appear in its
// failures/), the session's rate and finds, the time left. Without a terminal the plain lines
// are written, plus one concise status line every `statusEverySeconds`, so logs stay free of
// cursor escape codes. Lines
// carry text from workers and generators (abort reasons, malformed entries), so every line goes
// through printable(): only the live redraw writes escape codes.
import { printable } from "../../core/log-lines.ts";
import { formatDuration } from "../../config/duration.ts";
import { clock, counted, formatInt } from "../../config/format.ts";
import type { LiveRedraw } from "../../ui/live-redraw.ts";
import type { Assignment, EngineEvents, InFlight, WorkerView } from "../engine/sweep-engine.ts";
import type { MinimizeInFlight } from "../engine/sweep-types.ts";
import type { IngestResult } from "../generator/ingest.ts";
import { isPlantedReason } from "../generator/quarantine-reasons.ts";

/** The longest line written; a reason from outside is cut to REASON_MAX_CHARS before that. */
const LINE_MAX_CHARS = 2000;
const REASON_MAX_CHARS = 300;

export interface ConsoleOptions {
  /** Draw the live status line with this (only when stdout is a terminal); null = plain lines only. */
  live: LiveRedraw | null;
  write?: (line: string) => void;
  /** Seconds left in the session, for the live line. */
  remaining: () => number;
  /** Whether to name the worker on each line (distributed). */
  showWorker?: boolean;
  /** The generator quarantines on purpose (the demo): the count is shown without the alarm's capitals. */
  quarantineExpected?: boolean;
  /** Finds of a running chunk so far (its failures/ entries), or null when unknown. */
  chunkFinds?: (a: { scratchDir: string }) => number | null;
  /** Without a terminal: one status line this often (seconds); 0 or absent = none. */
  statusEverySeconds?: number;
  /**
   * What the live view shows in place of the chunk in hand: a coordinator's workers and chunks in
   * flight (many at once), redrawn every second under the session line.
   */
  view?: () => string[];
  /** What the status line says in place of the chunk in hand (a coordinator: its workers and chunks in flight). */
  glance?: () => string;
}

/** The width of the live view's progress bar, in cells. */
const BAR_CELLS = 24;

export class SweepConsole implements EngineEvents {
  private readonly write: (line: string) => void;
  /**
   * The chunk in hand; `expectedSeconds` is its seeds at the lane's rate when it started (the
   * engine sized it from that rate), null for a lane's first chunk, which has no rate yet. Not
   * `targetSeconds`: that is the chunk length cut to the time left, an upper bound, and a chunk
   * sized from bootstrap seeds or capped growth ends long before it.
   */
  private current: { assignment: Assignment; startedMs: number; expectedSeconds: number | null; rate: number | null } | null = null;
  private finds = 0;
  private newFailures = 0;
  private seeds = 0;
  private readonly startedMs = Date.now();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly o: ConsoleOptions) {
    this.write = o.write ?? ((line) => process.stdout.write(line + "\n"));
    if (o.live) {
      this.timer = setInterval(() => this.redraw(), 1000);
      this.timer.unref();
    } else if ((o.statusEverySeconds ?? 0) > 0) {
      this.timer = setInterval(() => this.write(printable(this.statusLine(), { max: LINE_MAX_CHARS })), o.statusEverySeconds! * 1000);
      this.timer.unref();
    }
  }

  /** Prints a line above the live status; outside text in it is escaped, a newline included. */
  line(text: string): void {
    this.o.live?.clear();
    this.write(printable(text, { max: LINE_MAX_CHARS }));
    this.redraw();
  }

  /** Prints fuzzfleet's own multi-line text (a live report, a blank line before a notice): one line() per line. */
  lines(text: string): void {
    for (const l of text.replace(/\n$/, "").split("\n")) this.line(l);
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.o.live?.clear();
  }

  chunkStarted(a: Assignment, worker: WorkerView, remainingSeconds: number): void {
    const rate = worker.rates.get(a.lane) ?? null;
    const n = a.seedTo - a.seedFrom + 1;
    const expectedSeconds = rate !== null && rate > 0 ? Math.max(1, Math.min(a.targetSeconds, n / rate)) : null;
    this.current = { assignment: a, startedMs: Date.now(), expectedSeconds, rate: rate !== null && rate > 0 ? rate : null };
    const to = this.o.showWorker ? `  -> ${worker.label}` : "";
    this.line(
      `[${clock()}] ${a.lane.padEnd(16)} seeds ${formatInt(a.seedFrom)}..${formatInt(a.seedTo)} (n=${formatInt(
        a.seedTo - a.seedFrom + 1,
      )})${to}  ${formatDuration(Math.max(0, remainingSeconds))} left`,
    );
  }

  chunkRecorded(f: InFlight, worker: WorkerView, r: IngestResult, seconds: number, rate: number, clean: number): void {
    this.finds += r.finds;
    this.newFailures += r.newFailures;
    this.seeds += f.seedTo - f.seedFrom + 1;
    this.current = null;
    const parts = [`${formatInt(clean)} clean`];
    if (r.finds > 0) parts.push(`${counted(r.finds, "find")}, ${formatInt(r.newFailures)} new`);
    if (r.reopened > 0) parts.push(`${formatInt(r.reopened)} reopened`);
    if (r.unshrunk > 0) parts.push(`${formatInt(r.unshrunk)} unshrunk`);
    if (r.quarantine > 0) {
      // Capitals only for what may be a generator bug: not an inconclusive test, nor one invalid on purpose.
      const alarm = !this.o.quarantineExpected && (r.quarantineReasons.length === 0 || r.quarantineReasons.some((g) => !g.inconclusive && !isPlantedReason(g.reason)));
      parts.push(`${formatInt(r.quarantine)} ${alarm ? "QUARANTINE" : "quarantined"}`);
    }
    if (r.malformed.length > 0) parts.push(`${formatInt(r.malformed.length)} MALFORMED (kept in ${r.malformed[0]!.keptAt})`);
    // On a coordinator lines of many workers interleave: each names its chunk, lane and range.
    const which = this.o.showWorker ? `chunk ${f.chunkId} ${f.lane} ${formatInt(f.seedFrom)}..${formatInt(f.seedTo)}: ` : "";
    const from = this.o.showWorker ? ` from ${worker.label}` : "";
    this.line(`       ${which}${parts.join(", ")} in ${formatDuration(seconds)} (${rate.toFixed(1)} seeds/s)${from}`);
    for (const m of r.malformed) this.line(`       malformed failure entry ${printable(m.entry, { max: 255 })}: ${printable(m.reason, { max: REASON_MAX_CHARS })}`);
  }

  /**
   * A minimize unit booked: a line only when it changed what a failure is (a new distinct failure,
   * a fixed one reopened: old pending finds of a bug resweep closed reopen it here, not on a chunk
   * line) or the minimizer failed; a unit that merged its finds into open failures stays quiet.
   */
  minimizeRecorded(u: MinimizeInFlight, r: { merged: number; newFailures: number; failed: number; reopened: number; aborted: string | null }, seconds: number): void {
    if (r.newFailures === 0 && r.reopened === 0 && r.failed === 0) return;
    const parts = [`${formatInt(r.merged)} merged`];
    if (r.newFailures > 0) parts.push(`${formatInt(r.newFailures)} new`);
    if (r.reopened > 0) parts.push(`${formatInt(r.reopened)} reopened`);
    if (r.failed > 0) parts.push(`${formatInt(r.failed)} could not be minimized${r.aborted ? ` (${printable(r.aborted, { max: REASON_MAX_CHARS })})` : ""}`);
    const from = this.o.showWorker ? ` from ${u.worker.label}` : "";
    this.line(`[${clock()}] minimized ${u.lane} finds (unit ${u.unitId}): ${parts.join(", ")} in ${formatDuration(seconds)}${from}`);
  }

  chunkAborted(f: InFlight, worker: WorkerView, why: string, seconds: number, logKept: boolean): void {
    this.current = null;
    const on = this.o.showWorker ? ` on ${worker.label}` : "";
    const range = this.o.showWorker ? ` (${f.lane} ${formatInt(f.seedFrom)}..${formatInt(f.seedTo)})` : "";
    this.line(`       chunk ${f.chunkId}${range} aborted${on} (${printable(why, { max: REASON_MAX_CHARS })}) after ${formatDuration(seconds)} — range will be re-swept`);
    if (logKept) this.line(`       see ${f.logPath}`);
  }

  laneDisabled(lane: string, worker: WorkerView, why: string): void {
    const scope = this.o.showWorker ? `worker ${worker.label} stops taking lane '${lane}'` : `lane '${lane}' disabled`;
    this.line(`       ${scope} for the rest of this session: ${printable(why, { max: REASON_MAX_CHARS })}`);
  }

  laneExhausted(lane: string, lastSeed: number): void {
    this.line(`       lane '${lane}' is exhausted: every seed up to ${formatInt(lastSeed)}, the last one counted exactly, is covered; it gets no more chunks`);
  }

  chunkReissued(f: InFlight, why: string): void {
    this.line(`[${clock()}] chunk ${f.chunkId} (${f.lane} ${formatInt(f.seedFrom)}..${formatInt(f.seedTo)}) reissued: ${printable(why, { max: REASON_MAX_CHARS })}`);
  }

  /** The chunk in hand: its range, elapsed against expected (when the lane has a rate), finds so far. */
  private chunkProgress(): { text: string; fraction: number | null } | null {
    if (!this.current) return null;
    const { assignment: a, expectedSeconds: expected } = this.current;
    const elapsed = (Date.now() - this.current.startedMs) / 1000;
    const finds = this.o.chunkFinds?.(a) ?? null;
    const range = `${a.lane} ${formatInt(a.seedFrom)}..${formatInt(a.seedTo)}`;
    const tail = `finds so far ${finds === null ? "?" : formatInt(finds)}`;
    if (expected === null) {
      return { fraction: null, text: `${range}  ${formatDuration(Math.round(elapsed))}, the lane's first chunk: no rate to expect a time from yet  ${tail}` };
    }
    const fraction = Math.min(1, elapsed / expected);
    const over = elapsed > expected ? `, ${formatDuration(Math.round(elapsed - expected))} over` : "";
    return { fraction, text: `${range}  ${Math.round(fraction * 100)}% of ~${formatDuration(Math.round(expected))} expected (${formatDuration(Math.round(elapsed))}${over})  ${tail}` };
  }

  private sessionText(): string {
    const left = `${formatDuration(Math.max(0, this.o.remaining()))} left`;
    const finds = `finds ${formatInt(this.finds)} (${formatInt(this.newFailures)} new)`;
    if (this.seeds === 0 && this.current) {
      // Nothing landed yet: a session rate would read 0 for the whole first chunk.
      const r = this.current.rate;
      return `first chunk running${r !== null ? ` (~${r.toFixed(1)} seeds/s expected from the lane's last rate)` : ", no rate yet"} | ${finds} | ${left}`;
    }
    const elapsed = Math.max(1, (Date.now() - this.startedMs) / 1000);
    return `${(this.seeds / elapsed).toFixed(1)} seeds/s | ${formatInt(this.seeds)} seeds | ${finds} | ${left}`;
  }

  /** The concise line written every few seconds without a terminal. */
  statusLine(): string {
    const chunk = this.chunkProgress();
    const what = this.o.glance ? this.o.glance() : chunk ? chunk.text : "between chunks";
    return `[${clock()}] status: ${what} | ${this.sessionText()}`;
  }

  private redraw(): void {
    if (!this.o.live) return;
    if (this.o.view) {
      this.o.live([`  session  ${this.sessionText()}`, ...this.o.view()].join("\n"));
      return;
    }
    const chunk = this.chunkProgress();
    // No expected time, no bar: a bar scaled to a guess would lie about how far the chunk is.
    const bar = chunk && chunk.fraction !== null ? `[${"#".repeat(Math.round(chunk.fraction * BAR_CELLS))}${".".repeat(BAR_CELLS - Math.round(chunk.fraction * BAR_CELLS))}] ` : "";
    this.o.live(
      [
        `  chunk    ${chunk ? `${bar}${chunk.text}` : "between chunks"}`,
        `  session  ${this.sessionText()}`,
      ].join("\n"),
    );
  }
}
