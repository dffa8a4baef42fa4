// How a coordinator's sweep session ends, as a pure machine: the caller (sweep/fleet/worker-protocol.ts)
// reads the clock, the engine, the commit queue and the attached workers into a turn, performs the
// actions, and sleeps as told until an event wakes it early.
//
//   serving  --Ctrl-C | the deadline floor | the fleet sweeps nothing--> draining [drain(reason)]
//   serving  --the engine drained by itself (assign found the floor, every lane exhausted)--> draining
//   draining --nothing in flight--> drained
//   draining --drain grace over while the store takes writes--> drained [abandon(chunks in flight)]
//   serving | draining --the store failed (commit queue gave up)--> drained
//   drained  --stop()--> stopping (every worker is asked to stop)
//   stopping --stopped()--> closed
//
// Draining: no new chunks, every ack says drain; the grace starts at the first draining turn. A
// grace that runs out while the store refuses writes waits for the store (reissuing would need a
// write): such a turn sleeps until an event wakes it. "The fleet sweeps nothing" is the
// distributed form of the single host's "every lane disabled": every attached worker has every
// lane that still has seeds disabled (fleetSweepsNothing).
import assert from "node:assert/strict";

export type DrainState = "serving" | "draining" | "drained" | "stopping" | "closed";

/** The reasons this machine starts a drain for; the engine may start one for others (its own). */
export type DrainStart = "interrupted" | "deadline" | "all lanes disabled";

/** What one turn reads of the session, all at one moment. */
export interface DrainTurn {
  /** Monotonic milliseconds. */
  now: number;
  /** Seconds left of the session's budget, and the deadline floor: no chunk starts within it. */
  remainingSeconds: number;
  floorSeconds: number;
  /** Ctrl-C or SIGTERM was heard. */
  interrupted: boolean;
  /** The engine's drain reason, whoever started it; null while it hands out chunks. */
  engineDraining: string | null;
  /** Chunks held by workers (minimize units never hold up a drain). */
  chunksInFlight: number;
  storeBlocked: boolean;
  storeFailed: boolean;
  fleetSweepsNothing: boolean;
}

export type DrainAction =
  /** Tell the engine to drain for `reason`, and log `line`. */
  | { kind: "drain"; reason: DrainStart; line: string }
  /** The grace ran out: take back the chunks still in flight (they are swept again next session). */
  | { kind: "abandon"; chunks: number }
  /** Sleep up to `ms`, or until an event that can start or end a drain. */
  | { kind: "sleep"; ms: number };

/** The longest single sleep (setTimeout's limit is about 24.8 days). */
export const MAX_SLEEP_MS = 3_600_000;

const DRAIN_LINES: Record<DrainStart, string> = {
  interrupted: "interrupted: draining — no new chunks; chunks in flight that do not land will be re-swept",
  deadline: "deadline: draining — waiting for the chunks in flight",
  "all lanes disabled": "every lane is disabled on every worker attached: draining — the sweep stopped sweeping",
};

export class SessionDrain {
  private current: DrainState = "serving";
  private graceEndsAt: number | null = null;

  constructor(private readonly o: { drainGraceMs: number }) {}

  get state(): DrainState {
    return this.current;
  }

  /** One look at the session: what to do now, then how long to sleep unless it drained. */
  turn(t: DrainTurn): DrainAction[] {
    assert.ok(this.current === "serving" || this.current === "draining", `a turn while ${this.current}`);
    if (t.storeFailed) {
      this.current = "drained";
      return [];
    }
    const actions: DrainAction[] = [];
    if (this.current === "serving") {
      const start = this.startFor(t);
      if (start !== null) actions.push({ kind: "drain", reason: start, line: DRAIN_LINES[start] });
      if (start !== null || t.engineDraining !== null) this.current = "draining";
    }
    if (this.current === "serving") {
      return [{ kind: "sleep", ms: Math.min(MAX_SLEEP_MS, Math.max(1, (t.remainingSeconds - t.floorSeconds) * 1000)) }];
    }
    this.graceEndsAt ??= t.now + this.o.drainGraceMs;
    if (t.chunksInFlight === 0) {
      this.current = "drained";
      return actions;
    }
    if (t.now >= this.graceEndsAt && !t.storeBlocked) {
      this.current = "drained";
      return [...actions, { kind: "abandon", chunks: t.chunksInFlight }];
    }
    // Past the grace only while the store refuses writes: then only events wake the session.
    const ms = t.now >= this.graceEndsAt ? MAX_SLEEP_MS : Math.max(1, this.graceEndsAt - t.now);
    return [...actions, { kind: "sleep", ms: Math.min(MAX_SLEEP_MS, ms) }];
  }

  /** The workers are being asked to stop. */
  stop(): void {
    assert.equal(this.current, "drained", `stop while ${this.current}`);
    this.current = "stopping";
  }

  /** Every worker acknowledged the stop, left, or the stop grace ran out. */
  stopped(): void {
    assert.equal(this.current, "stopping", `stopped while ${this.current}`);
    this.current = "closed";
  }

  /** Ctrl-C first, then the deadline floor, then a fleet that sweeps nothing; null while serving on. */
  private startFor(t: DrainTurn): DrainStart | null {
    if (t.engineDraining !== null) return null;
    if (t.interrupted) return "interrupted";
    if (t.remainingSeconds < t.floorSeconds) return "deadline";
    if (t.fleetSweepsNothing) return "all lanes disabled";
    return null;
  }
}

/**
 * Whether the attached workers, as they are, can sweep nothing more: at least one is attached,
 * some lane still has seeds to hand out, and every such lane is disabled on every worker. A lane
 * with no seeds left is no reason: a session whose every lane ran out ends as exhausted.
 */
export function fleetSweepsNothing(lanes: readonly { name: string; hasWork: boolean }[], workers: readonly { disabled: ReadonlySet<string> }[]): boolean {
  const open = lanes.filter((l) => l.hasWork);
  if (workers.length === 0 || open.length === 0) return false;
  return workers.every((w) => open.every((l) => w.disabled.has(l.name)));
}
