// Group commit for the coordinator's store writes. Every handler that writes runs inside
// WriteBatch.run(); all handlers queued in one turn of the event loop share one transaction (one
// fsync), and each one's reply is released only after that transaction committed. Each handler
// runs in its own savepoint, so one that throws rolls back alone.
import type { Db } from "../store/db.ts";

interface Pending {
  fn: () => unknown;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

export class WriteBatch {
  private queue: Pending[] = [];
  private scheduled = false;
  /** Transactions committed and handlers run, for the capacity benchmark. */
  readonly stats = { commits: 0, handlers: 0 };

  constructor(private readonly db: Db) {}

  run<T>(fn: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    const batch = this.queue;
    this.queue = [];
    this.scheduled = false;
    const results: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    try {
      this.db.transaction(() => {
        for (const item of batch) {
          try {
            results.push({ ok: true, value: this.db.transaction(item.fn)() });
          } catch (error) {
            results.push({ ok: false, error });
          }
        }
      })();
    } catch (error) {
      // The commit itself failed (disk full, I/O error): nothing of the batch is durable.
      for (const item of batch) item.reject(error);
      return;
    }
    this.stats.commits++;
    this.stats.handlers += batch.length;
    batch.forEach((item, i) => {
      const r = results[i]!;
      if (r.ok) item.resolve(r.value);
      else item.reject(r.error);
    });
  }
}
