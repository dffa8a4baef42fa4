// A framed, validated connection over one TCP socket. Every wait has a deadline; a frame that
// breaks the framing or its schema is a ProtocolError, after which the connection is unusable; a
// peer that goes away is PeerClosed, a wait that runs out FrameTimeout (both in src/errors.ts).
//
// Memory is bounded by reading only as fast as frames are consumed: at most one decoded frame
// waits for its receive(), and while one waits, while a large body has no reservation in the
// shared ReadBudget, or while the peer leaves our replies unread, the socket is paused and TCP
// holds the sender back. A server's connection starts at FIRST_FRAME_BYTES until authenticated().
//
// Reading:  flowing --frame decoded, nobody waiting | body over UNRESERVED_BODY_BYTES without a
//           reservation | unread replies over WRITE_BACKLOG_BYTES--> paused
//           paused --frame taken | reservation granted | replies drained--> flowing
//           any --framing error--> paused for good (the owner sends its refusal, then closes)
import assert from "node:assert/strict";
import { connect as netConnect, type Socket } from "node:net";
import type { z } from "zod";
import { FrameTimeout, PeerClosed, ProtocolError } from "../errors.ts";
import { noFrameWithin } from "../core/handshake-checks.ts";
import { encodeFrame, FrameDecoder, MAX_FRAME_BYTES } from "./frame.ts";
import { check, type Frame } from "./messages.ts";

// The two ways a wait on a connection ends without a frame; they are errors of their own (not
// protocol violations) and are exported here too, where they arise.
export { FrameTimeout, PeerClosed };

/** A body up to this size is read without a reservation (one socket read is up to 64 KiB anyway). */
export const UNRESERVED_BODY_BYTES = 64 << 10;
/** How long close() waits for the peer to read what was sent before the socket is destroyed. */
const CLOSE_GRACE_MS = 2000;
/** Replies the peer has not read beyond this stop us reading its requests. */
export const WRITE_BACKLOG_BYTES = 1 << 20;

/**
 * The bytes that the frame bodies being read by one process's connections may hold in total. A
 * body over UNRESERVED_BODY_BYTES is read only under a reservation of its whole declared length,
 * held until its frame is taken by a receive. Reservations are all-or-nothing and granted in
 * arrival order, so a connection holding one can always complete its frame (no deadlock), and a
 * large frame is not starved by smaller ones.
 */
export class ReadBudget {
  private used = 0;
  private readonly queue: { bytes: number; grant: () => void }[] = [];

  constructor(readonly limitBytes: number) {
    assert.ok(limitBytes >= MAX_FRAME_BYTES, `a read budget of ${limitBytes} bytes cannot hold one ${MAX_FRAME_BYTES}-byte frame`);
  }

  get reservedBytes(): number {
    return this.used;
  }

  /**
   * Reserves `bytes`. Returns null when granted at once (`grant` is then not called); otherwise
   * queues the request and returns its cancel function; `grant` is called when it is granted.
   */
  reserve(bytes: number, grant: () => void): (() => void) | null {
    if (this.queue.length === 0 && this.used + bytes <= this.limitBytes) {
      this.used += bytes;
      return null;
    }
    const entry = { bytes, grant };
    this.queue.push(entry);
    return () => {
      const i = this.queue.indexOf(entry);
      if (i >= 0) this.queue.splice(i, 1);
      this.grantQueued();
    };
  }

  release(bytes: number): void {
    this.used -= bytes;
    if (this.used < 0) throw new Error(`read budget released ${-this.used} bytes more than it reserved`);
    this.grantQueued();
  }

  private grantQueued(): void {
    while (this.queue.length > 0 && this.used + this.queue[0]!.bytes <= this.limitBytes) {
      const next = this.queue.shift()!;
      this.used += next.bytes;
      next.grant();
    }
  }
}

export interface ConnectionLimits {
  /** The frame cap until authenticated(). Default MAX_FRAME_BYTES (a connection we dialled). */
  firstFrameBytes?: number;
  /** The process's budget for large bodies; without one, bodies need no reservation. */
  budget?: ReadBudget;
}

type Waiter = { resolve: (v: unknown) => void; reject: (e: Error) => void };

export class Connection {
  readonly remote: string;
  private readonly decoder: FrameDecoder;
  private readonly budget: ReadBudget | null;
  /** The one frame decoded ahead of its receive, and the reservation its body held. */
  private slot: { frame: unknown; reserved: number } | null = null;
  /** Reserved for the body being read. */
  private reserved = 0;
  private cancelReservation: (() => void) | null = null;
  private waiter: Waiter | null = null;
  private ended: Error | null = null;
  private broken = false;
  private reading = false;

  constructor(
    readonly socket: Socket,
    limits: ConnectionLimits = {},
  ) {
    this.remote = `${socket.remoteAddress ?? "?"}:${socket.remotePort ?? "?"}`;
    this.decoder = new FrameDecoder(limits.firstFrameBytes ?? MAX_FRAME_BYTES);
    this.budget = limits.budget ?? null;
    socket.setNoDelay(true);
    socket.on("data", (data: Buffer) => {
      this.decoder.push(data);
      this.pump();
    });
    socket.on("drain", () => this.flow());
    socket.on("end", () => this.fail(new PeerClosed(`${this.remote} closed the connection`)));
    socket.on("close", () => {
      this.fail(new PeerClosed(`${this.remote} closed the connection`));
      this.releaseAll();
    });
    socket.on("error", (err) => this.fail(new PeerClosed(`connection to ${this.remote} failed: ${err.message}`, { cause: err })));
    this.flow();
  }

  get closed(): boolean {
    return this.ended !== null || this.socket.destroyed;
  }

  /** The peer proved the token: its frames may now be as large as MAX_FRAME_BYTES. */
  authenticated(): void {
    this.decoder.limit = MAX_FRAME_BYTES;
  }

  send(frame: Frame): void {
    if (this.socket.destroyed || !this.socket.writable) throw new PeerClosed(`cannot send '${frame.type}': ${this.remote} is gone`);
    this.socket.write(encodeFrame(frame));
    this.flow();
  }

  /** The next frame, validated against `schema`. Rejects with FrameTimeout, PeerClosed or ProtocolError. */
  async receive<T>(schema: z.ZodType<T>, timeoutMs: number): Promise<T> {
    const raw = await this.receiveRaw(timeoutMs);
    const r = check(schema, raw);
    if (!r.ok) throw new ProtocolError(r.reason);
    return r.frame;
  }

  /** Sends a request and waits for its reply. */
  async request<T>(frame: Frame, schema: z.ZodType<T>, timeoutMs: number): Promise<T> {
    this.send(frame);
    return this.receive(schema, timeoutMs);
  }

  receiveRaw(timeoutMs: number): Promise<unknown> {
    if (this.waiter) return Promise.reject(new Error("two concurrent receives on one connection"));
    // Bytes that arrived before this receive (and before a change of the cap) are decoded now.
    this.decodeAhead();
    if (this.slot) {
      const frame = this.take();
      this.flow();
      return Promise.resolve(frame);
    }
    if (this.ended) return Promise.reject(this.ended);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = null;
        reject(new FrameTimeout(noFrameWithin(this.remote, timeoutMs)));
      }, timeoutMs);
      this.waiter = {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      this.pump();
    });
  }

  /** Half-closes after flushing what was sent, and destroys the socket shortly after. */
  close(): void {
    if (this.socket.destroyed) return;
    this.socket.end();
    // Cleared when the peer closes first, so a closed connection is not kept alive for the grace.
    const timer = setTimeout(() => this.socket.destroy(), CLOSE_GRACE_MS).unref();
    this.socket.once("close", () => clearTimeout(timer));
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** Decodes ahead, hands a frame to a waiting receive, reserves for a large body, and reads on or not. */
  private pump(): void {
    this.decodeAhead();
    if (this.slot && this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      // Nothing more is decoded until the next receive or the next bytes, so the receiver can
      // change the cap (authenticated()) before the frame after this one is read.
      w.resolve(this.take());
    }
    this.reserveForBody();
    this.flow();
  }

  private decodeAhead(): void {
    if (this.slot || this.broken) return;
    let frame: unknown;
    try {
      frame = this.decoder.next();
    } catch (err) {
      this.broken = true;
      this.fail(err as Error);
      return;
    }
    if (frame === undefined) return;
    this.slot = { frame, reserved: this.reserved };
    this.reserved = 0;
  }

  private take(): unknown {
    const slot = this.slot!;
    this.slot = null;
    if (slot.reserved > 0) this.budget!.release(slot.reserved);
    return slot.frame;
  }

  private reserveForBody(): void {
    const body = this.decoder.bodyPending();
    if (!this.budget || body === null || body <= UNRESERVED_BODY_BYTES || this.reserved > 0 || this.cancelReservation) return;
    // A connection whose decoded frame waits for its receiver reserves nothing meanwhile.
    if (this.slot || this.broken) return;
    const cancel = this.budget.reserve(body, () => {
      this.cancelReservation = null;
      this.reserved = body;
      this.flow();
    });
    if (cancel) this.cancelReservation = cancel;
    else this.reserved = body;
  }

  private flow(): void {
    // Bytes beyond what the frame being read needs are read only once a receive consumed the
    // frames before them: more than that buffered means a complete frame (or a framing error)
    // is waiting to be decoded by the next receive.
    const body = this.budget ? this.reserved : (this.decoder.bodyPending() ?? 0);
    const readAhead = Math.max(Math.min(UNRESERVED_BODY_BYTES, this.decoder.limit), body);
    const hold =
      this.broken ||
      this.slot !== null ||
      this.cancelReservation !== null ||
      this.decoder.bufferedBytes > readAhead ||
      this.socket.writableLength > WRITE_BACKLOG_BYTES;
    if (hold && this.reading) {
      this.socket.pause();
      this.reading = false;
    } else if (!hold && !this.reading) {
      this.socket.resume();
      this.reading = true;
    }
  }

  private releaseAll(): void {
    this.cancelReservation?.();
    this.cancelReservation = null;
    if (this.reserved > 0) this.budget!.release(this.reserved);
    this.reserved = 0;
    if (this.slot && this.slot.reserved > 0) this.budget!.release(this.slot.reserved);
    if (this.slot) this.slot.reserved = 0;
  }

  private fail(err: Error): void {
    if (!this.ended) this.ended = err;
    if (this.broken) this.flow();
    if (this.waiter && !this.slot) {
      const w = this.waiter;
      this.waiter = null;
      w.reject(this.ended);
    }
    // A framing error leaves the socket open so the owner can send its refusal before closing.
  }
}

/** Opens a connection; rejects with the OS error (ECONNREFUSED, ETIMEDOUT…) after `timeoutMs`. */
export function dial(host: string, port: number, timeoutMs: number): Promise<Connection> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`connect timed out after ${timeoutMs / 1000}s`));
    }, timeoutMs);
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.removeAllListeners("error");
      resolve(new Connection(socket));
    });
    socket.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}
