// The worker's request -> reply loop, the same for sweep chunks and explore tasks: ask for work
// while slots are free, run units in the background, report each one as it finishes, heartbeat
// what is still running, follow drain, and answer the tokenised stop only after the children
// ended and their scratch state is gone.
//
// States: working -> draining (told so: finish what is held, take nothing new)
//         -> stopping (stop{token}: end children, report, clean, then stop_ack{token}) -> done
//         interrupted (Ctrl-C): interrupt the children, report them, say bye.
// Lost coordinator (EOF, timeout, bad frame) => children are ended, exit 4.
//
// Every line this loop logs carries what the coordinator sent (lanes, notes, reasons): each goes
// through printable(), so a coordinator's text cannot move the cursor or forge a line.
import { performance } from "node:perf_hooks";
import { printable } from "../core/log-lines.ts";
import { RuntimeFailure } from "../errors.ts";
// A lost coordinator is a runtime error (4); 1 is reserved for newly distinct failures.
import { EXIT } from "../exit-codes.ts";
import type { Connection } from "../net/connection.ts";
import { CoordinatorReply, type CoordinatorReplyT, type Frame, type WelcomeFrame } from "../net/messages.ts";
import { WakeablePause } from "../util/pause.ts";

const REQUEST_TIMEOUT_MS = 60_000;
/** The longest line the loop logs. */
const LINE_MAX_CHARS = 2000;


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
}

interface Running<U> {
  unit: U;
  controller: AbortController;
  report: Frame | null;
}

export class WorkerLoop<U> {
  private readonly running = new Map<number, Running<U>>();
  private draining = false;
  private interrupted = false;
  private stopToken: string | null = null;
  private lastBeatMs = 0;
  private readonly sleeper = new WakeablePause();

  constructor(
    private readonly conn: Connection,
    private readonly welcome: WelcomeFrame,
    private readonly runner: UnitRunner<U>,
    private readonly o: { slots: number; signal: AbortSignal; log: (line: string) => void },
  ) {
    o.signal.addEventListener("abort", () => this.sleeper.wake(), { once: true });
  }

  async run(): Promise<number> {
    try {
      return await this.loop();
    } catch (err) {
      this.say(`worker: lost the coordinator (${(err as Error).message})`);
      await this.endChildren();
      return EXIT.runtime;
    }
  }

  private async loop(): Promise<number> {
    const beatMs = Math.max(0.2, this.welcome.heartbeat_seconds) * 1000;
    for (;;) {
      if (this.o.signal.aborted && !this.interrupted) {
        this.interrupted = true;
        this.say("  interrupted: stopping what I hold; the coordinator will hand it out again");
        for (const r of this.running.values()) r.controller.abort();
      }
      await this.reportFinished();
      if (this.stopToken !== null) return this.stop(this.stopToken);
      if (this.interrupted && this.running.size === 0) {
        await this.call({ type: "bye", reason: "interrupted" });
        return EXIT.ok;
      }
      let pauseMs = beatMs;
      if (!this.draining && !this.interrupted && this.running.size < this.o.slots) {
        const reply = await this.call({ type: "want", slots: this.o.slots - this.running.size });
        const units = this.runner.unitsFrom(reply);
        if (units) {
          for (const unit of units) this.start(unit);
          continue;
        }
        if (reply.type === "wait") pauseMs = Math.min(beatMs, reply.seconds * 1000);
        if (reply.type === "drain") this.startDraining(`the coordinator is draining (${reply.reason}) — finishing what I hold`);
        if (this.stopToken !== null) continue;
      }
      const now = performance.now();
      const idleDrained = this.draining && this.running.size === 0;
      if ((this.running.size > 0 && now - this.lastBeatMs >= beatMs) || idleDrained) {
        this.lastBeatMs = now;
        const reply = await this.call({ type: "heartbeat", ids: [...this.running.keys()] });
        if (reply.type === "ack" && reply.drain) this.startDraining("the coordinator is draining — finishing what I hold");
        if (this.stopToken !== null) continue;
        if (idleDrained) pauseMs = Math.min(pauseMs, 1000);
      }
      await this.sleeper.pause(pauseMs);
    }
  }

  private startDraining(line: string): void {
    if (this.draining) return;
    this.draining = true;
    this.say(`  ${line}`);
  }

  private say(line: string): void {
    this.o.log(printable(line, { max: LINE_MAX_CHARS }));
  }

  /** One request -> reply. A `stop` reply is remembered; protocol breaks throw (lost coordinator). */
  private async call(frame: Frame): Promise<CoordinatorReplyT> {
    const reply = await this.conn.request(frame, CoordinatorReply, REQUEST_TIMEOUT_MS);
    if (reply.type === "refuse") throw new RuntimeFailure(`the coordinator refused a request: ${printable(reply.reason, { max: LINE_MAX_CHARS })}`);
    if (reply.type === "stop") this.stopToken = reply.token;
    return reply;
  }

  private start(unit: U): void {
    const run: Running<U> = { unit, controller: new AbortController(), report: null };
    this.running.set(this.runner.id(unit), run);
    this.say(this.runner.started(unit));
    void this.runner.run(unit, run.controller.signal).then((report) => {
      run.report = report;
      this.sleeper.wake();
    });
  }

  private async reportFinished(): Promise<void> {
    for (const [id, run] of this.running) {
      if (!run.report) continue;
      const reply = await this.call(run.report);
      this.running.delete(id);
      const note = reply.type === "ack" ? (reply.note ?? "ok") : reply.type;
      this.say(this.runner.finished(run.unit, run.report, note));
      if (reply.type === "ack" && reply.drain) this.startDraining("the coordinator is draining — finishing what I hold");
    }
  }

  /** The tokenised stop: end the children, report them, clean up, then ACK with the exact token. */
  private async stop(token: string): Promise<number> {
    this.say("  the coordinator asked me to stop");
    for (const r of this.running.values()) r.controller.abort();
    await this.waitChildren();
    const units = [...this.running.values()].map((r) => r.unit);
    await this.reportFinished();
    for (const unit of units) this.runner.cleanup(unit);
    const reply = await this.conn.request({ type: "stop_ack", token }, CoordinatorReply, REQUEST_TIMEOUT_MS);
    this.say(reply.type === "bye" ? "  stop acknowledged" : `  the coordinator answered the stop_ack with '${reply.type}'`);
    return reply.type === "bye" ? EXIT.ok : EXIT.runtime;
  }

  private async endChildren(): Promise<void> {
    for (const r of this.running.values()) r.controller.abort();
    await this.waitChildren();
  }

  /** Bounded by the runners' own TERM -> KILL grace. */
  private async waitChildren(): Promise<void> {
    while ([...this.running.values()].some((r) => r.report === null)) await this.sleeper.pause(100);
  }

}
