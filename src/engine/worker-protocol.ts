// SweepWorkerProtocol: the sweep's half of the worker wire (net/work-protocol.ts; explore's half
// is explore/fleet/worker-protocol.ts). The SweepEngine decides what each remote worker runs and books what it
// reports; the shared WorkerServer does the connections, the handshake and the tokenised stop.
// Every store write goes through the session's one CommitQueue (sweep/session-runner.ts builds it:
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
// A worker without the shared directory (files "transfer") runs its units in a directory of its
// own and sends each unit's failures/ and quarantine/ files in `put` frames before its `done`;
// they land in the unit's scratch directory here (unit-landing.ts; what the handshake and the
// welcome decide for such a worker is worker-transfer.ts), are checked against the
// `done`'s account, and are then booked by the very same engine.finish as a shared worker's. A put
// renews the leases of everything the worker holds, as a heartbeat does.
//
// Minimize units (engine.minimize) ride in the same `assign` and `done` as chunks, under their
// wire ids (net/messages.ts, minimizeWireId). A want is served units first, within the share of
// the fleet's slots (MinimizeUnits.mayStart), then chunks; a worker no lane gives a chunk gets units in
// its idle slots. Units never hold up a drain: it waits for chunks only; the stop interrupts the
// units still running (their finds go back to pending), and whatever is held past the stop is
// taken back. Lease expiry and a worker that leaves take units back like chunks.
import type { AddressInfo } from "node:net";
import type { StopOutcome } from "../core/lifecycle.ts";
import type { Connection } from "../net/connection.ts";
import { heldUnit, minimizeWireId as minimizeWire, PUT_PIECE_MAX, type CoordinatorReplyT, type HelloFrame, type ProveFrame, type PutFrame } from "../net/messages.ts";
import type { WorkerFiles } from "../core/worker-session.ts";
import { TRANSFER_DEFAULTS } from "../config/schema.ts";
import { UnitLanding } from "./unit-landing.ts";
import { filesWords, landingPlace, ownCopyProblem, transferTerms } from "./worker-transfer.ts";
import { WorkerServer } from "../net/worker-server.ts";
import type { AttachedWorker, ReadService, WorkProtocol, WorkRequest } from "../net/work-protocol.ts";
import { generatorIdentity } from "../generator/identity.ts";
import type { Config } from "../config/schema.ts";
import type { SweepStore } from "../store/port.ts";
import type { Assignment, MinimizeAssignment, SweepEngine, WorkerView } from "./sweep-engine.ts";
import { removeSessionScratch, wireChunk, wireUnit } from "./chunk-files.ts";
import { StoreBlocked, type CommitQueue } from "./commit-queue.ts";
import type { EngineMark } from "./sweep-engine.ts";
import { fleetSweepsNothing, SessionDrain } from "../core/session-drain.ts";
import { WakeablePause } from "../util/pause.ts";

const IDLE_POLL_SECONDS = 1;
/** The file bytes a worker without the shared directory puts in one frame. */
const PIECE_BYTES = Math.min(1 << 20, PUT_PIECE_MAX);
/** How often held chunks are checked for an expired lease. */
const LEASE_SCAN_MS = 200;

export interface SweepWorker extends AttachedWorker, WorkerView {
  readonly workerId: number;
  readonly label: string;
  readonly jobs: number;
  readonly joinedMs: number;
  chunks: number;
  seeds: number;
  /** Where its units keep their files: the shared directory, or its own (sent over the connection). */
  readonly files: WorkerFiles;
  /** The files it is sending (files "transfer" only). */
  readonly landing: UnitLanding | null;
  /** When its liveness was last written to the store for a put (they come many a second). */
  touchedMs: number;
}

/** What the worker side needs of the session it serves (sweep/session.ts opens one). */
export interface ServedSession {
  store: SweepStore;
  config: Config;
  outDir: string;
  sessionId: number;
  generationId: number;
  genHash: string;
  appBuild: string | null;
}

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

  constructor(private readonly o: SweepWorkerProtocolOptions) {
    this.books = o.books;
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
    const s = this.o.session;
    const id = generatorIdentity(s.config);
    return { identity: { command: id.command, files: id.files, base_dir: id.baseDir }, app_path: s.config.app?.path ?? null };
  }

  checkProof(prove: ProveFrame, files: WorkerFiles): string | null {
    const s = this.o.session;
    if (files === "transfer") return ownCopyProblem(s, prove);
    if (prove.gen_hash !== s.genHash) {
      return (
        `generator identity differs (worker ${prove.gen_hash?.slice(0, 12) ?? "unreadable"}, coordinator ${s.genHash.slice(0, 12)}): ` +
        `the worker sees other bytes in ${s.config.generator.identity.join(", ")}${prove.problem ? ` (${prove.problem})` : ""}, ` +
        "so its seeds would mean different tests. Run it from the shared directory; right after a change, " +
        "wait out the network filesystem's attribute cache (about a minute) and retry."
      );
    }
    if (prove.app_build !== s.appBuild) {
      return (
        `app build differs (worker ${prove.app_build ?? "unreadable"}, coordinator ${s.appBuild ?? "none"}): ` +
        `the worker sees another ${s.config.app?.path ?? "app"}, so it would test different code. ` +
        "Run it from the shared directory; right after a rebuild, wait a minute and retry."
      );
    }
    return null;
  }

  admit(conn: Connection, hello: HelloFrame, slots: number, files: WorkerFiles = "shared"): Promise<SweepWorker> {
    return this.books.run(() => {
      const s = this.o.session;
      const workerId = s.store.joinWorker({ sessionId: s.sessionId, host: hello.host, addr: conn.remote, jobs: hello.jobs, genHash: s.genHash, appBuild: s.appBuild, files });
      const seeded = s.store.earlierRates(hello.host, hello.jobs, workerId);
      const known = [...seeded].map(([lane, r]) => `${lane} ${r.toFixed(1)}/s`).join(", ");
      this.o.log(`worker ${hello.host}#${workerId} joined (-j ${hello.jobs}, from ${conn.remote})${known ? `  known rates: ${known}` : ""}  files: ${filesWords(files)}`);
      return {
        label: `${hello.host}#${workerId}`,
        jobs: hello.jobs,
        workerId,
        rates: new Map<string, number | null>(seeded),
        lastCount: new Map(),
        strikes: new Map(),
        broken: new Map(),
        disabled: new Set(),
        host: hello.host,
        addr: conn.remote,
        slots,
        conn,
        joinedMs: this.o.now(),
        chunks: 0,
        seeds: 0,
        gone: null,
        files,
        landing: files === "transfer" ? new UnitLanding(s.outDir, s.config.distributed.transfer ?? TRANSFER_DEFAULTS) : null,
        touchedMs: 0,
      };
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

  /** One piece of a unit's file: landed, and counted as a heartbeat of everything `w` holds. */
  async receive(w: SweepWorker, put: PutFrame, stopping: boolean): Promise<CoordinatorReplyT> {
    const engine = this.o.engine;
    const known = [...engine.heldBy(w).map((f) => f.chunkId), ...engine.minimize.heldBy(w).map((u) => minimizeWire(u.unitId))];
    for (const id of known) {
      const held = heldUnit(id);
      if (held.kind === "chunk") engine.heartbeat(w, held.chunkId);
      else engine.minimize.heartbeat(w, held.unitId);
    }
    const drain = engine.draining !== null || stopping;
    const place = landingPlace(this.o.engine, this.o.session.config, w, put.unit);
    if (place === null) {
      // Taken back meanwhile: nothing of it lands; its done finds the account short and is not booked.
      w.landing!.drop(put.unit);
      return { type: "ack", drain, known, note: "not held" };
    }
    const problem = w.landing!.put(put, place);
    if (problem !== null) {
      this.o.log(`worker ${w.label}: refused its files (${problem})`);
      return { type: "refuse", reason: `files of unit ${put.unit} refused: ${problem}` };
    }
    const now = this.o.now();
    if (now - w.touchedMs >= this.o.heartbeatSeconds * 1000) {
      w.touchedMs = now;
      const store = this.o.session.store;
      this.books.run(() => store.workerSeen(w.workerId), "drop").catch(() => undefined);
    }
    return { type: "ack", drain, known, note: null };
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
          result = await this.books.run(() => {
            const units: MinimizeAssignment[] = [];
            const moreUnits = (limit: number, mayStart: () => boolean) => {
              while (units.length < limit && mayStart()) {
                const u = engine.minimize.assign(w, jobs);
                if (u === null) return;
                units.push(u);
              }
            };
            // Within the share first, so minimization keeps its slots while chunks are plentiful.
            moreUnits(free, () => engine.minimize.mayStart(fleetSlots));
            const chunks: Assignment[] = [];
            let last: ReturnType<SweepEngine["assign"]> | null = null;
            while (chunks.length + units.length < free) {
              last = engine.assign(w);
              if (last.kind !== "chunk") break;
              chunks.push(last.assignment);
            }
            // Slots no chunk fills (every lane disabled for this worker) are idle: units may take them.
            if (last?.kind === "idle") moreUnits(free - chunks.length, () => true);
            return { chunks, units, last };
          }, "drop");
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
        const known = f.ids.filter((id) => {
          const held = heldUnit(id);
          return held.kind === "chunk" ? engine.heartbeat(w, held.chunkId) : engine.minimize.heartbeat(w, held.unitId);
        });
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
        if (w.landing) {
          // What landed is booked only when it is exactly what the worker says it sent.
          const problem = w.landing.settle(f.chunk_id, landingPlace(this.o.engine, this.o.session.config, w, f.chunk_id), f.files ?? null);
          if (problem !== null) {
            this.o.log(`worker ${w.label}: the files of ${held.kind === "chunk" ? `chunk ${held.chunkId}` : `minimize unit ${held.unitId}`} are not booked (${problem}); it is swept again`);
            report = { outcome: "interrupted", exitCode: null, seconds: f.elapsed, error: `its files did not all arrive: ${problem}` };
          }
        }
        const booked = await this.book(() => (held.kind === "chunk" ? engine.finish(w, held.chunkId, report) : engine.minimize.finish(w, held.unitId, report)));
        if (booked === null) return { type: "ack", drain, known: null, note: "queued: the store is busy; it is booked when the store takes writes again" };
        const { note, seeds } = booked.value;
        if (note === "recorded" && held.kind === "chunk") {
          w.chunks++;
          w.seeds += seeds;
        } else if (note === "unknown chunk") {
          const what = held.kind === "chunk" ? `chunk ${held.chunkId}` : `minimize unit ${held.unitId}`;
          this.o.log(`worker ${w.label} reported ${what}, which it does not hold — ignored`);
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
