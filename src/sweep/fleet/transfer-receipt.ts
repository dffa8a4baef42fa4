// What a sweep worker without the shared directory (files "transfer") sends with its units: it
// runs them in a directory of its own and sends each unit's failures/ and quarantine/ files in
// `put` frames before its `done`. A piece lands in the unit's scratch directory here
// (unit-landing.ts) and renews the leases of everything the worker holds, as a heartbeat does; the
// `done`'s account is then checked against what landed, and only an exact match is booked, by the
// very same engine.finish as a shared worker's (worker-protocol.ts). What the handshake and the
// welcome decide for such a worker is worker-transfer.ts.
import type { Config } from "../../config/schema.ts";
import type { CoordinatorReplyT, PutFrame, SentFilesT } from "../../net/messages.ts";
import type { SweepEngine } from "../engine/sweep-engine.ts";
import type { SweepWorker } from "./handshake.ts";
import { heartbeatHeld, heldWireIds, unitWords } from "./frames.ts";
import type { UnitLanding } from "./unit-landing.ts";
import { landingPlace } from "./worker-transfer.ts";

export interface ReceiptContext {
  engine: SweepEngine;
  config: Config;
  heartbeatSeconds: number;
  now: () => number;
  log: (line: string) => void;
  /** Writes `w`'s liveness to the store (queued; a put comes many times a second, so at most once a heartbeat). */
  touch: (w: SweepWorker) => void;
}

/** One piece of a unit's file: landed, and counted as a heartbeat of everything `w` holds. */
export function receivePut(c: ReceiptContext, w: SweepWorker, put: PutFrame, stopping: boolean): CoordinatorReplyT {
  const known = heartbeatHeld(c.engine, w, heldWireIds(c.engine, w));
  const drain = c.engine.draining !== null || stopping;
  const place = landingPlace(c.engine, c.config, w, put.unit);
  if (place === null) {
    // Taken back meanwhile: nothing of it lands; its done finds the account short and is not booked.
    w.landing!.drop(put.unit);
    return { type: "ack", drain, known, note: "not held" };
  }
  const problem = w.landing!.put(put, place);
  if (problem !== null) {
    c.log(`worker ${w.label}: refused its files (${problem})`);
    return { type: "refuse", reason: `files of unit ${put.unit} refused: ${problem}` };
  }
  const now = c.now();
  if (now - w.touchedMs >= c.heartbeatSeconds * 1000) {
    w.touchedMs = now;
    c.touch(w);
  }
  return { type: "ack", drain, known, note: null };
}

/**
 * Checks what landed for unit `unit` (a wire id) against the `done`'s account `sent`. Returns null
 * when it is exactly that, else the report that books the unit as interrupted (it is swept again).
 */
export function settleSent(
  c: ReceiptContext,
  w: SweepWorker,
  landing: UnitLanding,
  unit: number,
  sent: SentFilesT | null,
  elapsed: number,
): { outcome: "interrupted"; exitCode: null; seconds: number; error: string } | null {
  const problem = landing.settle(unit, landingPlace(c.engine, c.config, w, unit), sent);
  if (problem === null) return null;
  c.log(`worker ${w.label}: the files of ${unitWords(unit)} are not booked (${problem}); it is swept again`);
  return { outcome: "interrupted", exitCode: null, seconds: elapsed, error: `its files did not all arrive: ${problem}` };
}
