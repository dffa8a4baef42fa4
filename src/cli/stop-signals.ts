// SIGINT and SIGTERM as one stop for a command: the first aborts one AbortSignal, which the
// command takes as a parameter (graceful stop: it winds down, and every wait it makes is bounded);
// every later one is only heard — a line that the stop is under way, or the hard stop of a command
// that has one (`run` ends at once while the store refuses writes). The handlers exist only while
// the command runs.
//
//   running --first SIGINT/SIGTERM: listeners (again = false), then abort--> stopping
//   stopping --every later one: listeners (again = true)--> stopping

export type StopListener = (sig: NodeJS.Signals, again: boolean) => void;

/** What a command is given: the signal, and a way to hear every SIGINT/SIGTERM itself. */
export interface SignalStop {
  /** Aborted by the first SIGINT or SIGTERM; its reason is that signal's name. */
  readonly signal: AbortSignal;
  /** `listener` hears every later signal, before the first one aborts `signal`. */
  onSignal(listener: StopListener): void;
}

/** What the command line says on a signal, before the command's own listeners hear it. */
export interface StopWords {
  /** The first signal, before `signal` is aborted. */
  stopping?: (sig: NodeJS.Signals) => void;
  /** Every later one. */
  again?: (sig: NodeJS.Signals) => void;
}

/** How a signal is named to the user: Ctrl-C for SIGINT. */
export function signalLabel(sig: NodeJS.Signals): string {
  return sig === "SIGINT" ? "Ctrl-C" : sig;
}

const SIGNALS: readonly NodeJS.Signals[] = ["SIGINT", "SIGTERM"];

/** Runs `command` with SIGINT and SIGTERM turned into one SignalStop; the handlers go when it ends. */
export async function withSignalStop<T>(command: (stop: SignalStop) => Promise<T>, words: StopWords = {}): Promise<T> {
  const controller = new AbortController();
  const listeners: StopListener[] = [];
  const onSignal = (sig: NodeJS.Signals): void => {
    const again = controller.signal.aborted;
    if (again) words.again?.(sig);
    else words.stopping?.(sig);
    for (const l of listeners) l(sig, again);
    if (!again) controller.abort(sig);
  };
  for (const sig of SIGNALS) process.on(sig, onSignal);
  try {
    return await command({ signal: controller.signal, onSignal: (l) => void listeners.push(l) });
  } finally {
    for (const sig of SIGNALS) process.off(sig, onSignal);
  }
}
