// Refusal lines, throttled: the first `perWindow` of each window are written, the rest are
// counted and summarised when the window closes, so a flood of refused peers costs one line per
// window instead of one per peer. The counting is core's LineThrottle; this adds the timer that
// writes a window's count once it is over.
import { LineThrottle } from "../core/log-lines.ts";

/** Refusal lines written one by one per window; the rest are counted in one summary line. */
export const REFUSALS_SHOWN = 20;
export const REFUSAL_WINDOW_MS = 10_000;

export class RefusalLog {
  private readonly throttle: LineThrottle;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly log: (line: string) => void,
    private readonly now: () => number,
    /** The summary line for `n` suppressed lines of one window. */
    private readonly summary: (n: number, windowSeconds: number) => string,
    perWindow = REFUSALS_SHOWN,
    windowMs = REFUSAL_WINDOW_MS,
  ) {
    this.throttle = new LineThrottle(perWindow, windowMs);
  }

  /** `line` must already be printable. */
  write(line: string): void {
    const v = this.throttle.admit(this.now());
    if (v.suppressed > 0) this.log(this.summary(v.suppressed, this.throttle.windowMs / 1000));
    if (v.show) this.log(line);
    else this.armSummary();
  }

  /** Writes the count of the open window now (the log is ending). */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const n = this.throttle.drain();
    if (n > 0) this.log(this.summary(n, this.throttle.windowMs / 1000));
  }

  private armSummary(): void {
    const end = this.throttle.windowEndsAt();
    if (this.timer || end === null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      const n = this.throttle.settle(this.now());
      if (n > 0) this.log(this.summary(n, this.throttle.windowMs / 1000));
      // A timer may fire a little before the window's end on the caller's clock: try again.
      else if (this.throttle.windowEndsAt() !== null) this.armSummary();
    }, Math.max(1, end - this.now()));
    this.timer.unref();
  }
}
