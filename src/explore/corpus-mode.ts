// The mode of corpus files (`explore --corpus-mode`): what may be asked for, and why the rest is
// refused. Kept apart from state/corpus.ts so that the command line checks the flag without
// loading the corpus code.

/** The mode of corpus files unless set otherwise: only their owner reads them. */
export const DEFAULT_CORPUS_MODE = 0o600;
/** Modes a corpus file may have: the owner reads and writes it; group and others may only read. */
const CORPUS_MODE_ALLOWED = 0o644;

/**
 * Parses a corpus file mode given as octal digits (`0644`, `640`): the owner must read and write,
 * group and others may read; anything else (write or execute bits for others, set-id bits, not
 * octal) is refused with the reason.
 */
export function parseCorpusMode(value: string): number | { error: string } {
  if (!/^0?[0-7]{3}$/.test(value.trim())) return { error: `'${value}' is not an octal file mode such as 0600 or 0644` };
  const mode = parseInt(value.trim(), 8);
  if ((mode & 0o600) !== 0o600) return { error: `${octalMode(mode)} does not let the owner read and write corpus files (fuzzfleet rereads and rewrites them)` };
  if ((mode & ~CORPUS_MODE_ALLOWED) !== 0) {
    return { error: `${octalMode(mode)} gives write or execute permission beyond the owner's read and write: corpus files are named by their content, so only reading may be shared (0640 or 0644)` };
  }
  return mode;
}

export function octalMode(mode: number): string {
  return "0" + mode.toString(8).padStart(3, "0");
}

