// The checks every handshake on a campaign's port makes, written once for the two machines that
// make them: the worker session (core/worker-session.ts: a worker joining a coordinator or an
// explore master) and the master join (core/peer-join.ts: a submaster joining its root). The
// token in constant time, the protocol version, the nonce read back from the shared directory (or a worker's word that it does not see it),
// the wording of a wait that ran out, and the text of a refusal (the peer's text, made printable
// and bounded before anyone logs or sends it).
import { createHash, timingSafeEqual } from "node:crypto";
import { printable } from "./log-lines.ts";

/** Who is joining whom, for the refusals that say what to fix. */
export interface Parties {
  /** What the peer is: "worker", "master". */
  peer: string;
  /** What this side is called in a refusal: "server", "root". */
  self: string;
  /** The hosts that must share the directory, and the directory: the nonce refusal's fix. */
  mount: string;
}

export const WORKER_JOINS: Parties = { peer: "worker", self: "server", mount: "every host must mount the shared campaign directory at the same path" };
export const MASTER_JOINS: Parties = { peer: "master", self: "root", mount: "every master must mount the corpus directory at the same path" };

/** Constant-time comparison of two tokens (hashing first makes the lengths equal). */
export function tokensEqual(a: string, b: string): boolean {
  const ha = createHash("sha256").update(a).digest();
  const hb = createHash("sha256").update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** The wording of a wait that ran out (the machines' deadlines and the connection's timers alike). */
export function noFrameWithin(peer: string, ms: number): string {
  return `no frame from ${peer} within ${Math.round(ms / 100) / 10}s`;
}

/** Why a peer speaking protocol `theirs` is refused, or null when it speaks ours. */
export function protocolMismatch(theirs: number, speaks: number, who: Parties): string | null {
  if (theirs === speaks) return null;
  return `protocol version ${theirs}, this ${who.self} speaks ${speaks}: the ${who.peer} runs a different fuzzfleet`;
}

/** Why a proof is refused because it did not read the nonce back, or null when it did. */
export function nonceMismatch(prove: { nonce: string | null; problem: string | null }, nonce: { path: string; value: string }, who: Parties): string | null {
  if (prove.nonce === nonce.value) return null;
  return `the ${who.peer} cannot read the nonce at ${nonce.path}${prove.problem ? ` (${prove.problem})` : ""}: ${who.mount}`;
}

/** Why a worker that does not see the shared directory is refused where its files cannot travel (an explore master). */
export function noSharedDirectory(prove: { problem: string | null }, nonce: { path: string }, who: Parties): string {
  return `the ${who.peer} does not see the shared directory (no nonce at ${nonce.path}${prove.problem ? `: ${prove.problem}` : ""}) and this ${who.self} takes no files over the connection: ${who.mount}`;
}

/** The reason a refusal carries: printable and bounded, as it is sent and logged. */
export function refusalReason(reason: string): string {
  return printable(reason, { max: 2000 });
}

/** A host name is the peer's text: made printable once, so every later line is safe. */
export function withPrintableHost<F extends { host: string }>(frame: F): F {
  return { ...frame, host: printable(frame.host, { max: 255 }) };
}
