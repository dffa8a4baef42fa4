// A sweep session's workers on the dashboard, with their liveness, from the store's worker and
// chunk rows (docs/dashboard.md states the rules):
//
//   left   the worker disconnected (its row is 'gone')
//   lost   its session is no longer running while its row says it is attached, or it holds a
//          chunk and has not been heard from for longer than the lease
//   slow   it holds a chunk and has been silent for longer than three heartbeats (and one
//          second), not yet the lease
//   alive  otherwise. A worker with no chunk sends no heartbeats (it asks for work, which the
//          store does not record), so it is alive while the coordinator keeps it attached; the
//          coordinator drops one silent for two leases (at least a minute) and marks it gone.
//
// The store's heartbeat times are informational and written by the group commit, so they may
// lag the coordinator's memory by a commit; the thresholds leave room for that.
import type { SessionWorker } from "../../store/port.ts";
import type { WorkerRow } from "../../ui/source.ts";
import { formatInt } from "../../config/format.ts";

export interface LivenessRules {
  /** Wall clock now (ms since the epoch). */
  nowMs: number;
  /** How often workers were told to heartbeat (seconds). */
  heartbeatSeconds: number;
  /** A chunk with no heartbeat for this long is handed to another worker (seconds). */
  leaseSeconds: number;
  /** Whether the session is running (a live coordinator, or a 'running' row). */
  sessionRunning: boolean;
}

function ms(iso: string | null): number | null {
  if (iso === null) return null;
  const t = Date.parse(iso);
  return Number.isFinite(t) ? t : null;
}

function latest(...times: (number | null)[]): number | null {
  let best: number | null = null;
  for (const t of times) if (t !== null && (best === null || t > best)) best = t;
  return best;
}

export function workerRows(workers: readonly SessionWorker[], r: LivenessRules): WorkerRow[] {
  return workers.map((w) => {
    const heard = latest(ms(w.last_seen), ms(w.connected_at), ...w.chunks.flatMap((c) => [ms(c.last_heartbeat), ms(c.leased_at)]));
    const silent = heard === null ? null : Math.max(0, (r.nowMs - heard) / 1000);
    let liveness: WorkerRow["liveness"];
    if (w.state === "gone") liveness = "left";
    else if (!r.sessionRunning) liveness = "lost";
    else if (w.chunks.length === 0 || silent === null) liveness = "alive";
    else if (silent <= 3 * r.heartbeatSeconds + 1) liveness = "alive";
    else if (silent <= r.leaseSeconds) liveness = "slow";
    else liveness = "lost";
    const holding = w.chunks.map((c) => {
      const since = ms(c.leased_at) ?? ms(c.started_at);
      return {
        text: `chunk ${c.id} ${c.lane} ${formatInt(c.seed_from)}..${formatInt(c.seed_to)}`,
        ageSeconds: since === null ? null : Math.round(Math.max(0, (r.nowMs - since) / 1000) * 10) / 10,
      };
    });
    const files = w.files === "transfer" ? "transfer" : "shared";
    const over = files === "transfer" ? ", files over the connection" : "";
    const note =
      w.state === "gone"
        ? `-j ${w.jobs}${over}, left ${w.disconnected_at ?? "(time not recorded)"}`
        : !r.sessionRunning
          ? `-j ${w.jobs}${over}; its session is over but it never left (the coordinator stopped without it)`
          : `-j ${w.jobs}${over}${w.chunks.length === 0 ? ", between chunks" : ""}`;
    return { label: `${w.host}#${w.id}`, liveness, lastHeartbeatSeconds: silent === null ? null : Math.round(silent * 10) / 10, holding, note, files };
  });
}
