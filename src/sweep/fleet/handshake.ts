// What the sweep coordinator asks, checks and keeps at a worker's handshake: the files it must
// prove it sees (the generator's identity and the app), the check of a shared-directory worker's
// proof (a worker with its own copy is checked in worker-transfer.ts), and the record an admitted
// worker is kept under. The protocol that drives the handshake is worker-protocol.ts.
import type { Config } from "../../config/schema.ts";
import { TRANSFER_DEFAULTS } from "../../config/schema.ts";
import type { WorkerFiles } from "../../core/worker-session.ts";
import { generatorIdentity } from "../../config/identity.ts";
import type { Connection } from "../../net/connection.ts";
import type { AttachedWorker } from "../../net/work-protocol.ts";
import type { SweepStore } from "../../store/port.ts";
import type { WorkerView } from "../engine/sweep-engine.ts";
import { UnitLanding } from "./unit-landing.ts";

/** What the worker side needs of the session it serves (sweep/session/session.ts opens one). */
export interface ServedSession {
  store: SweepStore;
  config: Config;
  outDir: string;
  sessionId: number;
  generationId: number;
  genHash: string;
  appBuild: string | null;
}

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

/** The files a worker must hash to prove it runs the coordinator's generation and app build. */
export function sweepChallenge(config: Config) {
  const id = generatorIdentity(config);
  return { identity: { command: id.command, files: id.files, base_dir: id.baseDir }, app_path: config.app?.path ?? null };
}

/** Why a worker that shares the campaign directory is refused (it sees other generator or app bytes), or null. */
export function sharedCopyProblem(s: ServedSession, prove: { gen_hash: string | null; app_build: string | null; problem: string | null }): string | null {
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

export interface Joining {
  workerId: number;
  conn: Connection;
  host: string;
  jobs: number;
  slots: number;
  files: WorkerFiles;
  /** Its rates per lane from earlier sessions of the same host and -j (the store's), to size its first chunks. */
  rates: Iterable<[string, number]>;
  nowMs: number;
}

/** The record an admitted worker is kept under, with nothing held and nothing counted yet. */
export function joinedWorker(s: ServedSession, j: Joining): SweepWorker {
  return {
    label: `${j.host}#${j.workerId}`,
    jobs: j.jobs,
    workerId: j.workerId,
    rates: new Map<string, number | null>(j.rates),
    lastCount: new Map(),
    strikes: new Map(),
    broken: new Map(),
    disabled: new Set(),
    host: j.host,
    addr: j.conn.remote,
    slots: j.slots,
    conn: j.conn,
    joinedMs: j.nowMs,
    chunks: 0,
    seeds: 0,
    gone: null,
    files: j.files,
    landing: j.files === "transfer" ? new UnitLanding(s.outDir, s.config.distributed.transfer ?? TRANSFER_DEFAULTS) : null,
    touchedMs: 0,
  };
}
