// The worker's side of a session, as a pure state machine: ask for work while slots are free,
// run units in the background, report each one as it finishes, heartbeat what is still running,
// follow drain, and answer the tokenised stop only after the children ended and their scratch
// state is gone. The same for sweep chunks and explore tasks. Events in: the reply to the one
// request outstanding, a request that failed, a unit's report, the end of a pause, Ctrl-C. Actions
// out: the next request, units to run or abort, reports to log, scratch to clean, a pause with
// its deadline, the end with its outcome. The socket, the clock, the children and the log stay
// with the caller (worker/loop.ts).
//
//   working     --drain (a `drain` reply, or an ack saying drain)--> draining
//   working | draining --Ctrl-C--> interrupted (children aborted)
//   working | draining | interrupted --stop {token}--> stopping (children aborted)
//   stopping    --every unit reported, then cleaned--> [stop_ack {token}] --bye--> done (stopped)
//                                                         --anything else--> done (stop-unacknowledged)
//   interrupted --every unit reported--> [bye] --> done (interrupted)
//   any but done --a request failed (closed, timeout, bad frame, refuse)--> lost --every child
//                 ended--> done (lost)
//
// Strictly request -> reply: at most one request is outstanding, so there is no reply matching to
// get wrong. A unit's report and Ctrl-C may come at any time; they take effect at the next
// decision (the caller wakes its pause), except that Ctrl-C aborts the children at once.
import assert from "node:assert/strict";

export type PullState = "working" | "draining" | "interrupted" | "stopping" | "lost" | "done";
export type PullOutcome = "stopped" | "interrupted" | "lost" | "stop-unacknowledged";

/** What the machine reads of a coordinator's reply; the caller's replies carry more. */
export type PullReply =
  | { type: "wait"; seconds: number }
  | { type: "drain"; reason: string }
  | { type: "ack"; drain: boolean; note: string | null }
  | { type: "stop"; token: string }
  | { type: "refuse"; reason: string }
  | { type: "assign" | "task" | "bye" };

export type PullRequest<Report> = { type: "want"; slots: number } | { type: "heartbeat"; ids: number[] } | { type: "bye"; reason: string } | { type: "stop_ack"; token: string } | Report;

export type PullAction<U, Report> =
  /** Send it and feed the reply to replied(), or the failure to lost(). */
  | { kind: "request"; frame: PullRequest<Report> }
  /** Start the unit in the background; its report goes to finished(). */
  | { kind: "run"; unit: U }
  /** End these units' children (each still reports, as interrupted). */
  | { kind: "abort"; ids: number[] }
  /** The coordinator acknowledged the unit's report with `note`. */
  | { kind: "reported"; unit: U; report: Report; note: string }
  /** Remove what the unit left behind (it was stopped before it could finish). */
  | { kind: "cleanup"; unit: U }
  /** A line for the log; it carries the coordinator's text, so the caller makes it printable. */
  | { kind: "say"; line: string }
  /** Sleep until `until` (null: until an event) or until an event, then woke(). */
  | { kind: "pause"; until: number | null }
  | { kind: "end"; outcome: PullOutcome };

export interface PullOptions<U, Reply> {
  slots: number;
  /** How often units in flight are heartbeated. */
  beatMs: number;
  /** The units a reply to `want` carries (an assign, a task), or null. */
  unitsOf(reply: Reply): U[] | null;
  idOf(unit: U): number;
  /** Who hands the units out, as the log lines name it: "the coordinator" (a sweep) or "the master" (explore). */
  peer?: string;
}

/** An idle drained worker polls at least this often, so a stop reaches it promptly. */
const IDLE_DRAINED_POLL_MS = 1000;

type Outstanding =
  | { kind: "want" }
  | { kind: "heartbeat"; pauseMs: number; idleDrained: boolean }
  | { kind: "report"; id: number }
  | { kind: "bye" }
  | { kind: "stop_ack" };

export class PullLoop<U, Report extends { type: string }, Reply extends PullReply> {
  private current: PullState = "working";
  /** Units started and not yet acknowledged, in the order they were started (reports go in that order). */
  private readonly running = new Map<number, { unit: U; report: Report | null }>();
  /** The stop asked of this worker, once one arrives (it is acted on after the reports in hand). */
  private stopToken: string | null = null;
  /** The units the stop aborted: cleaned before the stop_ack. */
  private stopped: U[] = [];
  private lastBeatAt = 0;
  private outstanding: Outstanding | null = null;
  private paused = false;
  private started = false;

  constructor(private readonly o: PullOptions<U, Reply>) {
    assert.ok(Number.isInteger(o.slots) && o.slots >= 1, `slots must be a positive integer, got ${o.slots}`);
    assert.ok(o.beatMs > 0, `beatMs must be > 0, got ${o.beatMs}`);
  }

  private get peer(): string {
    return this.o.peer ?? "the coordinator";
  }

  get state(): PullState {
    return this.current;
  }

  start(now: number): PullAction<U, Report>[] {
    assert.ok(!this.started, "start() twice");
    this.started = true;
    this.lastBeatAt = now;
    return this.decide(now);
  }

  replied(reply: Reply, now: number): PullAction<U, Report>[] {
    const asked = this.outstanding;
    assert.ok(asked !== null, `a reply while ${this.current}, with no request outstanding`);
    this.outstanding = null;
    if (asked.kind === "stop_ack") {
      if (reply.type === "bye") return this.end("stopped", [{ kind: "say", line: "  stop acknowledged" }]);
      return this.end("stop-unacknowledged", [{ kind: "say", line: `  ${this.peer} answered the stop_ack with '${reply.type}'` }]);
    }
    if (reply.type === "refuse") return this.lost(`${this.peer} refused a request: ${reply.reason}`);
    // A stop is remembered whatever it answered; a second one while stopping changes nothing.
    if (reply.type === "stop" && this.current !== "stopping") this.stopToken = reply.token;
    switch (asked.kind) {
      case "want":
        return this.afterWant(reply, now);
      case "heartbeat": {
        const said = this.drainIfTold(reply, `${this.peer} is draining — finishing what I hold`);
        if (this.stopToken !== null) return [...said, ...this.decide(now)];
        return [...said, this.pause(now, asked.idleDrained ? Math.min(asked.pauseMs, IDLE_DRAINED_POLL_MS) : asked.pauseMs)];
      }
      case "report": {
        const run = this.running.get(asked.id)!;
        this.running.delete(asked.id);
        const note = reply.type === "ack" ? (reply.note ?? "ok") : reply.type;
        const reported: PullAction<U, Report> = { kind: "reported", unit: run.unit, report: run.report!, note };
        return [reported, ...this.drainIfTold(reply, `${this.peer} is draining — finishing what I hold`), ...this.decide(now)];
      }
      case "bye":
        return this.end("interrupted", []);
    }
  }

  /** The outstanding request failed (connection closed, timeout, bad frame), or the caller could not act. */
  lost(message: string): PullAction<U, Report>[] {
    assert.ok(this.current !== "done" && this.current !== "lost", `lost while ${this.current}`);
    this.outstanding = null;
    this.paused = false;
    this.current = "lost";
    return [{ kind: "say", line: `worker: lost ${this.peer} (${message})` }, ...this.abortAll(), ...this.childrenEnded()];
  }

  /** A unit's report is ready. It is sent at the next decision: the caller wakes its pause. */
  finished(id: number, report: Report): void {
    const run = this.running.get(id);
    assert.ok(run, `a report for unit ${id}, which is not running`);
    assert.equal(run.report, null, `unit ${id} reported twice`);
    run.report = report;
  }

  /** Ctrl-C: the children are aborted now; the rest is reported, then bye. */
  interrupt(): PullAction<U, Report>[] {
    if (this.current !== "working" && this.current !== "draining") return [];
    this.current = "interrupted";
    return [{ kind: "say", line: `  interrupted: stopping what I hold; ${this.peer} will hand it out again` }, ...this.abortAll()];
  }

  /** The pause ended (its deadline, or an event woke it). */
  woke(now: number): PullAction<U, Report>[] {
    assert.ok(this.paused, `woke() while ${this.current}, not paused`);
    this.paused = false;
    if (this.current === "lost") return this.childrenEnded();
    return this.decide(now);
  }

  // ---- decisions ----------------------------------------------------------------------------

  /** What to do next, with no request outstanding: reports first, then the stop, then work. */
  private decide(now: number): PullAction<U, Report>[] {
    for (const [id, run] of this.running) {
      if (run.report !== null) return [this.request({ kind: "report", id }, run.report)];
    }
    if (this.stopToken !== null) return this.stopStep(this.stopToken);
    if (this.current === "interrupted" && this.running.size === 0) return [this.request({ kind: "bye" }, { type: "bye", reason: "interrupted" })];
    if (this.current === "working" && this.running.size < this.o.slots) {
      return [this.request({ kind: "want" }, { type: "want", slots: this.o.slots - this.running.size })];
    }
    return this.beat(now, this.o.beatMs);
  }

  private afterWant(reply: Reply, now: number): PullAction<U, Report>[] {
    const units = this.o.unitsOf(reply);
    if (units) {
      const runs: PullAction<U, Report>[] = [];
      for (const unit of units) {
        const id = this.o.idOf(unit);
        assert.ok(!this.running.has(id), `unit ${id} assigned while it runs`);
        this.running.set(id, { unit, report: null });
        runs.push({ kind: "run", unit });
      }
      // Ctrl-C came while the want was out: what it brought is ended at once, like the rest.
      if (this.current === "interrupted") runs.push(...this.abortAll());
      return [...runs, ...this.decide(now)];
    }
    const pauseMs = reply.type === "wait" ? Math.min(this.o.beatMs, reply.seconds * 1000) : this.o.beatMs;
    const said = reply.type === "drain" ? this.drain(`${this.peer} is draining (${reply.reason}) — finishing what I hold`) : [];
    if (this.stopToken !== null) return [...said, ...this.decide(now)];
    return [...said, ...this.beat(now, pauseMs)];
  }

  /** A heartbeat when one is due (or to poll while drained and idle), else the pause. */
  private beat(now: number, pauseMs: number): PullAction<U, Report>[] {
    const idleDrained = this.current === "draining" && this.running.size === 0;
    if ((this.running.size > 0 && now - this.lastBeatAt >= this.o.beatMs) || idleDrained) {
      this.lastBeatAt = now;
      return [this.request({ kind: "heartbeat", pauseMs, idleDrained }, { type: "heartbeat", ids: [...this.running.keys()] })];
    }
    return [this.pause(now, pauseMs)];
  }

  /** The tokenised stop: end the children, report them (done by decide), clean up, then the exact ACK. */
  private stopStep(token: string): PullAction<U, Report>[] {
    const actions: PullAction<U, Report>[] = [];
    if (this.current !== "stopping") {
      this.current = "stopping";
      this.stopped = [...this.running.values()].map((r) => r.unit);
      actions.push({ kind: "say", line: `  ${this.peer} asked me to stop` }, ...this.abortAll());
    }
    // Bounded by the runners' own TERM -> KILL grace.
    if (this.running.size > 0) return [...actions, this.pauseUntilEvent()];
    for (const unit of this.stopped) actions.push({ kind: "cleanup", unit });
    return [...actions, this.request({ kind: "stop_ack" }, { type: "stop_ack", token })];
  }

  private drainIfTold(reply: Reply, line: string): PullAction<U, Report>[] {
    return reply.type === "ack" && reply.drain ? this.drain(line) : [];
  }

  private drain(line: string): PullAction<U, Report>[] {
    if (this.current !== "working") return [];
    this.current = "draining";
    return [{ kind: "say", line: `  ${line}` }];
  }

  private childrenEnded(): PullAction<U, Report>[] {
    for (const run of this.running.values()) if (run.report === null) return [this.pauseUntilEvent()];
    return this.end("lost", []);
  }

  private abortAll(): PullAction<U, Report>[] {
    const ids = [...this.running].filter(([, r]) => r.report === null).map(([id]) => id);
    return ids.length > 0 ? [{ kind: "abort", ids }] : [];
  }

  private request(asked: Outstanding, frame: PullRequest<Report>): PullAction<U, Report> {
    this.outstanding = asked;
    return { kind: "request", frame };
  }

  private pause(now: number, ms: number): PullAction<U, Report> {
    this.paused = true;
    return { kind: "pause", until: now + ms };
  }

  private pauseUntilEvent(): PullAction<U, Report> {
    this.paused = true;
    return { kind: "pause", until: null };
  }

  private end(outcome: PullOutcome, actions: PullAction<U, Report>[]): PullAction<U, Report>[] {
    this.current = "done";
    return [...actions, { kind: "end", outcome }];
  }
}
