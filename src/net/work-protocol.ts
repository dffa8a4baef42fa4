// The campaign's half of the worker wire, as the worker server sees it: one interface, two
// implementations — the sweep's (sweep/fleet/worker-protocol.ts, SweepWorkerProtocol) and explore's
// (explore/fleet/worker-protocol.ts). What a worker is *given* and what its reports *mean* is theirs; the
// connection, the handshake's order, the token, the bounds and the tokenised stop are the
// server's (net/worker-server.ts, driving core/worker-session.ts).
//
// Per worker the server calls, in this order: closedToNewWorkers, challenge, checkProof, admit,
// welcome; then handle for every request or report (receive for a `put` and fetch for a `fetch`,
// from a worker without the shared directory, where the campaign takes files); then detach, exactly once, however the
// connection ended (also after an exact stop_ack). Nothing is called concurrently for one worker.
import type { Connection } from "./connection.ts";
import type { WorkerFiles } from "../core/worker-session.ts";
import type { ChallengeFrame, CoordinatorReplyT, ExploreSetupT, FailuresRequestFrame, FetchFrame, Frame, HelloFrame, ProveFrame, PutFrame, TransferTermsT, WorkerFrameT } from "./messages.ts";

export type ReadReply = { type: "text"; text: string } | { type: "json"; data: unknown };

/** The read-only requests (status, failures) a server answers on its port. */
export interface ReadService {
  status(json: boolean): ReadReply;
  failures(req: FailuresRequestFrame): ReadReply;
}

/** A worker admitted by the server. Campaign protocols extend it with their own bookkeeping. */
export interface AttachedWorker {
  /** `host#id`, unique in the campaign; the host part is already printable. */
  readonly label: string;
  readonly workerId: number;
  readonly host: string;
  readonly addr: string;
  readonly jobs: number;
  readonly slots: number;
  readonly conn: Connection;
  /** Why it left, once it did. */
  gone: string | null;
}

/** A worker's requests and reports: everything it sends but stop_ack and bye (the server's own). */
export type WorkRequest = Exclude<WorkerFrameT, { type: "stop_ack" } | { type: "bye" }>;

/** The fields of `welcome` the campaign decides. */
export interface WelcomeTerms {
  session: number;
  generation: number;
  lease_seconds: number;
  heartbeat_seconds: number;
  explore: ExploreSetupT | null;
  /** For a worker without the shared directory: where its files lie and the caps. */
  transfer?: TransferTermsT | null;
}

/** Who may join, and what they must prove. */
export interface WorkerAdmission<W extends AttachedWorker> {
  /** The campaign kind it serves (the welcome frame's `mode` field). */
  readonly campaign: "sweep" | "explore";
  /** Why no new worker is taken (the campaign is ending), or null. */
  closedToNewWorkers(): string | null;
  /** What the worker must prove it sees (besides the nonce). */
  challenge(): Omit<ChallengeFrame, "type" | "nonce_path">;
  /**
   * Whether a worker that does not see the shared directory is taken: its units' files then travel
   * over the connection (receive). Absent: no.
   */
  readonly takesTransfer?: boolean;
  /** Why the proof is not good enough (both values named), or null to admit. */
  checkProof(prove: ProveFrame, files: WorkerFiles): string | null;
  /** Books the worker; a rejection refuses it with the error's message. `hello.host` is printable. */
  admit(conn: Connection, hello: HelloFrame, slots: number, files: WorkerFiles): Promise<W>;
  welcome(w: W): WelcomeTerms;
}

/** What an admitted worker's frames mean. */
export interface WorkerService<W extends AttachedWorker> {
  /**
   * want / heartbeat / done / result. `stopping`: the worker's stop was asked; only reports
   * reach here then (want and heartbeat get the stop), and they are still booked.
   */
  handle(w: W, frame: WorkRequest, stopping: boolean): Promise<CoordinatorReplyT>;
  /** One piece of a unit's file from a worker without the shared directory (only where takesTransfer). */
  receive?(w: W, put: PutFrame, stopping: boolean): Promise<CoordinatorReplyT>;
  /** A piece of a task's input for a worker without the shared directory (explore): `piece`, or `refuse`. Absent: refused. */
  fetch?(w: W, f: FetchFrame): Promise<Frame>;
  /** The worker is gone: take its work back. */
  detach(w: W, why: string): Promise<void>;
}

export interface WorkProtocol<W extends AttachedWorker> extends WorkerAdmission<W>, WorkerService<W> {}
