// Shape checks for the plain-value messages the core's state machines accept (quiescence,
// statistics exchange): the messages come off the wire, so nothing about them is assumed.

/** A 256-bit token or content hash: 64 lowercase hex digits. */
export const HEX64 = /^[0-9a-f]{64}$/;

/** `msg` as a record when it is a plain object (not null, not an array), else null. */
export function asObject(msg: unknown): Record<string, unknown> | null {
  return typeof msg === "object" && msg !== null && !Array.isArray(msg) ? (msg as Record<string, unknown>) : null;
}

/** A non-negative safe integer: a rank, a count. */
export function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}
