// CommitQueue: every change to a sweep's books goes through here, so that memory never runs ahead
// of the disk (ARCHITECTURE.md §7.7).
//
// Handlers queued in one turn of the event loop share one transaction (group commit: one fsync),
// each in its own savepoint. A handler's promise settles only after the transaction that ran it
// committed. Before each attempt the queue takes a checkpoint of the in-memory books; when the
// attempt fails, the store has rolled the transaction back and the queue puts memory back to the
// checkpoint, so memory again says exactly what the store holds. What happens next depends on why
// it failed:
//
//   the store refused the write (busy, full, read-only, I/O error)     -> blocked
//   a handler threw anything else (a bug, an assertion)                 -> that handler alone is
//                                                                          rejected; the others run
//                                                                          again at once
//   the store is corrupt                                                -> failed
//
// States:  open --refused--> blocked --commit--> open
//                            blocked --give-up time passed, or abandon()--> failed (final)
//
// While blocked, "hold" handlers stay queued and run again (from the restored memory) at every
// retry, with exponential backoff; "drop" handlers are rejected with StoreBlocked at once — their
// caller answers "wait" instead. A retry that finds nothing queued leaves the store to be tried by
// the next handler that comes, whichever kind it is. When the queue fails, every handler still queued is rejected with
// the StoreError that ended the session; the books on disk are consistent, because nothing of the
// refused transactions reached them.
import assert from "node:assert/strict";
import { formatDuration } from "../../config/duration.ts";
import { StoreError } from "../../errors.ts";
import type { RefusalCode, StoreDurability, StoreRefusal, SweepStore } from "../../store/port.ts";

/** The in-memory books a transaction changes: taken before each attempt, put back after a failed one. */
export interface Books<Mark> {
  checkpoint(): Mark;
  rollback(mark: Mark): void;
  /**
   * The attempt committed: returns what has to wait until it is durable (file removals, console
   * lines); the queue runs it then.
   */
  committed(): () => void;
}

/** Makes commits durable off the event loop (the store's SessionStore.deferDurability()). */
export type Durability = StoreDurability;

/** Rejection of a "drop" handler while the store refuses writes: nothing happened, ask again later. */
export class StoreBlocked extends StoreError {
  constructor(readonly retryInMs: number, message: string) {
    super(message);
  }
}

export type WhenBlocked = "hold" | "drop";

export interface CommitQueueOptions {
  /** How long the store may refuse writes before the session gives up. */
  giveUpMs: number;
  /** Monotonic milliseconds. */
  now: () => number;
  log: (line: string) => void;
  /** Where the store is, for the messages. */
  path: string;
  /** Backoff between retries of a blocked store: first and largest wait (ms). */
  retryFirstMs?: number;
  retryMaxMs?: number;
  /** How long one statement waits for another process's lock; short, so the event loop never stalls. */
  busyMs?: number;
  /** Called once when the queue fails (the store refused writes for giveUpMs, or is corrupt). */
  onFail?: (error: StoreError) => void;
  /**
   * Absent: a commit is durable when it returns. Present: handlers settle
   * only after a `sync()` that started after their commit resolved; commits made while one runs
   * share the next.
   */
  durability?: Durability | null;
}

interface Pending {
  fn: () => unknown;
  whenBlocked: WhenBlocked;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

interface Blocked {
  sinceMs: number;
  /** Why, in the port's words, and the store's own name for it (for the operator). */
  code: RefusalCode;
  detail: string;
  retryInMs: number;
  timer: NodeJS.Timeout | null;
}

export class CommitQueue<Mark> {
  private queue: Pending[] = [];
  private scheduled = false;
  private blockedState: Blocked | null = null;
  private failure: StoreError | null = null;
  private readonly blockedWaiters = new Set<() => void>();
  private readonly settledWaiters: (() => void)[] = [];
  private readonly retryFirstMs: number;
  private readonly retryMaxMs: number;
  /** Committed batches waiting for the next sync. */
  private notDurable: { settle: () => void; batch: Pending[] }[] = [];
  private syncing = false;
  /** Transactions committed, handlers run, attempts refused and syncs made, for the benchmarks and the summary. */
  readonly stats = { commits: 0, handlers: 0, refused: 0, syncs: 0 };

  constructor(
    private readonly store: SweepStore,
    private readonly books: Books<Mark>,
    private readonly o: CommitQueueOptions,
  ) {
    this.retryFirstMs = o.retryFirstMs ?? 100;
    this.retryMaxMs = o.retryMaxMs ?? 2_000;
    this.store.setLockWait(o.busyMs ?? 25);
  }

  /** Non-null while the store refuses writes. */
  get blocked(): { sinceMs: number; code: RefusalCode; detail: string; retryInMs: number } | null {
    return this.blockedState;
  }

  /** Handlers waiting for a transaction (none while one runs: flushing is synchronous). */
  get pending(): number {
    return this.queue.length;
  }

  /** Nothing queued, and every commit durable and settled. */
  private get quiet(): boolean {
    return this.queue.length === 0 && this.notDurable.length === 0 && !this.syncing;
  }

  /** The error that ended the queue, once it failed. */
  get failed(): StoreError | null {
    return this.failure;
  }

  /**
   * Runs `fn` inside the next transaction; resolves with its value once that transaction
   * committed. While the store refuses writes, a "hold" handler waits (and runs again at every
   * retry), a "drop" handler is rejected with StoreBlocked.
   */
  run<T>(fn: () => T, whenBlocked: WhenBlocked): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.failure) return reject(this.failure);
      const b = this.blockedState;
      // While a retry is armed, "drop" is refused and "hold" waits for it. Once the retry came and
      // found nothing queued (every refused handler was a "drop" one), the store is tried again with
      // the next handler of either kind: nothing else would ever find out that it takes writes again.
      const retryArmed = b !== null && b.timer !== null;
      if (retryArmed && whenBlocked === "drop") return reject(this.blockedError());
      this.queue.push({ fn, whenBlocked, resolve: resolve as (v: unknown) => void, reject });
      if (!retryArmed) this.schedule();
    });
  }

  /** Callers waiting for the store to refuse writes (onBlocked, whenBlocked). */
  get waitsForBlock(): number {
    return this.blockedWaiters.size;
  }

  /** Resolves as soon as the store refuses writes (at once if it does now). */
  whenBlocked(): Promise<void> {
    return new Promise((resolve) => this.onBlocked(resolve));
  }

  /**
   * Calls `wake` once, as soon as the store refuses writes (on the next tick if it does now, or
   * the queue failed). Returns the way to take it back: a caller that stops waiting (its change
   * committed) must, or every such wait would stay held until the store next refuses a write.
   */
  onBlocked(wake: () => void): () => void {
    if (this.blockedState || this.failure) {
      queueMicrotask(wake);
      return () => undefined;
    }
    this.blockedWaiters.add(wake);
    return () => this.blockedWaiters.delete(wake);
  }

  private wakeBlocked(): void {
    const waiters = [...this.blockedWaiters];
    this.blockedWaiters.clear();
    for (const wake of waiters) wake();
  }

  /** Resolves when nothing is queued any more (committed and durable, or rejected because the queue failed). */
  settled(): Promise<void> {
    if (this.quiet || this.failure) return Promise.resolve();
    return new Promise((resolve) => {
      this.settledWaiters.push(resolve);
      // A backstop beside the wake-ups: a missed one must never leave a session waiting for good.
      const check = setInterval(() => {
        if (!this.quiet && !this.failure) return;
        clearInterval(check);
        resolve();
      }, 250);
    });
  }

  /** Ends the queue now (Ctrl-C while the store refuses writes): whatever is queued is rejected. */
  abandon(reason: string): void {
    if (this.failure) return;
    this.fail(new StoreError(reason));
  }

  /** The session is over and its store about to close: later changes (a socket closing late) are refused quietly. */
  close(): void {
    if (this.failure) return;
    if (this.blockedState?.timer) clearTimeout(this.blockedState.timer);
    this.failure = new StoreError("the session's store is closed");
    for (const item of this.queue.splice(0)) item.reject(this.failure);
    for (const g of this.notDurable.splice(0)) for (const item of g.batch) item.reject(this.failure);
    this.wakeBlocked();
    this.wakeSettled();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    if (this.failure || this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    const mark = this.books.checkpoint();
    const values: unknown[] = [];
    let culprit = -1;
    try {
      this.store.transaction(() => {
        for (let i = 0; i < batch.length; i++) {
          try {
            values.push(this.store.transaction(batch[i]!.fn));
          } catch (err) {
            // A refused write ends the whole attempt; anything else is this handler's own fault.
            if (this.store.refusalOf(err) === null) culprit = i;
            throw err;
          }
        }
      });
    } catch (err) {
      this.books.rollback(mark);
      this.refused(batch, culprit, err);
      return;
    }
    this.stats.commits++;
    this.stats.handlers += batch.length;
    if (this.blockedState) this.unblocked(batch.length);
    const afterDurable = this.books.committed();
    const settle = () => {
      afterDurable();
      batch.forEach((item, i) => item.resolve(values[i]));
    };
    if (this.o.durability) {
      this.notDurable.push({ settle, batch });
      this.syncNext();
    } else settle();
    if (this.queue.length > 0) this.schedule();
    else this.wakeSettled();
  }

  /** Starts an fsync for the batches committed so far unless one runs; the batches of the next wait for it. */
  private syncNext(): void {
    if (this.syncing || this.notDurable.length === 0 || this.failure) return;
    this.syncing = true;
    const group = this.notDurable;
    this.notDurable = [];
    this.o.durability!.sync().then(
      () => {
        this.syncing = false;
        this.stats.syncs++;
        for (const g of group) g.settle();
        this.syncNext();
        this.wakeSettled();
      },
      (err: unknown) => {
        // Committed but not known to be on disk: nothing that depends on it may happen. The
        // store is consistent; a later session finds what reached the disk.
        this.syncing = false;
        const error = err instanceof StoreError ? err : new StoreError(`cannot make the store ${this.o.path} durable: ${(err as Error).message}`, { cause: err });
        for (const g of [...group, ...this.notDurable.splice(0)]) for (const item of g.batch) item.reject(error);
        this.fail(error);
      },
    );
  }

  private wakeSettled(): void {
    if (!this.quiet && !this.failure) return;
    for (const wake of this.settledWaiters.splice(0)) wake();
  }

  private refused(batch: Pending[], culprit: number, err: unknown): void {
    const refusal = this.store.refusalOf(err);
    if (culprit < 0 && refusal === null) {
      // Neither a handler nor the store: the transaction itself could not run (a bug, a closed connection).
      this.queue = [...batch, ...this.queue];
      this.fail(new StoreError(`cannot write the store ${this.o.path}: ${(err as Error).message}`, { cause: err }));
      return;
    }
    if (culprit >= 0) {
      batch[culprit]!.reject(err);
      this.queue = [...batch.filter((_, i) => i !== culprit), ...this.queue];
      // Memory is back at the checkpoint: the others run again from there.
      if (this.queue.length > 0) (this.blockedState ? this.retryLater() : this.schedule());
      else this.wakeSettled();
      return;
    }
    this.stats.refused++;
    assert.ok(refusal !== null, "a refused attempt with no culprit is the store's refusal");
    if (refusal.code === "corrupt") {
      this.queue = [...batch, ...this.queue];
      this.fail(new StoreError(`the store ${this.o.path} is damaged (${refusal.detail}): ${(err as Error).message}; nothing more is written to it`, { cause: err }));
      return;
    }
    const kept = batch.filter((item) => item.whenBlocked === "hold");
    const dropped = batch.filter((item) => item.whenBlocked === "drop");
    this.queue = [...kept, ...this.queue];
    const first = this.blockedState === null;
    if (first) {
      this.blockedState = { sinceMs: this.o.now(), code: refusal.code, detail: refusal.detail, retryInMs: this.retryFirstMs, timer: null };
      this.o.log(`${describeRefusal(this.o.path, refusal)} — retrying; nothing is lost (giving up after ${formatMinutes(this.o.giveUpMs)})`);
      this.wakeBlocked();
    } else {
      this.blockedState!.code = refusal.code;
      this.blockedState!.detail = refusal.detail;
      this.blockedState!.retryInMs = Math.min(this.blockedState!.retryInMs * 2, this.retryMaxMs);
    }
    for (const item of dropped) item.reject(this.blockedError());
    if (this.queue.length === 0) this.wakeSettled();
    if (this.o.now() - this.blockedState!.sinceMs >= this.o.giveUpMs) {
      this.fail(
        new StoreError(
          `${describeRefusal(this.o.path, refusal)} for ${formatMinutes(this.o.now() - this.blockedState!.sinceMs)}; giving up. ` +
            "The store holds every chunk that completed before; what was waiting is swept again next session. " +
            "Raise [store] give_up_minutes to wait longer.",
          { cause: err },
        ),
      );
      return;
    }
    this.retryLater();
  }

  private retryLater(): void {
    const b = this.blockedState;
    assert.ok(b !== null, "retryLater without a blocked store");
    if (b.timer !== null) return;
    b.timer = setTimeout(() => {
      b.timer = null;
      this.flush();
    }, b.retryInMs);
  }

  private unblocked(waiting: number): void {
    const b = this.blockedState!;
    if (b.timer) clearTimeout(b.timer);
    this.blockedState = null;
    this.o.log(`the store ${this.o.path} takes writes again after ${formatMinutes(this.o.now() - b.sinceMs)} (${waiting} change(s) were waiting)`);
  }

  private blockedError(): StoreBlocked {
    const b = this.blockedState!;
    return new StoreBlocked(b.retryInMs, `${describeRefusal(this.o.path, b)}; try again shortly`);
  }

  private fail(error: StoreError): void {
    if (this.blockedState?.timer) clearTimeout(this.blockedState.timer);
    this.failure = error;
    for (const item of this.queue.splice(0)) item.reject(error);
    this.wakeBlocked();
    this.wakeSettled();
    this.o.onFail?.(error);
  }
}

/** One line saying what blocks the store, for the operator. */
export function describeRefusal(path: string, r: StoreRefusal): string {
  switch (r.code) {
    case "busy":
      return `the store ${path} is locked by another process (a reader holding a transaction? a writer outside fuzzfleet?)`;
    case "full":
      return `the disk holding the store ${path} is full (${r.detail}): free some space`;
    case "readonly":
      return `the store ${path} has become read-only (${r.detail}): a read-only remount, or its permissions changed`;
    default:
      return `the store ${path} cannot be written (${r.detail})`;
  }
}

function formatMinutes(ms: number): string {
  return formatDuration(Math.round(ms / 1000));
}
