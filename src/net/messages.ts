// Every frame of the wire, as strict schemas (docs/protocol.md documents each one). A frame
// that does not match its schema exactly — unknown type, a missing or an extra field, a wrong
// type — is refused with the reason, and the connection is closed. The one entry point of the
// wire's schemas: the frames live by seam in frames-common.ts (handshake, pulling work, put,
// shutdown), frames-sweep.ts and frames-explore.ts; what each side accepts, and check(), are here.
import { z } from "zod";
import { printable } from "../core/log-lines.ts";
import { Challenge, FailuresRequest, Hello, Prove, Refuse, StatusRequest, Welcome, Want, Wait, Drain, Heartbeat, Put, Ack, Stop, StopAck, Bye, TextReply, JsonReply } from "./frames-common.ts";
import { Assign, Done } from "./frames-sweep.ts";
import { Task, Result, Fetch, Piece, PeerHello, Roster, PeerStatus, Probe, Vote, Decision, CommitAck, Stats, StatsAck, Release, Abandon } from "./frames-explore.ts";

export * from "./frames-common.ts";
export * from "./frames-sweep.ts";
export * from "./frames-explore.ts";

// ---- what each side accepts ------------------------------------------------------------------

/** The first frame of any connection to a coordinator. */
export const FirstFrame = z.discriminatedUnion("type", [Hello, StatusRequest, FailuresRequest, PeerHello]);
/** Frames a worker may send after the handshake. */
export const WorkerFrame = z.discriminatedUnion("type", [Want, Heartbeat, Done, Result, StopAck, Bye]);
/** What a worker may send after the handshake to a campaign that takes files over the connection (its units' files in `put`; explore's inputs by `fetch`). */
export const WorkerFrameOrPut = z.discriminatedUnion("type", [Want, Heartbeat, Done, Result, StopAck, Bye, Put, Fetch]);
/** Frames a coordinator may send to a worker in reply to a request. */
export const CoordinatorReply = z.discriminatedUnion("type", [Assign, Task, Wait, Drain, Ack, Stop, Bye, Refuse]);
/** What a master answers a `fetch` with. */
export const FetchReply = z.discriminatedUnion("type", [Piece, Refuse]);
export const HandshakeReply = z.discriminatedUnion("type", [Challenge, Welcome, Refuse]);
export const ReadReply = z.discriminatedUnion("type", [TextReply, JsonReply, Refuse]);

export type HelloFrame = z.infer<typeof Hello>;
export type FirstFrameT = z.infer<typeof FirstFrame>;
export type WorkerFrameT = z.infer<typeof WorkerFrame>;
export type WorkerFrameOrPutT = z.infer<typeof WorkerFrameOrPut>;
export type CoordinatorReplyT = z.infer<typeof CoordinatorReply>;
export type ChallengeFrame = z.infer<typeof Challenge>;
export type ProveFrame = z.infer<typeof Prove>;
export type WelcomeFrame = z.infer<typeof Welcome>;
export type FailuresRequestFrame = z.infer<typeof FailuresRequest>;
export type PeerHelloFrame = z.infer<typeof PeerHello>;

/** Validates `value` against `schema`; returns the frame or a one-line reason. */
export function check<T>(schema: z.ZodType<T>, value: unknown): { ok: true; frame: T } | { ok: false; reason: string } {
  const r = schema.safeParse(value);
  if (r.success) return { ok: true, frame: r.data };
  const issue = r.error.issues[0]!;
  // The type, the field names and the path are the peer's text: shown escaped and cut.
  const rawType = (value as { type?: unknown })?.type;
  const type = typeof rawType === "string" ? printable(rawType, { max: 64 }) : "?";
  if (issue.code === "invalid_union" && issue.path.length === 1 && issue.path[0] === "type") {
    return { ok: false, reason: `unknown frame type '${type}'` };
  }
  if (issue.code === "unrecognized_keys") {
    return { ok: false, reason: `frame '${type}': unexpected field(s) ${printable(issue.keys.join(", "), { max: 200 })}` };
  }
  const where = issue.path.length ? printable(issue.path.join("."), { max: 200 }) : "(frame)";
  return { ok: false, reason: `frame '${type}': ${where}: ${printable(issue.message, { max: 300 })}` };
}

/** Every frame either side may send. */
export type Frame =
  | z.infer<typeof Hello>
  | z.infer<typeof StatusRequest>
  | z.infer<typeof FailuresRequest>
  | z.infer<typeof Challenge>
  | z.infer<typeof Prove>
  | z.infer<typeof Welcome>
  | z.infer<typeof Refuse>
  | z.infer<typeof Want>
  | z.infer<typeof Assign>
  | z.infer<typeof Wait>
  | z.infer<typeof Drain>
  | z.infer<typeof Heartbeat>
  | z.infer<typeof Done>
  | z.infer<typeof Put>
  | z.infer<typeof Fetch>
  | z.infer<typeof Piece>
  | z.infer<typeof Task>
  | z.infer<typeof Result>
  | z.infer<typeof Ack>
  | z.infer<typeof Stop>
  | z.infer<typeof StopAck>
  | z.infer<typeof Bye>
  | z.infer<typeof TextReply>
  | z.infer<typeof JsonReply>
  | z.infer<typeof PeerHello>
  | z.infer<typeof Roster>
  | z.infer<typeof PeerStatus>
  | z.infer<typeof Probe>
  | z.infer<typeof Vote>
  | z.infer<typeof Decision>
  | z.infer<typeof CommitAck>
  | z.infer<typeof Stats>
  | z.infer<typeof StatsAck>
  | z.infer<typeof Release>
  | z.infer<typeof Abandon>;
