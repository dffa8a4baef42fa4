// SweepWorkerProtocol: the sweep's half of the worker wire (net/work-protocol.ts; explore's half
// is explore/fleet/worker-protocol.ts). The SweepEngine decides what each remote worker runs and books what it
// reports; the shared WorkerServer does the connections, the handshake and the tokenised stop.
// Every store write goes through the session's one CommitQueue (sweep/session/session-runner.ts builds it:
// group commit, memory rolled back with a refused transaction).
//
// A store that refuses writes never stalls a worker: heartbeats are answered from memory, `want`
// gets `wait`, a `done` is acknowledged as queued (it is booked when the store takes writes
// again, from the queue, not from the worker), and leases are not expired meanwhile (reissuing
// would need a write; the holders are alive and answering).
//
// How the session ends is core/session-drain.ts's machine (serving -> draining -> drained ->
// stopping -> closed); run() drives it and sleeps until something can start or end a drain: the
// floor's or the drain grace's deadline, Ctrl-C, a chunk that lands or is taken back, a lane
// disabled on a worker, a worker that leaves, the store failing or taking writes again. Only the
// lease-expiry scan runs on a timer.
//
// Beside it: which units fill a `want` (unit-packing.ts), the units and their wire ids as frames
// carry them (sweep-frames.ts), and the files a worker without the shared directory sends
// (transfer-receipt.ts). Units never hold up a drain: it waits for chunks only; the stop
// interrupts the units still running (their finds go back to pending), and whatever is held past
// the stop is taken back. Lease expiry and a worker that leaves take units back like chunks.
import type { AddressInfo } from "node:net";
import type { StopOutcome } from "../../core/lifecycle.ts";
import type { Connection } from "../../net/connection.ts";
import { heldUnit, PUT_PIECE_MAX, type CoordinatorReplyT, type HelloFrame, type ProveFrame, type PutFrame } from "../../net/messages.ts";
import type { WorkerFiles } from "../../core/worker-session.ts";
import { filesWords, ownCopyProblem, transferTerms } from "./worker-transfer.ts";
import { WorkerServer } from "../../net/worker-server.ts";
import type { ReadService, WorkProtocol, WorkRequest } from "../../net/work-protocol.ts";
import type { SweepEngine } from "../engine/sweep-engine.ts";
import { joinedWorker, sharedCopyProblem, sweepChallenge, type ServedSession, type SweepWorker } from "./handshake.ts";
import { removeSessionScratch } from "../engine/chunk-files.ts";
import { heartbeatHeld, unitWords, wireChunk, wireUnit } from "./frames.ts";
import { packWant } from "./unit-packing.ts";
import { receivePut, settleSent, type ReceiptContext } from "./transfer-receipt.ts";
import { StoreBlocked, type CommitQueue } from "../engine/commit-queue.ts";
import type { EngineMark } from "../engine/sweep-engine.ts";
import { fleetSweepsNothing, SessionDrain } from "../../core/session-drain.ts";
import { WakeablePause } from "../../util/pause.ts";

const IDLE_POLL_SECONDS = 1;
/** The file bytes a worker without the shared directory puts in one frame. */
const PIECE_BYTES = Math.min(1 << 20, PUT_PIECE_MAX);
/** How often held chunks are checked for an expired lease. */
const LEASE_SCAN_MS = 200;

export type { ServedSession, SweepWorker };

export interface SweepWorkerProtocolOptions {
  session: ServedSession;
  engine: SweepEngine;
  /** The session's commit queue over the engine's books; its onFail must call storeFailed(). */
  books: CommitQueue<EngineMark>;
  token: string;
  leaseSeconds: number;
  heartbeatSeconds: number;
  drainGraceSeconds: number;
  stopGraceSeconds: number;
  nonce: { path: string; value: string };
  now: () => number;
  read: ReadService;
  log: (line: string) => void;
}

export interface ShutdownReport {
  outcome: StopOutcome;
  /** Chunks reissued because the drain grace ran out. */
  abandoned: number;
  scratchRemoved: number;
}

export class SweepWorkerProtocol implements WorkProtocol<SweepWorker> {
  readonly campaign = "sweep" as const;
  readonly takesTransfer = true;
  readonly books: CommitQueue<EngineMark>;
  readonly server: WorkerServer<SweepWorker>;
  /** Chunks whose reissue is queued, so the lease scan does not queue it twice. */
  private readonly reissuing = new Set<number>();
  /** Minimize units whose reissue is queued. */
  private readonly reissuingUnits = new Set<number>();
  /** run()'s sleep, cut short by the events that can start or end a drain. */
  private readonly sleeper = new WakeablePause();

  private readonly receipt: ReceiptContext;

  constructor(private readonly o: SweepWorkerProtocolOptions) {
    this.books = o.books;
    this.receipt = {
      engine: o.engine,
      config: o.session.config,
      heartbeatSeconds: o.heartbeatSeconds,
      now: o.now,
      log: o.log,
      touch: (w) => void this.books.run(() => o.session.store.workerSeen(w.workerId), "drop").catch(() => undefined),
    };
    this.server = new WorkerServer<SweepWorker>({
      token: o.token,
      protocol: this,
      nonce: o.nonce,
      read: o.read,
      leaseSeconds: o.leaseSeconds,
      now: o.now,
      log: o.log,
    });
  }

  get workers(): Map<string, SweepWorker> {
    return this.server.workers;
  }

  get everyone(): SweepWorker[] {
    return this.server.everyone;
  }

  listen(bind: string, port: number): Promise<AddressInfo> {
    return this.server.listen(bind, port);
  }

  /** Serves until the session drains, then stops every worker. Throws the StoreError of a store that stayed unwritable. */
  async run(signal: AbortSignal): Promise<ShutdownReport> {
    const engine = this.o.engine;
    const wake = () => this.sleeper.wake();
    signal.addEventListener("abort", wake, { once: true });
    let wasBlocked = false;
    const leaseScan = setInterval(() => {
      if (this.books.blocked) {
        wasBlocked = true;
        return;
      }
      for (const f of engine.expiredLeases(this.o.leaseSeconds)) this.reissue(f.chunkId, `no heartbeat for ${this.o.leaseSeconds}s`);
      for (const u of engine.minimize.expiredLeases(this.o.leaseSeconds)) this.reissueUnit(u.unitId, `no heartbeat for ${this.o.leaseSeconds}s`);
      // A drain grace that ran out while the store refused writes acts once it takes them again.
      if (wasBlocked) wake();
      wasBlocked = false;
    }, LEASE_SCAN_MS);
    const drain = new SessionDrain({ drainGraceMs: this.o.drainGraceSeconds * 1000 });
    let abandoned = 0;
    try {
      while (drain.state !== "drained") {
        // One reading of the clock per turn: a second one could find the deadline passed that the
        // first did not, and the turn would then sleep as if the store were blocked.
        const now = this.o.now();
        for (const action of drain.turn({
          now,
          remainingSeconds: engine.remainingSeconds(),
          floorSeconds: engine.floorSeconds,
          interrupted: signal.aborted,
          engineDraining: engine.draining,
          chunksInFlight: engine.inFlightChunks().length,
          storeBlocked: this.books.blocked !== null,
          storeFailed: this.books.failed !== null,
          fleetSweepsNothing: this.fleetSweepsNothing(),
        })) {
          switch (action.kind) {
            case "drain":
              engine.drain(action.reason);
              this.o.log(action.line);
              break;
            case "abandon":
              abandoned = action.chunks;
              for (const f of engine.inFlightChunks()) this.reissue(f.chunkId, "drain grace expired");
              await this.books.settled();
              this.o.log(`${abandoned} chunk(s) were still running when the drain grace expired — not counted; the next session re-sweeps them`);
              break;
            case "sleep":
              await this.sleeper.pause(action.ms);
              break;
          }
        }
      }
    } finally {
      clearInterval(leaseScan);
      signal.removeEventListener("abort", wake);
    }
    drain.stop();
    const outcome = await this.server.stopAll(this.o.stopGraceSeconds * 1000);
    drain.stopped();
    this.server.close();
    // Units not reported by the end of the stop: their finds wait for a later session's units.
    for (const u of [...engine.minimize.inFlight.values()]) this.reissueUnit(u.unitId, "the session ended");
    await this.books.settled();
    if (this.books.failed) throw this.books.failed;
    return { outcome, abandoned, scratchRemoved: removeSessionScratch(this.o.session.store, this.o.session.outDir, this.o.session.sessionId) };
  }

  /** The commit queue gave up on the store: run() ends the session. */
  storeFailed(): void {
    this.sleeper.wake();
  }

  /**
   * Something that can start or end a drain happened: a chunk landed or was taken back (a lane may
   * have been disabled on its worker), a worker left, a drain began.
   */
  private sessionMayEnd(): void {
    if (this.o.engine.draining || this.fleetSweepsNothing()) this.sleeper.wake();
  }

  /** The attached workers, as they are, can sweep nothing (core/session-drain.ts). */
  private fleetSweepsNothing(): boolean {
    const lanes = this.o.engine
      .engineLanes()
      .filter((l) => l.config.enabled)
      .map((l) => ({ name: l.config.name, hasWork: l.state.hasWork() }));
    return fleetSweepsNothing(lanes, [...this.server.workers.values()]);
  }

  private reissue(chunkId: number, why: string): void {
    if (this.reissuing.has(chunkId)) return;
    this.reissuing.add(chunkId);
    this.books
      .run(() => this.o.engine.reissue(chunkId, why), "hold")
      .catch(() => undefined)
      .finally(() => {
        this.reissuing.delete(chunkId);
        this.sessionMayEnd();
      });
  }

  private reissueUnit(unitId: number, why: string): void {
    if (this.reissuingUnits.has(unitId)) return;
    this.reissuingUnits.add(unitId);
    this.books
      .run(() => this.o.engine.minimize.reissue(unitId, why), "hold")
      .catch(() => undefined)
      .finally(() => this.reissuingUnits.delete(unitId));
  }

  /** The slots of every worker attached now: what the minimize share is a share of. */
  private fleetSlots(): number {
    let slots = 0;
    for (const w of this.server.workers.values()) slots += w.slots;
    return slots;
  }

  /**
   * Queues `fn` to be booked; resolves with its value once committed, or with null as soon as the
   * store refuses writes (the change stays queued and is booked when the store takes writes again).
   */
  private book<T>(fn: () => T): Promise<{ value: T } | null> {
    const committed = this.books.run(fn, "hold").then((value) => ({ value }));
    // A chunk booked as finished or taken back can start or end a drain, also when booked late (a
    // blocked store); a failure of the whole queue is handled by run(), nobody else waits on this promise.
    committed.then(() => this.sessionMayEnd(), () => undefined);
    // Not a race with whenBlocked(): a wait left pending on the queue per booked change would
    // hold memory for every change of the session while the store takes writes.
    return new Promise((resolve, reject) => {
      const stop = this.books.onBlocked(() => resolve(null));
      committed.then(
        (v) => {
          stop();
          resolve(v);
        },
        (err) => {
          stop();
          reject(err);
        },
      );
    });
  }

  /** Stops listening and drops every connection (the session is closing; its runner closes the books). */
  close(): void {
    this.server.close();
  }

  // ---- WorkProtocol ----------------------------------------------------------------------------

  closedToNewWorkers(): string | null {
    return this.o.engine.draining ? "this campaign is ending; start the worker for the next one" : null;
  }

  challenge() {
    return sweepChallenge(this.o.session.config);
  }

  checkProof(prove: ProveFrame, files: WorkerFiles): string | null {
    return files === "transfer" ? ownCopyProblem(this.o.session, prove) : sharedCopyProblem(this.o.session, prove);
  }

  admit(conn: Connection, hello: HelloFrame, slots: number, files: WorkerFiles = "shared"): Promise<SweepWorker> {
    return this.books.run(() => {
      const s = this.o.session;
      const workerId = s.store.joinWorker({ sessionId: s.sessionId, host: hello.host, addr: conn.remote, jobs: hello.jobs, genHash: s.genHash, appBuild: s.appBuild, files });
      const seeded = s.store.earlierRates(hello.host, hello.jobs, workerId);
      const known = [...seeded].map(([lane, r]) => `${lane} ${r.toFixed(1)}/s`).join(", ");
      this.o.log(`worker ${hello.host}#${workerId} joined (-j ${hello.jobs}, from ${conn.remote})${known ? `  known rates: ${known}` : ""}  files: ${filesWords(files)}`);
      return joinedWorker(s, { workerId, conn, host: hello.host, jobs: hello.jobs, slots, files, rates: seeded, nowMs: this.o.now() });
    }, "drop");
  }

  welcome(w: SweepWorker) {
    const s = this.o.session;
    return {
      session: s.sessionId,
      generation: s.generationId,
      lease_seconds: this.o.leaseSeconds,
      heartbeat_seconds: this.o.heartbeatSeconds,
      explore: null,
      transfer: w.files === "transfer" ? transferTerms(s.config, PIECE_BYTES) : null,
    };
  }

  /** One piece of a unit's file (transfer-receipt.ts). */
  async receive(w: SweepWorker, put: PutFrame, stopping: boolean): Promise<CoordinatorReplyT> {
    return receivePut(this.receipt, w, put, stopping);
  }

  async handle(w: SweepWorker, f: WorkRequest, stopping: boolean): Promise<CoordinatorReplyT> {
    const engine = this.o.engine;
    switch (f.type) {
      case "want": {
        if (engine.draining) return { type: "drain", reason: engine.draining };
        const free = Math.min(f.slots, w.slots - engine.heldBy(w).length - engine.minimize.heldBy(w).length);
        if (free <= 0) return { type: "wait", seconds: IDLE_POLL_SECONDS };
        // Asked of the store even while it refuses writes: refused at once while a retry is armed,
        // tried otherwise. An idle fleet has nothing else queued, so this is how it finds out that
        // the store takes writes again, or that it has refused them for give_up_minutes.
        let result;
        try {
          const fleetSlots = this.fleetSlots();
          const jobs = engine.minimize.jobsOf(w.jobs);
          result = await this.books.run(() => packWant(engine, w, free, fleetSlots, jobs), "drop");
        } catch (err) {
          if (err instanceof StoreBlocked) return { type: "wait", seconds: err.retryInMs / 1000 };
          throw err;
        }
        // Looking for a chunk may have found the deadline floor: the drain starts now.
        this.sessionMayEnd();
        if (result.chunks.length + result.units.length > 0) {
          return {
            type: "assign",
            minimize: result.units.map(wireUnit),
            chunks: result.chunks.map(wireChunk),
          };
        }
        if (result.last?.kind === "drain") return { type: "drain", reason: result.last.reason };
        return { type: "wait", seconds: IDLE_POLL_SECONDS };
      }
      case "heartbeat": {
        // Liveness is memory; the store's copy of it (last_heartbeat) is informational and may lag.
        const known = heartbeatHeld(engine, w, f.ids);
        const store = this.o.session.store;
        this.books
          .run(() => {
            store.workerSeen(w.workerId);
            for (const id of known) {
              const held = heldUnit(id);
              if (held.kind === "chunk") store.chunkHeartbeat(held.chunkId);
            }
          }, "drop")
          .catch(() => undefined);
        return { type: "ack", drain: engine.draining !== null, known, note: null };
      }
      case "done": {
        // Results that arrive while stopping are still booked: late work is consumed, not dropped.
        let report = { outcome: f.outcome, exitCode: f.rc, seconds: f.elapsed, error: f.error ?? undefined };
        const drain = engine.draining !== null || stopping;
        const held = heldUnit(f.chunk_id);
        // What landed is booked only when it is exactly what the worker says it sent.
        if (w.landing) report = settleSent(this.receipt, w, w.landing, f.chunk_id, f.files ?? null, f.elapsed) ?? report;
        const booked = await this.book(() => (held.kind === "chunk" ? engine.finish(w, held.chunkId, report) : engine.minimize.finish(w, held.unitId, report)));
        if (booked === null) return { type: "ack", drain, known: null, note: "queued: the store is busy; it is booked when the store takes writes again" };
        const { note, seeds } = booked.value;
        if (note === "recorded" && held.kind === "chunk") {
          w.chunks++;
          w.seeds += seeds;
        } else if (note === "unknown chunk") {
          this.o.log(`worker ${w.label} reported ${unitWords(f.chunk_id)}, which it does not hold — ignored`);
        }
        return { type: "ack", drain: engine.draining !== null || stopping, known: null, note };
      }
      case "result":
        this.o.log(`worker ${w.label} sent an explore result to a sweep coordinator — ignored`);
        return { type: "refuse", reason: "this coordinator runs a sweep; 'result' frames belong to explore campaigns" };
    }
  }

  async detach(w: SweepWorker, why: string): Promise<void> {
    // A connection lost mid-transfer: nothing of it is kept; the units are swept again and their files sent again.
    w.landing?.dropAll();
    const held = this.o.engine.heldBy(w);
    const units = this.o.engine.minimize.heldBy(w);
    await this.book(() => {
      this.o.session.store.workerGone(w.workerId);
      for (const f of held) this.o.engine.reissue(f.chunkId, `worker ${w.label} left (${why})`);
      for (const u of units) this.o.engine.minimize.reissue(u.unitId, `worker ${w.label} left (${why})`);
    });
  }
}
