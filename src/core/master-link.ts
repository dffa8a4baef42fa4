// A master's link to another after the roster of an explore campaign with several masters, as a
// pure machine (the socket and the clock stay with the caller, explore/fleet/peers.ts):
// linked --frame--> linked [deliver];
//   linked --silence beyond the grace | peer gone | bad frame--> lost (why)
import assert from "node:assert/strict";
import { printable } from "./log-lines.ts";
import type { Checked } from "./worker-session.ts";

type Receive = { kind: "receive"; deadline: number };

export type LinkAction<F> = Receive | { kind: "deliver"; frame: F } | { kind: "lost"; why: string };
export type LinkState = "new" | "linked" | "lost";

/** A master's link to another after the roster: every frame delivered, silence beyond the grace a loss. */
export class MasterLink<F extends { type: string }> {
  private current: LinkState = "new";
  private deadline: number | null = null;

  constructor(
    /** A master silent for longer than this is lost (the statuses every master sends are its keepalive). */
    private readonly graceMs: number,
    private readonly validate: (raw: unknown) => Checked<F>,
  ) {}

  get state(): LinkState {
    return this.current;
  }

  start(now: number): LinkAction<F>[] {
    assert.equal(this.current, "new", `start while ${this.current}`);
    this.current = "linked";
    return [this.wait(now)];
  }

  frame(raw: unknown, now: number): LinkAction<F>[] {
    this.waited("a frame");
    const checked = this.validate(raw);
    if (!checked.ok) return this.lose(`protocol error: ${checked.reason}`);
    return [{ kind: "deliver", frame: printableReason(checked.frame) }, this.wait(now)];
  }

  timeout(now: number): LinkAction<F>[] {
    assert.ok(this.deadline !== null, `a timeout while ${this.current}, with no wait`);
    if (now < this.deadline) return [{ kind: "receive", deadline: this.deadline }];
    this.waited("a timeout");
    return this.lose(`silent for more than ${Math.round(this.graceMs / 1000)}s`);
  }

  closed(_message: string): LinkAction<F>[] {
    this.waited("a close");
    return this.lose("connection closed");
  }

  broken(message: string): LinkAction<F>[] {
    this.waited("a broken frame");
    return this.lose(`protocol error: ${message}`);
  }

  private lose(why: string): LinkAction<F>[] {
    this.current = "lost";
    this.deadline = null;
    return [{ kind: "lost", why }];
  }

  private wait(now: number): Receive {
    this.deadline = now + this.graceMs;
    return { kind: "receive", deadline: this.deadline };
  }

  private waited(what: string): void {
    assert.ok(this.current === "linked" && this.deadline !== null, `${what} while ${this.current}, with no wait`);
    this.deadline = null;
  }
}

/** The free text a master sends (an abandon's or a refusal's reason), made printable before anyone logs it. */
function printableReason<F extends { type: string }>(frame: F): F {
  const reason = (frame as { reason?: unknown }).reason;
  if ((frame.type !== "abandon" && frame.type !== "refuse") || typeof reason !== "string") return frame;
  return { ...frame, reason: printable(reason, { max: 2000 }) };
}
