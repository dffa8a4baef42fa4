// Durations as users type them (`--for 2h`, `chunk length 90m`) and as status lines print them.

import { UsageError } from "../errors.ts";

const UNIT_SECONDS: Record<string, number> = { h: 3600, m: 60, s: 1 };
const NUMBER = String.raw`(?:\d+(?:\.\d*)?|\.\d+)`;
const BARE_MINUTES = new RegExp(`^${NUMBER}$`);
const WHOLE = new RegExp(`^(?:${NUMBER}\\s*[hms]\\s*)+$`);
const GROUP = new RegExp(`(${NUMBER})\\s*([hms])`, "g");

function badDuration(text: string, why = ""): UsageError {
  return new UsageError(`bad duration '${text}'${why} (try 2h, 90m, 1h30m, 45s)`);
}

/**
 * Parses a duration into whole seconds (rounded to the nearest second).
 * A bare number means minutes ("90" = 90 min); otherwise one or more `<number><h|m|s>` groups,
 * optionally separated by whitespace ("1h30m", "1h 30m", "1.5h", "45s"). The total must be positive.
 * Throws UsageError for anything else.
 */
export function parseDuration(text: string): number {
  const s = text.trim().toLowerCase();
  let seconds: number;
  if (BARE_MINUTES.test(s)) {
    seconds = Number(s) * 60;
  } else if (WHOLE.test(s)) {
    seconds = 0;
    for (const [, amount, unit] of s.matchAll(GROUP)) seconds += Number(amount) * UNIT_SECONDS[unit];
  } else {
    throw badDuration(text);
  }
  const rounded = Math.round(seconds);
  if (!Number.isSafeInteger(rounded)) throw badDuration(text, ": too long");
  if (rounded <= 0) throw badDuration(text, ": must be at least one second");
  return rounded;
}

/**
 * A flag measured in seconds: a bare number is seconds, fractions included ("0.5", "90"), as the
 * flag always took; or the duration syntax of the other duration flags ("15s", "2m", "1h30m",
 * "0.5s"), not rounded. Returns null for anything else (the caller names the flag and its limit).
 */
export function parseSeconds(text: string): number | null {
  const s = text.trim().toLowerCase();
  let seconds: number;
  if (BARE_MINUTES.test(s)) seconds = Number(s);
  else if (WHOLE.test(s)) {
    seconds = 0;
    for (const [, amount, unit] of s.matchAll(GROUP)) seconds += Number(amount) * UNIT_SECONDS[unit];
  } else return null;
  return Number.isFinite(seconds) ? seconds : null;
}

/**
 * Prints seconds as `XhYYm` from one hour up, `XmYYs` from one minute up, else `Xs`
 * (2h00m, 4m42s, 9s). Fractions of a second are dropped; a negative value gets a leading `-`.
 */
export function formatDuration(seconds: number): string {
  if (seconds < 0) return `-${formatDuration(-seconds)}`;
  const total = Math.floor(seconds);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h${String(m).padStart(2, "0")}m`;
  if (m > 0) return `${m}m${String(s).padStart(2, "0")}s`;
  return `${s}s`;
}
