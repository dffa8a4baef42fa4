// The tokenised shutdown of remote participants (sweep workers, explore workers and masters),
// as a pure ledger: the caller supplies the clock and the random tokens, and performs the I/O.
//
// Per participant:
//   available --begin(token)--> stopping --ack(exact token)--> acked
//   available | stopping --gone(why)--> gone
// Only an ACK that carries the exact token of *this* stop counts; anything else is recorded as
// a wrong ACK and changes nothing. A participant is given work only while it is `available`
// (the availability gate). The shutdown is complete when every participant is acked; at the
// deadline, whoever is not acked is reported by name and the shutdown is incomplete.
import assert from "node:assert/strict";

export type ParticipantState = "available" | "stopping" | "acked" | "gone";

interface Entry {
  state: ParticipantState;
  token: string | null;
  why: string | null;
  wrongAcks: number;
}

export type AckResult = "exact" | "wrong-token" | "not-stopping" | "unknown";

export interface StopOutcome {
  /** Every participant that was asked to stop acknowledged it exactly. */
  complete: boolean;
  /** The deadline passed (or everyone answered). */
  settled: boolean;
  acked: string[];
  /** Asked to stop, no exact ACK yet. */
  pending: string[];
  /** Left (connection lost) before acknowledging. */
  gone: { name: string; why: string }[];
  /** Never asked to stop (still available). */
  available: string[];
}

export class StopLedger {
  private readonly entries = new Map<string, Entry>();
  private deadline: number | null = null;

  add(name: string): void {
    assert.ok(!this.entries.has(name), `participant ${name} added twice`);
    this.entries.set(name, { state: "available", token: null, why: null, wrongAcks: 0 });
  }

  /** A participant that leaves before any stop was asked of it is simply no longer part of the shutdown. */
  leaveBeforeStop(name: string): boolean {
    const e = this.entries.get(name);
    if (!e || e.state !== "available") return false;
    this.entries.delete(name);
    return true;
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }

  state(name: string): ParticipantState | undefined {
    return this.entries.get(name)?.state;
  }

  /** The availability gate: only an available participant may be given work. */
  mayAssign(name: string): boolean {
    return this.entries.get(name)?.state === "available";
  }

  /** Starts stopping `name` with a fresh token; returns the token to send. */
  begin(name: string, token: string): string {
    const e = this.entries.get(name);
    assert.ok(e, `unknown participant ${name}`);
    assert.equal(e.state, "available", `participant ${name} is ${e.state}, cannot begin a stop`);
    assert.ok(token.length >= 16, "stop tokens must be random and at least 16 characters");
    e.state = "stopping";
    e.token = token;
    return token;
  }

  /** Sets the moment after which unanswered stops are given up (monotonic ms). */
  setDeadline(atMs: number): void {
    this.deadline = atMs;
  }

  ack(name: string, token: string): AckResult {
    const e = this.entries.get(name);
    if (!e) return "unknown";
    if (e.state !== "stopping") return "not-stopping";
    if (e.token !== token) {
      e.wrongAcks++;
      return "wrong-token";
    }
    e.state = "acked";
    return "exact";
  }

  /** The participant left (connection closed, process died). An acked participant stays acked. */
  gone(name: string, why: string): void {
    const e = this.entries.get(name);
    if (!e || e.state === "acked" || e.state === "gone") return;
    e.state = "gone";
    e.why = why;
  }

  /** The token of the stop asked of `name`, if one was. */
  token(name: string): string | null {
    return this.entries.get(name)?.token ?? null;
  }

  wrongAcks(name: string): number {
    return this.entries.get(name)?.wrongAcks ?? 0;
  }

  outcome(nowMs: number): StopOutcome {
    const acked: string[] = [];
    const pending: string[] = [];
    const gone: { name: string; why: string }[] = [];
    const available: string[] = [];
    for (const [name, e] of this.entries) {
      if (e.state === "acked") acked.push(name);
      else if (e.state === "stopping") pending.push(name);
      else if (e.state === "gone") gone.push({ name, why: e.why ?? "gone" });
      else available.push(name);
    }
    const expired = this.deadline !== null && nowMs >= this.deadline;
    return {
      complete: pending.length === 0 && gone.length === 0 && available.length === 0,
      settled: pending.length === 0 || expired,
      acked,
      pending,
      gone,
      available,
    };
  }
}
