// Dialing a coordinator or master that may not be up yet: one bounded wait (--wait), a host
// name that does not resolve reported at once by name, a resolver that does not answer retried
// with a line saying so. Used by workers and by a master joining its root. Retries back off from
// RETRY_FIRST_MS to RETRY_MAX_MS, each delay jittered, so a fleet of ranks started together by a
// launcher does not dial a root that is still starting in lock step.
import { lookup as dnsLookup } from "node:dns/promises";
import { isIP } from "node:net";
import { performance } from "node:perf_hooks";
import { formatDuration } from "../config/duration.ts";
import { RuntimeFailure } from "../errors.ts";
import { WakeablePause } from "../util/pause.ts";
import { dial, type Connection } from "./connection.ts";

const CONNECT_TIMEOUT_MS = 5_000;
/** The first retry's delay, and the cap the doubling delays stop at. */
export const RETRY_FIRST_MS = 250;
export const RETRY_MAX_MS = 4_000;

/**
 * The delay before retry number `attempt` (0 = the first): doubling from RETRY_FIRST_MS up to
 * RETRY_MAX_MS, then a uniform draw from its upper half ("equal jitter": never below half the
 * step, so the wait still backs off; never above it, so the bound holds). `random` is in [0, 1).
 */
export function retryDelayMs(attempt: number, random: () => number = Math.random): number {
  const step = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** Math.min(attempt, 16));
  return step / 2 + (step / 2) * random();
}

/** Resolves a host name (rejecting with the resolver's error code); a seam for tests, which must not ask a real name server. */
export type HostLookup = (host: string) => Promise<unknown>;
const systemLookup: HostLookup = (host) => dnsLookup(host, { all: true });

export interface DialWait {
  host: string;
  port: number;
  waitSeconds: number;
  signal: AbortSignal;
  log: (line: string) => void;
  lookup?: HostLookup;
  /** Who is dialed, for the lines and the error ("the coordinator", "the root master"); default "the coordinator". */
  who?: string;
  /** The jitter's source, in [0, 1) (Math.random unless given). */
  random?: () => number;
}

/**
 * Refuses at once a host name the resolver says does not exist: waiting could not fix it. A
 * resolver that does not answer (EAI_AGAIN) is left to connectWithWait, which retries.
 */
export async function checkHostName(host: string, port: number, lookup: HostLookup = systemLookup): Promise<void> {
  try {
    await resolveName(host, lookup);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOTFOUND") throw unresolvable(host, port, err);
  }
}

/** Connects, waiting up to waitSeconds for a coordinator that is not up yet. Null if the signal aborted the wait. */
export async function connectWithWait(o: DialWait): Promise<Connection | null> {
  const deadline = performance.now() + o.waitSeconds * 1000;
  const lookup = o.lookup ?? systemLookup;
  const pause = new WakeablePause();
  const onAbort = () => pause.wake();
  o.signal.addEventListener("abort", onAbort, { once: true });
  let saidWaiting = false;
  let saidResolver = false;
  let attempt = 0;
  const who = o.who ?? "the coordinator";
  try {
    for (;;) {
      if (o.signal.aborted) return null;
      try {
        await resolveName(o.host, lookup);
        return await dial(o.host, o.port, CONNECT_TIMEOUT_MS);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "ENOTFOUND") throw unresolvable(o.host, o.port, err);
        if (performance.now() >= deadline) {
          throw new RuntimeFailure(`cannot reach ${who} at ${o.host}:${o.port} — ${(err as Error).message}`);
        }
        if (code === "EAI_AGAIN") {
          if (!saidResolver) o.log(`the name server gives no answer for '${o.host}' (EAI_AGAIN); retrying for up to ${formatDuration(o.waitSeconds)} …`);
          saidResolver = true;
        } else if (!saidWaiting) {
          o.log(`waiting for ${who} at ${o.host}:${o.port} (up to ${formatDuration(o.waitSeconds)}) …`);
          saidWaiting = true;
        }
      }
      await pause.pause(Math.max(0, Math.min(retryDelayMs(attempt++, o.random), deadline - performance.now())));
    }
  } finally {
    o.signal.removeEventListener("abort", onAbort);
  }
}

async function resolveName(host: string, lookup: HostLookup): Promise<void> {
  if (isIP(host) === 0) await lookup(host);
}

function unresolvable(host: string, port: number, err: unknown): RuntimeFailure {
  return new RuntimeFailure(
    `cannot reach ${host}:${port}: the host name '${host}' does not resolve (${(err as Error).message}); check its spelling, or give the master's IP address`,
    { cause: err },
  );
}
