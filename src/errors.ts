// One Error subclass per failure kind. Each has a stable `code`; the CLI maps codes to exit
// codes in one table (src/exit-codes.ts). A message names the thing, the value and the fix.

export type ErrorCode =
  | "usage" // a flag or argument is wrong
  | "config" // fuzzfleet.toml is missing, unparsable or invalid
  | "refused" // the command declined to go ahead (lock held, stale app, declined prompt…)
  | "store" // the SQLite store cannot be opened or is not what we expect
  | "protocol" // a peer sent a frame we do not accept
  | "peer-closed" // the peer closed the connection, or it failed under us
  | "frame-timeout" // no frame arrived before its deadline
  | "runtime"; // anything else that stopped the command

export class FuzzfleetError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** A flag, an argument or a combination of them is not acceptable. */
export class UsageError extends FuzzfleetError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("usage", message, options);
  }
}

/** The configuration file is missing or does not validate. */
export class ConfigError extends FuzzfleetError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("config", message, options);
  }
}

/** The command refused to go ahead; nothing was changed. */
export class RefusedError extends FuzzfleetError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("refused", message, options);
  }
}

/** The store is unusable: wrong journal mode, newer schema, missing file for a read. */
export class StoreError extends FuzzfleetError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("store", message, options);
  }
}

/** A peer broke the wire protocol. */
export class ProtocolError extends FuzzfleetError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("protocol", message, options);
  }
}

/**
 * The peer closed the connection (or the socket failed). Not a protocol violation: the peer may
 * have been stopped, killed or cut off, and the caller decides what that means (a worker that
 * left, a lost coordinator).
 */
export class PeerClosed extends FuzzfleetError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("peer-closed", message, options);
  }
}

/** No frame arrived before the wait's deadline: the peer is silent, not wrong. */
export class FrameTimeout extends FuzzfleetError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("frame-timeout", message, options);
  }
}

/** A runtime failure that is none of the above (a child could not start, a disk is full…). */
export class RuntimeFailure extends FuzzfleetError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("runtime", message, options);
  }
}
