// The worker's loop, the same for sweep chunks and explore tasks: the thin driver of PullLoop
// (core/pull-loop.ts), which decides every request, pause and stop. This file owns what the
// machine must not: the connection, the clock, the children (UnitRunner) and the log.
//
// States (the machine's): working -> draining -> stopping -> done; interrupted (Ctrl-C); lost.
// A lost coordinator (EOF, timeout, bad frame, refusal) => children are ended, exit 4.
//
// One line per unit: what it was (the runner's `started` text) and how it ended, printed when it
// reports; a unit stopped before reporting prints nothing of its own (the stop's lines say it).
//
// A unit with files to send (a worker without the shared directory) sends them in `put` frames,
// each answered by an ack (up to PUTS_IN_FLIGHT ahead of their acks; the report follows the
// last put at once, and the acks still due are read before its reply), right before its report: each put renews every lease the worker holds on the
// coordinator, and a piece is at most the welcome's piece_bytes. A reply that refuses or a lost connection is a lost coordinator; a
// file that cannot be read ends the sending early (the report's account then falls short and the
// coordinator books nothing of the unit). Likewise, what the units of a reply need (an explore
// input too large to travel with its task) is fetched, request by request, before they start.
//
// Every line this loop logs carries what the coordinator sent (lanes, notes, reasons): each goes
// through printable(), so a coordinator's text cannot move the cursor or forge a line.
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { printable } from "../core/log-lines.ts";
import { PullLoop, type PullAction, type PullOutcome } from "../core/pull-loop.ts";
// A lost coordinator is a runtime error (4); 1 is reserved for newly distinct failures.
import { EXIT } from "../exit-codes.ts";
import type { Connection } from "../net/connection.ts";
import { CoordinatorReply, FetchReply, type CoordinatorReplyT, type FetchFrame, type Frame, type PieceFrame, type PutFrame, type RefuseFrame, type WelcomeFrame } from "../net/messages.ts";
import { WakeablePause } from "../util/pause.ts";

const REQUEST_TIMEOUT_MS = 60_000;
/** Puts sent ahead of their acks: at most this many pieces are buffered toward the coordinator. */
const PUTS_IN_FLIGHT = 4;
/** The longest line the loop logs. */
const LINE_MAX_CHARS = 2000;
/** A pause with no deadline (waiting for children) still needs a timer value; an event ends it. */
const UNTIL_EVENT_MS = 2_147_483_647;

/** How one campaign kind turns replies into units, runs them, and reports them. */
export interface UnitRunner<U> {
  /** The units carried by a reply to `want` (an assign or a task), or null if it carries none. */
  unitsFrom(reply: CoordinatorReplyT): U[] | null;
  id(unit: U): number;
  started(unit: U): string;
  /** Runs one unit to its report frame (`done` or `result`). Never rejects. */
  run(unit: U, signal: AbortSignal): Promise<Frame>;
  finished(unit: U, report: Frame, note: string): string;
  /** Removes what the unit left behind when it was stopped before reporting. */
  cleanup(unit: U): void;
  /** The files to send before the report of unit `id` (a worker without the shared directory), or null. */
  outbox?(id: number): AsyncIterable<PutFrame> | null;
  /** Brings over the connection what the units of a reply need before they run (explore inputs without the shared directory). */
  prepare?(reply: CoordinatorReplyT, request: (f: FetchFrame) => Promise<PieceFrame | RefuseFrame>): Promise<void>;
}

const EXIT_OF: Record<PullOutcome, number> = {
  stopped: EXIT.ok,
  interrupted: EXIT.ok,
  lost: EXIT.runtime,
  "stop-unacknowledged": EXIT.runtime,
};

type Action<U> = PullAction<U, Frame>;

export class WorkerLoop<U> {
  private readonly machine: PullLoop<U, Frame, CoordinatorReplyT>;
  private readonly controllers = new Map<number, AbortController>();
  /** What each unit running is (the runner's `started`), said once it reports. */
  private readonly described = new Map<number, string>();
  /** Cut short by a unit that finishes and by Ctrl-C. */
  private readonly sleeper = new WakeablePause();
  private readonly now: () => number;

  constructor(
    private readonly conn: Connection,
    welcome: WelcomeFrame,
    private readonly runner: UnitRunner<U>,
    private readonly o: { slots: number; signal: AbortSignal; log: (line: string) => void; now?: () => number },
  ) {
    this.now = o.now ?? (() => performance.now());
    this.machine = new PullLoop({
      slots: o.slots,
      beatMs: Math.max(0.2, welcome.heartbeat_seconds) * 1000,
      unitsOf: (reply) => runner.unitsFrom(reply),
      idOf: (unit) => runner.id(unit),
      peer: welcome.mode === "explore" ? "the master" : "the coordinator",
    });
  }

  async run(): Promise<number> {
    const onAbort = () => {
      this.performAll(this.machine.interrupt());
      this.sleeper.wake();
    };
    if (this.o.signal.aborted) onAbort();
    else this.o.signal.addEventListener("abort", onAbort, { once: true });
    try {
      let actions = this.machine.start(this.now());
      for (;;) {
        let next: Promise<Action<U>[]> | number | null;
        try {
          next = this.performAll(actions);
        } catch (err) {
          // This side failed (a scratch directory that cannot be removed): as a lost coordinator.
          next = Promise.resolve(this.machine.lost((err as Error).message));
        }
        if (typeof next === "number") return next;
        assert.ok(next !== null, "the machine's batch ends in neither a wait nor the end");
        actions = await next;
      }
    } finally {
      this.o.signal.removeEventListener("abort", onAbort);
    }
  }

  /**
   * Performs a batch in order. Its last action is a wait (request, pause) whose outcome is the
   * machine's next batch, or the end (the exit code); a batch of immediate actions only (from
   * interrupt()) returns null.
   */
  private performAll(actions: Action<U>[]): Promise<Action<U>[]> | number | null {
    let next: Promise<Action<U>[]> | number | null = null;
    for (const a of actions) {
      switch (a.kind) {
        case "request": {
          const frame = a.frame;
          const unit = frame.type === "done" ? frame.chunk_id : frame.type === "result" ? frame.task_id : null;
          const files = unit !== null ? (this.runner.outbox?.(unit) ?? null) : null;
          const sent = files ? this.sendFiles(files) : Promise.resolve(0);
          const prepare = this.runner.prepare?.bind(this.runner);
          next = sent
            .then(async (unacked) => {
              // The report follows its last puts at once; their acks come first, in order.
              this.conn.send(frame);
              for (let i = 0; i < unacked; i++) await this.putAcked();
              return this.conn.receive(CoordinatorReply, REQUEST_TIMEOUT_MS);
            })
            .then((reply) => (prepare ? prepare(reply, (f) => this.conn.request(f, FetchReply, REQUEST_TIMEOUT_MS)).then(() => reply) : reply))
            .then(
              (reply) => this.machine.replied(reply, this.now()),
              (err: Error) => this.machine.lost(err.message),
            );
          break;
        }
        case "pause": {
          const ms = a.until === null ? UNTIL_EVENT_MS : Math.max(0, a.until - this.now());
          next = this.sleeper.pause(ms).then(() => this.machine.woke(this.now()));
          break;
        }
        case "run":
          this.start(a.unit);
          break;
        case "abort":
          for (const id of a.ids) this.controllers.get(id)?.abort();
          break;
        case "reported":
          this.controllers.delete(this.runner.id(a.unit));
          this.say(oneLine(this.described.get(this.runner.id(a.unit)) ?? this.runner.started(a.unit), this.runner.finished(a.unit, a.report, a.note)));
          this.described.delete(this.runner.id(a.unit));
          break;
        case "cleanup":
          this.described.delete(this.runner.id(a.unit));
          this.runner.cleanup(a.unit);
          break;
        case "say":
          this.say(a.line);
          break;
        case "end":
          next = EXIT_OF[a.outcome];
          break;
      }
    }
    return next;
  }

  /**
   * Sends a unit's files, piece by piece, up to PUTS_IN_FLIGHT puts ahead of their acks (a round
   * trip per piece would cost a small child as much as its task); resolves with how many acks are
   * still to be read (right after the report is sent: acks come in order), rejects only when the
   * coordinator is lost or refuses them.
   */
  private async sendFiles(files: AsyncIterable<PutFrame>): Promise<number> {
    const it = files[Symbol.asyncIterator]();
    let inFlight = 0;
    try {
      for (;;) {
        let step: IteratorResult<PutFrame>;
        try {
          step = await it.next();
        } catch (err) {
          this.say(`  stopped sending files: ${(err as Error).message}`);
          return inFlight;
        }
        if (step.done) return inFlight;
        this.conn.send(step.value);
        if (++inFlight < PUTS_IN_FLIGHT) continue;
        inFlight--;
        // Taken back meanwhile (or Ctrl-C): the rest is not wanted; the report tells what was sent.
        if (!(await this.putAcked()) || this.o.signal.aborted) return inFlight;
      }
    } finally {
      await it.return?.();
    }
  }

  /** Reads one put's ack: false when the unit is no longer held; throws when the coordinator refused the files. */
  private async putAcked(): Promise<boolean> {
    const reply = await this.conn.receive(CoordinatorReply, REQUEST_TIMEOUT_MS);
    if (reply.type === "refuse") throw new Error(`the coordinator refused the files: ${reply.reason}`);
    return !(reply.type === "ack" && reply.note === "not held");
  }

  private start(unit: U): void {
    const id = this.runner.id(unit);
    const controller = new AbortController();
    this.controllers.set(id, controller);
    // Said with its outcome: a worker's console holds one line per unit.
    this.described.set(id, this.runner.started(unit));
    void this.runner.run(unit, controller.signal).then((report) => {
      this.machine.finished(id, report);
      this.sleeper.wake();
    });
  }

  private say(line: string): void {
    this.o.log(printable(line, { max: LINE_MAX_CHARS }));
  }
}

/**
 * A unit's one line: its description, then its outcome. The outcome usually repeats the
 * description's head ("  chunk 7" of "  chunk 7: lane …"), which is then said once.
 */
export function oneLine(started: string, finished: string): string {
  const colon = started.indexOf(":");
  const head = colon > 0 ? started.slice(0, colon) : null;
  if (head !== null && finished.startsWith(head) && /^\s/.test(finished.slice(head.length))) return `${started} —${finished.slice(head.length)}`;
  return `${started} — ${finished.trimStart()}`;
}
