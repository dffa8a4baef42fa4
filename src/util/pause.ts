// The sleep of a polling loop that something else can cut short: a finished child, an arriving
// result, Ctrl-C. A wake-up that comes while the loop is busy elsewhere (awaiting a reply, say)
// is remembered, so the next pause returns at once instead of sleeping through it.
export class WakeablePause {
  private wakeNow: (() => void) | null = null;
  private woken = false;

  /** Sleeps up to `ms`, or until wake() is called (or was called since the last pause). */
  pause(ms: number): Promise<void> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.wakeNow = null;
        this.woken = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeNow = done;
    });
  }

  wake(): void {
    this.woken = true;
    this.wakeNow?.();
  }
}
