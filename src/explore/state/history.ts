// The growth history of an explore campaign, kept with its corpus so that `report --corpus` and
// `ui --corpus` show after the end what the live view showed while it ran:
//
//   <corpus>/.fuzzfleet/history/<epoch>-r<rank>.json   one file per master, rewritten as it goes
//
// A point is [unix seconds, analysis observations, test cases generated, unique children]: the
// master's own cumulative counters. The file is bounded (MAX_POINTS; when full every other point
// is dropped, which keeps every rate right over the wider step) and replaced atomically, so a
// reader never sees half a file. A clean end removes the work directory, never this. `corpus` is
// the number of corpus objects the master knew of at its last point, so that a view of a finished
// campaign need not list a corpus of a million objects to say how large it is.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { replaceFileInPool } from "../../files/atomic-write.ts";
import { fsyncDirAsync, writeFileAtomic } from "./durable.ts";

export const HISTORY_SCHEMA = "fuzzfleet-explore-history-v1";
/** Points kept per master. */
export const MAX_POINTS = 600;
/** A point this often, and the file rewritten every WRITE_EVERY points. */
const SAMPLE_MS = 1000;
const WRITE_EVERY = 5;

export type HistoryPoint = [t: number, executions: number, generated: number, unique: number];

export interface HistoryFile {
  schema: string;
  epoch: string;
  rank: number;
  points: HistoryPoint[];
  /** Corpus objects the master knew of at the last point (absent in files older than it). */
  corpus?: number;
}

export function historyDir(state: string): string {
  return join(state, "history");
}

export function historyName(epoch: string, rank: number): string {
  return `${epoch}-r${rank}.json`;
}

/** Adds a point to `points`, in place: a point within half a second replaces the last; full, every other one goes. */
export function addPoint(points: HistoryPoint[], p: HistoryPoint): void {
  const last = points.at(-1);
  if (last && p[0] - last[0] < 0.5) points[points.length - 1] = p;
  else points.push(p);
  if (points.length > MAX_POINTS) {
    const kept = points.filter((_, i) => i % 2 === 0 || i === points.length - 1);
    points.splice(0, points.length, ...kept);
  }
}

/** Samples the master's counters every second and writes the file every few; close() writes the last point. */
export class HistoryWriter {
  private readonly points: HistoryPoint[] = [];
  private readonly timer: NodeJS.Timeout;
  private sinceWrite = 0;
  private readonly path: string;
  private broken = false;
  private closed = false;
  /** A periodic write under way in libuv's pool: the next one is skipped rather than racing it. */
  private writing: Promise<void> | null = null;
  private corpus: number | undefined;

  constructor(
    private readonly o: { state: string; epoch: string; rank: number; counters: () => { observations: number; generated: number; claimedChildren: number; corpus?: number }; log: (line: string) => void; wallNow?: () => number; sampleMs?: number },
  ) {
    this.path = join(historyDir(o.state), historyName(o.epoch, o.rank));
    this.sample();
    this.timer = setInterval(() => this.sample(), this.o.sampleMs ?? SAMPLE_MS);
    this.timer.unref();
  }

  private sample(): void {
    const c = this.o.counters();
    this.corpus = c.corpus;
    addPoint(this.points, [(this.o.wallNow ?? Date.now)() / 1000, c.observations, c.generated, c.claimedChildren]);
    if (++this.sinceWrite >= WRITE_EVERY) this.write();
  }

  /** Every few points: the file is made and fsynced in libuv's pool, so a slow disk does not stall the master's loop. */
  private write(): void {
    this.sinceWrite = 0;
    if (this.broken || this.writing) return;
    const dir = historyDir(this.o.state);
    const ended = () => this.closed || this.broken;
    this.writing = (async () => {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      if (await replaceFileInPool(this.path, this.contents(), () => !ended())) await fsyncDirAsync(dir);
    })()
      .catch((err: Error) => this.failed(err))
      .finally(() => (this.writing = null));
  }

  private contents(): string {
    const file: HistoryFile = { schema: HISTORY_SCHEMA, epoch: this.o.epoch, rank: this.o.rank, points: this.points, ...(this.corpus === undefined ? {} : { corpus: this.corpus }) };
    return JSON.stringify(file) + "\n";
  }

  private failed(err: Error): void {
    if (this.broken) return;
    // The history is for the charts only: a full disk must not stop the campaign; said once.
    this.broken = true;
    this.o.log(`  the growth history could not be written to ${this.path} (${err.message}); the campaign goes on without it`);
  }

  /** The last point, written once a periodic write under way is over: the history ends where the final statistics do. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await this.writing;
    const c = this.o.counters();
    this.corpus = c.corpus;
    addPoint(this.points, [(this.o.wallNow ?? Date.now)() / 1000, c.observations, c.generated, c.claimedChildren]);
    if (this.broken) return;
    try {
      mkdirSync(historyDir(this.o.state), { recursive: true, mode: 0o700 });
      writeFileAtomic(this.path, this.contents());
    } catch (err) {
      this.failed(err as Error);
    }
  }
}
