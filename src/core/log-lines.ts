// Outside text on its way to the operator's log or terminal. Peer bytes, host names, error
// texts and what generators and targets wrote may hold control characters (a terminal reset, a
// cursor move, a newline that forges a log line of its own) and may be of any length:
// printable() makes such text inert and bounded. LineThrottle bounds how many lines of one kind
// (refusals) reach the log per interval and counts the rest, so a flood costs a summary line.
// Pure: the caller passes the time.
//
// LineThrottle:  idle --line--> open window (first perWindow lines shown, the rest counted)
//                open window --now >= start + windowMs--> idle, the count reported once
import assert from "node:assert/strict";

/** What printable() keeps of a text by default, in characters of its output. */
export const PRINTABLE_MAX_CHARS = 500;

// C0 controls, DEL and C1 controls (U+009B is CSI on 8-bit terminals) become \xNN. The line and
// paragraph separators, the bidirectional formatting characters (which reorder what a reader
// sees) and lone surrogates become \uNNNN.
const UNSAFE = /[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]/;

export interface PrintableOptions {
  /** Output characters kept (the escapes count); the rest is cut and its size named. Default PRINTABLE_MAX_CHARS. */
  max?: number;
  /** Keep tabs as they are (file contents shown line by line); a tab only moves the cursor on. */
  tabs?: boolean;
}

/**
 * `text` with every control character shown as `\xNN` (and the few other characters that can
 * forge or reorder what is shown as `\uNNNN`), cut to `max` characters with a note of how much
 * was cut. Idempotent on text that needed no cut: backslashes are left as they are, so an
 * escaped text contains nothing printable() would change.
 */
export function printable(text: string, o: PrintableOptions = {}): string {
  const max = o.max ?? PRINTABLE_MAX_CHARS;
  assert.ok(max >= 0, "printable: max must be >= 0");
  if (text.length <= max && !UNSAFE.test(text)) return text;
  let out = "";
  let i = 0;
  while (i < text.length) {
    const piece = shown(text, i, o.tabs === true);
    if (out.length + piece.text.length > max) break;
    out += piece.text;
    i += piece.units;
  }
  if (i >= text.length) return out;
  const left = [...text.slice(i)].length;
  return `${out}… (+${left} characters)`;
}

/** How the code point at `i` is shown, and how many UTF-16 units it spans. */
function shown(text: string, i: number, tabs: boolean): { text: string; units: number } {
  const c = text.charCodeAt(i);
  if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
    const d = text.charCodeAt(i + 1);
    if (d >= 0xdc00 && d <= 0xdfff) return { text: text.slice(i, i + 2), units: 2 };
  }
  const ch = text[i]!;
  if (!UNSAFE.test(ch) || (tabs && c === 0x09)) return { text: ch, units: 1 };
  if (c <= 0xff) return { text: `\\x${c.toString(16).padStart(2, "0")}`, units: 1 };
  return { text: `\\u${c.toString(16).padStart(4, "0")}`, units: 1 };
}

/** What a line of the throttled kind should do now. */
export interface ThrottleVerdict {
  /** Write this line. */
  show: boolean;
  /** Lines suppressed in a window that closed before this one: report them first (0 = none). */
  suppressed: number;
}

/** At most `perWindow` lines per `windowMs`; the rest are counted and reported once per window. */
export class LineThrottle {
  private windowStart: number | null = null;
  private shownInWindow = 0;
  private suppressedInWindow = 0;

  constructor(
    readonly perWindow: number,
    readonly windowMs: number,
  ) {
    assert.ok(Number.isInteger(perWindow) && perWindow >= 1, "LineThrottle: perWindow must be an integer >= 1");
    assert.ok(windowMs > 0, "LineThrottle: windowMs must be > 0");
  }

  /** A line of this kind wants to be written at `now`. */
  admit(now: number): ThrottleVerdict {
    const suppressed = this.settle(now);
    this.windowStart ??= now;
    if (this.shownInWindow < this.perWindow) {
      this.shownInWindow++;
      return { show: true, suppressed };
    }
    this.suppressedInWindow++;
    return { show: false, suppressed };
  }

  /** When the open window closes (null when none is open). */
  windowEndsAt(): number | null {
    return this.windowStart === null ? null : this.windowStart + this.windowMs;
  }

  /** Closes the window if it ended by `now`; returns the lines it suppressed (each count is returned once). */
  settle(now: number): number {
    if (this.windowStart === null || now < this.windowStart + this.windowMs) return 0;
    return this.drain();
  }

  /** Closes the open window whatever the time (the log is ending); returns the lines it suppressed. */
  drain(): number {
    const n = this.suppressedInWindow;
    this.windowStart = null;
    this.shownInWindow = 0;
    this.suppressedInWindow = 0;
    return n;
  }
}
